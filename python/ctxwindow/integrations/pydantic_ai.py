"""Pydantic AI 2.x: a history processor (``pip install 'ctxwindow[pydantic-ai]'``).

.. code-block:: python

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from ctxwindow.integrations.pydantic_ai import history_processor

    agent = Agent("openai:gpt-4o", system_prompt="You are a coding agent.",
                  capabilities=[ProcessHistory(history_processor(model="gpt-4o", max_tokens=32_000))])

Supported: Pydantic AI 2.x, where processors are installed as the ``ProcessHistory`` capability
(1.x's ``Agent(history_processors=[...])`` argument no longer exists in 2.x; the processor itself
is the same plain callable, so it also works there). Sync and async runs alike (the processor is
a plain function, which Pydantic AI runs off the event loop).

Before every model request the history is exactly what ``ContextWindow.messages()`` holds for it:
within ``max_tokens - reserve_output``, tool calls never split from their returns, and the
window's blocks as ``SystemPromptPart``s opening the first request: the system prompt (the
history's own parts, dynamic ones included), then the standing instructions whose message left
the history, context, notes and recall (parts with ``dynamic_ref="ctxwindow:block"``). The
agent's ``instructions`` are counted with the system prompt and left where Pydantic AI sends them
from. Pydantic AI keeps the processed history as the run's (and hands it back with
``message_history``): the processor recognises it as its own output and gives the window the
history it was made from, so no block is read back into the system prompt, a rule whose message
was evicted stays in force run after run, and a removed or superseded instruction leaves the
next request. Parts are converted both ways: ``SystemPromptPart`` (and a request's ``instructions``) to
the system prompt, ``UserPromptPart`` to user messages (text and images), ``TextPart`` and
``ToolCallPart`` to an assistant message, ``ToolReturnPart`` (retried ones included) and 1.x's
``RetryPromptPart`` answering a tool call to tool messages, ``RetryFeedbackPart`` (and a retry
prompt without a tool) to a user message. Parts with no chat text (thinking, built-in tool and
capability bookkeeping) are not counted; they travel with their message when it is kept. A message the window
keeps unchanged is returned as the very ``ModelMessage`` object it was given (timestamps, usage,
thinking parts and all); a message the window rewrote or wrote comes back as a new request or
response with the window's text. Pydantic AI 2.x makes the processed history the run's history,
so a compaction stays compacted in the run's messages. Tool schemas are not visible to a history
processor: pass them as ``tools=`` (OpenAI tool dicts) if the budget should count them.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ctxwindow.errors import MalformedMessageError
from ctxwindow.integrations._bridge import Bridge, Piece, Windows, missing, split
from ctxwindow.messages import Message

try:
    from pydantic_ai.messages import (
        BaseToolReturnPart,
        BinaryContent,
        ImageUrl,
        ModelMessage,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryFeedbackPart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise missing("pydantic-ai-slim (>= 2)", "pydantic-ai") from error

__all__ = ["history_processor", "HistoryProcessor", "to_chat", "from_chat"]


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, ImageUrl):
            parts.append({"type": "image_url", "image_url": {"url": item.url}})
        elif isinstance(item, BinaryContent) and item.is_image:
            data = base64.b64encode(item.data).decode()
            parts.append({"type": "image_url", "image_url": {"url": f"data:{item.media_type};base64,{data}"}})
        else:
            raise MalformedMessageError(
                f"user content of type {type(item).__name__} is not supported (text and images are)")
    return parts


def to_chat(message: ModelMessage) -> list[Message]:
    """One Pydantic AI message as canonical chat messages."""
    out: list[Message] = []
    if isinstance(message, ModelRequest):
        if message.instructions:
            out.append({"role": "system", "content": message.instructions})
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                out.append({"role": "system", "content": part.content})
            elif isinstance(part, UserPromptPart):
                out.append({"role": "user", "content": _user_content(part.content)})
            elif isinstance(part, BaseToolReturnPart):  # tool returns, retried ones included
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()})
            elif isinstance(part, RetryFeedbackPart):
                out.append({"role": "user", "content": part.model_response()})
            elif isinstance(part, RetryPromptPart):  # 1.x's retry part
                if part.tool_name is not None:
                    out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()})
                else:
                    out.append({"role": "user", "content": part.model_response()})
            # Other parts (capability and instruction bookkeeping) carry no chat text.
        return out
    text = "\n".join(p.content for p in message.parts if isinstance(p, TextPart))
    calls = [{"id": p.tool_call_id, "type": "function",
              "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
             for p in message.parts if isinstance(p, ToolCallPart)]
    assistant: Message = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        assistant["tool_calls"] = calls
    return [assistant]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def from_chat(messages: Sequence[Message]) -> list[ModelMessage]:
    """Canonical chat messages as Pydantic AI messages: consecutive system, user and tool
    messages in one ``ModelRequest``, each assistant message a ``ModelResponse``."""
    out: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []
    names: dict[str, str] = {}
    for message in messages:
        role = message["role"]
        if role == "assistant":
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            response: list[ModelResponsePart] = []
            if message.get("content"):
                response.append(TextPart(_content_text(message["content"])))
            for call in message.get("tool_calls") or []:
                function = call["function"]
                names[call["id"]] = function["name"]
                response.append(ToolCallPart(function["name"], function["arguments"], tool_call_id=call["id"]))
            out.append(ModelResponse(parts=response))
        elif role in ("system", "developer"):
            parts.append(SystemPromptPart(_content_text(message["content"])))
        elif role == "user":
            content = message["content"]
            parts.append(UserPromptPart(content if isinstance(content, str) else [
                p["text"] if p.get("type") == "text" else ImageUrl(url=p["image_url"]["url"]) for p in content]))
        else:
            call_id = str(message["tool_call_id"])
            parts.append(ToolReturnPart(names.get(call_id, "tool"), _content_text(message["content"]),
                                        tool_call_id=call_id))
    if parts:
        out.append(ModelRequest(parts=parts))
    return out


#: The ``dynamic_ref`` of the system prompt parts that carry the window's blocks (Pydantic AI
#: re-runs only the functions it knows by ref, so it leaves these alone); a history handed back
#: with them is recognised and they are not read as system prompt.
BLOCK_REF = "ctxwindow:block"


def _is_block(part: object) -> bool:
    return isinstance(part, SystemPromptPart) and part.dynamic_ref == BLOCK_REF


class _Instructions(NamedTuple):
    """The instructions of the latest request: Pydantic AI sends them beside the history."""

    text: str


def _history_chat(item: Any) -> list[Message]:
    if isinstance(item, _Instructions):
        return [{"role": "system", "content": item.text}]
    if isinstance(item, ModelRequest):
        if item.instructions or any(_is_block(p) for p in item.parts):
            item = replace(item, instructions=None, parts=[p for p in item.parts if not _is_block(p)])
    return to_chat(item)


def _latest_instructions(messages: Sequence[ModelMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and message.instructions is not None:
            return message.instructions
    return None


def _system_parts(message: object) -> list[SystemPromptPart]:
    if not isinstance(message, ModelRequest):
        return []
    return [p for p in message.parts if isinstance(p, SystemPromptPart) and not _is_block(p)]


def _without_system(request: ModelRequest) -> ModelRequest | None:
    parts = [p for p in request.parts if not isinstance(p, SystemPromptPart)]
    if len(parts) == len(request.parts):
        return request
    return replace(request, parts=parts) if parts else None


def _merged(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Consecutive requests as one, as Pydantic AI merges them when a run starts (so the history
    it keeps holds the very objects returned here)."""
    out: list[ModelMessage] = []
    for message in messages:
        last = out[-1] if out else None
        if isinstance(message, ModelRequest) and isinstance(last, ModelRequest) and (
                not last.instructions or not message.instructions or last.instructions == message.instructions):
            parts = [*last.parts, *message.parts]
            parts.sort(key=lambda p: not isinstance(p, BaseToolReturnPart))  # tool results first
            out[-1] = replace(last, parts=parts, instructions=last.instructions or message.instructions,
                              timestamp=message.timestamp or last.timestamp)
        else:
            out.append(message)
    return out


class HistoryProcessor:
    """The processor :func:`history_processor` returns: call it with the run's messages. Its
    :attr:`window` is the :class:`~ctxwindow.ContextWindow` behind it (usage, events, notes,
    instructions)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._windows = Windows(settings, _history_chat, max_conversations=1)
        self._scanned: tuple[int, list[SystemPromptPart]] = (0, [])

    @property
    def window(self) -> Any:
        return self._bridge.window

    @property
    def _bridge(self) -> Bridge:
        return self._windows.get(None)

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        bridge = self._bridge
        with bridge.lock:
            instructions = _latest_instructions(messages)
            bridge.lead = [_Instructions(instructions)] if instructions else []
            bridge.sync(messages, own_output=True)
            blocks, pieces = split(bridge.pieces())
            out = _merged(self._conversation(pieces))
            parts = self._block_parts(bridge, blocks, instructions)
            if parts:
                first = out[0] if out else None
                if isinstance(first, ModelRequest):
                    out[0] = replace(first, parts=[*parts, *first.parts])
                else:
                    out.insert(0, ModelRequest(parts=parts))
            bridge.remember(out)
        return out

    @staticmethod
    def _conversation(pieces: list[Piece]) -> list[ModelMessage]:
        out: list[ModelMessage] = []
        loose: list[Message] = []
        for piece in pieces:
            if piece.source is None:
                loose.extend(piece.messages)
                continue
            out.extend(from_chat(loose))
            loose = []
            source: Any = piece.source
            # The system prompt travels with the blocks, at the front.
            kept = _without_system(source) if isinstance(source, ModelRequest) else source
            if kept is not None:
                out.append(kept)
        out.extend(from_chat(loose))
        return out

    def _own_system_parts(self, bridge: Bridge) -> list[SystemPromptPart]:
        """The history's system prompt parts, in order (only new items are looked at)."""
        history = bridge.history
        scanned, parts = self._scanned
        if bridge.unchanged < scanned:
            scanned, parts = 0, []
        parts = parts + [p for item in history[scanned:] for p in _system_parts(item)]
        self._scanned = (len(history), parts)
        return parts

    def _block_parts(self, bridge: Bridge, blocks: list[Message], instructions: str | None) -> list[ModelRequestPart]:
        """The window's blocks as system prompt parts. The first block is the system prompt: the
        history's own parts (dynamic ones keep their ref) when it is their text, since the
        instructions are sent beside the history by Pydantic AI itself."""
        if not blocks:
            return []
        own = self._own_system_parts(bridge)
        texts = ([instructions] if instructions else []) + [p.content for p in own]
        first: list[ModelRequestPart]
        if texts and blocks[0]["content"] == "\n\n".join(texts):
            first = list(own)
        else:
            first = [SystemPromptPart(_content_text(blocks[0]["content"]), dynamic_ref=BLOCK_REF)]
        return first + [SystemPromptPart(_content_text(b["content"]), dynamic_ref=BLOCK_REF) for b in blocks[1:]]


def history_processor(model: str | None = None, *, max_tokens: int, **settings: Any) -> HistoryProcessor:
    """A Pydantic AI history processor keeping every request within ``max_tokens`` (see the
    module documentation); ``model`` names the tokenizer, other keyword arguments are
    :class:`~ctxwindow.ContextWindow` settings. Use one processor per conversation (another
    conversation through the same processor is handled correctly, by a rebuild)."""
    return HistoryProcessor({"model": model, "max_tokens": max_tokens, **settings})
