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

Before every model request the history is what ``ContextWindow.messages()`` keeps of it: within
``max_tokens - reserve_output``, tool calls never split from their returns, the system prompt
kept. Parts are converted both ways: ``SystemPromptPart`` (and a request's ``instructions``) to
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
from typing import Any

from ctxwindow.errors import MalformedMessageError
from ctxwindow.integrations._bridge import Bridge, Windows, missing
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


class HistoryProcessor:
    """The processor :func:`history_processor` returns: call it with the run's messages. Its
    :attr:`window` is the :class:`~ctxwindow.ContextWindow` behind it (usage, events)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._windows = Windows(settings, to_chat, max_conversations=1)

    @property
    def window(self) -> Any:
        return self._bridge.window

    @property
    def _bridge(self) -> Bridge:
        return self._windows.get(None)

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        bridge = self._bridge
        with bridge.lock:
            bridge.sync(list(messages))
            pieces = list(bridge.pieces())
        # A kept request that carries the system prompt already sends it: the window's own
        # system message (the same text) is then not added a second time.
        system_kept = any(isinstance(p.source, ModelRequest) and _has_system(p.source) for p in pieces)
        out: list[ModelMessage] = []
        loose: list[Message] = []
        for piece in pieces:
            if piece.source is not None:
                out.extend(from_chat(loose))
                loose = []
                out.append(piece.source)  # type: ignore[arg-type]
            elif not (system_kept and piece.messages[0]["role"] in ("system", "developer")):
                loose.extend(piece.messages)
        out.extend(from_chat(loose))
        return out


def _has_system(request: ModelRequest) -> bool:
    return bool(request.instructions) or any(isinstance(p, SystemPromptPart) for p in request.parts)


def history_processor(model: str | None = None, *, max_tokens: int, **settings: Any) -> HistoryProcessor:
    """A Pydantic AI history processor keeping every request within ``max_tokens`` (see the
    module documentation); ``model`` names the tokenizer, other keyword arguments are
    :class:`~ctxwindow.ContextWindow` settings. Use one processor per conversation (another
    conversation through the same processor is handled correctly, by a rebuild)."""
    return HistoryProcessor({"model": model, "max_tokens": max_tokens, **settings})
