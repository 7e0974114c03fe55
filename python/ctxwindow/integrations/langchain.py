"""LangChain v1: a middleware for ``create_agent`` and a token counter for ``trim_messages``
(``pip install 'ctxwindow[langchain]'``).

.. code-block:: python

    from langchain.agents import create_agent
    from ctxwindow.integrations.langchain import ContextWindowMiddleware

    agent = create_agent(model, tools=tools, system_prompt="You are a coding agent.",
                         middleware=[ContextWindowMiddleware(model="gpt-4o", max_tokens=32_000)])

Before every model call the request is exactly what ``ContextWindow.messages()`` sends for the
graph state: within ``max_tokens - reserve_output`` counting the system prompt and the tool
schemas, tool calls never split from their results, and every system block of the window (the
system prompt, standing instructions whose message left the conversation, context, notes,
recall) as a ``SystemMessage`` of its own, the first as the request's ``system_message`` (the
agent's own object when the window sends its prompt unchanged). The graph state keeps the full
history (only the request is trimmed); with ``persist=True`` the compacted conversation is
written back into the state instead (before each model call the state's messages are replaced
by the window's; the blocks still go into each request, never into the state). The next call
recognises that state as the window's own output, so a standing instruction whose message was
compacted away stays in force. Pass the system prompt and tool schemas as ``system=`` /
``tools=`` with ``persist=True`` so that the first compaction already counts them (a
``before_model`` hook does not see the request; later ones use the request's). One window per
LangGraph ``thread_id``, synced incrementally (:meth:`ctxwindow.ContextWindow.sync`): only
messages new since the last call are converted and counted. Messages the window did not change
reach the model as the very objects of the state (ids, metadata and all). The window of a
thread is ``middleware.window(thread_id)`` (notes, instructions, usage).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from ctxwindow._native import Tokenizer
from ctxwindow.integrations._bridge import Bridge, Windows, missing, split
from ctxwindow.messages import Message

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest
    from langchain_core.messages import (
        AnyMessage,
        BaseMessage,
        RemoveMessage,
        SystemMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise missing("langchain (>= 1.0)", "langchain") from error

__all__ = ["ContextWindowMiddleware", "token_counter", "to_chat", "from_chat"]


def to_chat(message: BaseMessage) -> list[Message]:
    """One LangChain message as canonical chat messages (OpenAI form)."""
    converted = convert_to_openai_messages(message)
    return [dict(converted)] if isinstance(converted, dict) else [dict(m) for m in converted]


def from_chat(message: Message, origin: object | None = None) -> BaseMessage:
    """A chat message as a LangChain message; a message rewritten by the window keeps the id of
    the LangChain message it came from (``origin``)."""
    converted: BaseMessage = convert_to_messages([message])[0]
    if isinstance(origin, BaseMessage) and origin.id is not None and type(origin) is type(converted):
        converted.id = origin.id
    return converted


#: The id prefix of the system messages a request gets for the window's blocks (never part of
#: the graph state; recognised and left out if a history ever hands one back).
BLOCK_ID = "ctxwindow-block-"


def _is_block(message: object) -> bool:
    return isinstance(message, SystemMessage) and str(message.id or "").startswith(BLOCK_ID)


def _history_chat(message: BaseMessage) -> list[Message]:
    return [] if _is_block(message) else to_chat(message)


def _thread() -> Hashable:
    try:
        from langgraph.config import get_config

        configurable = get_config().get("configurable") or {}
        key = configurable.get("thread_id")
        return key if isinstance(key, Hashable) else None
    except RuntimeError:  # called outside a runnable context
        return None


class ContextWindowMiddleware(AgentMiddleware):
    """A LangChain v1 ``AgentMiddleware`` that keeps every model request inside the budget;
    see the module documentation. ``model`` names the tokenizer (``Tokenizer.for_model``);
    other keyword arguments are :class:`~ctxwindow.ContextWindow` settings (``reserve_output``,
    ``strategies``, ``preserve_recent``, ``profile``, ...). ``max_conversations`` bounds the
    windows kept (one per thread id, least recently used dropped first)."""

    def __init__(self, model: str | None = None, *, max_tokens: int, persist: bool = False,
                 max_conversations: int = 256, **settings: Any) -> None:
        super().__init__()
        self.persist = persist
        self._windows = Windows({"model": model, "max_tokens": max_tokens, **settings}, _history_chat,
                                max_conversations)

    @property
    def name(self) -> str:
        return "ContextWindowMiddleware"

    def window(self, thread_id: Hashable = None) -> Any:
        """The :class:`~ctxwindow.ContextWindow` of a thread (for its ``usage``, events, notes
        and instructions)."""
        return self._windows.get(thread_id).window

    def _set_tools(self, bridge: Bridge, tools: Sequence[Any]) -> None:
        schemas = [convert_to_openai_tool(t) for t in tools] if tools else []
        key = tuple(json.dumps(s, sort_keys=True, default=str) for s in schemas)
        if bridge.tool_key != key:
            bridge.window.set_tools(schemas or None)
            bridge.tool_key = key

    def _managed(self, bridge: Bridge, messages: list[AnyMessage]) -> tuple[list[Message], list[AnyMessage]]:
        """The window's blocks and conversation for this history (the state's own objects
        wherever the window kept a message)."""
        bridge.sync(messages, own_output=self.persist)
        blocks, pieces = split(bridge.pieces())
        out: list[Any] = []
        for piece in pieces:
            if piece.source is not None:
                out.append(piece.source)
            else:
                out.extend(from_chat(m, piece.origin) for m in piece.messages)
        return blocks, out

    def _request(self, request: ModelRequest) -> ModelRequest:
        bridge = self._windows.get(_thread())
        system = request.system_message
        with bridge.lock:
            self._set_tools(bridge, request.tools)
            bridge.lead = [system] if system is not None else []
            blocks, messages = self._managed(bridge, list(request.messages))
        # Every block of the window is a system message of its own, in the window's order; the
        # system prompt stays the request's own object when the window sends it unchanged.
        systems: list[Any] = [SystemMessage(b["content"], id=f"{BLOCK_ID}{i}") for i, b in enumerate(blocks)]
        if systems and system is not None and blocks[0]["content"] == system.text:
            systems[0] = system
        return request.override(messages=systems[1:] + messages, system_message=systems[0] if systems else None)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Sends the window's messages for this state (its blocks included) instead of the full
        history."""
        return handler(self._request(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        """:meth:`wrap_model_call` for async agents."""
        return await handler(self._request(request))

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """With ``persist=True``: writes the window's compacted conversation back into the graph
        state (its blocks go into each request, not into the state)."""
        if not self.persist:
            return None
        messages = list(state["messages"])
        bridge = self._windows.get(_thread())
        with bridge.lock:
            _, managed = self._managed(bridge, messages)
            bridge.remember(managed)
        if len(managed) == len(messages) and all(a is b for a, b in zip(managed, messages)):
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *managed]}

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """:meth:`before_model` for async agents."""
        return self.before_model(state, runtime)


def token_counter(model: str = "gpt-4o", *, max_cached: int = 100_000) -> Callable[[Sequence[BaseMessage]], int]:
    """A counter for ``trim_messages(token_counter=token_counter("gpt-4o"))``, exact for OpenAI
    models (Claude and Gemini get their :class:`~ctxwindow.EstimateTokenizer`): the chat
    accounting of :meth:`ctxwindow.Tokenizer.count_messages` (3 per message, names, tool calls,
    images by tiles, 3 for the reply). Each message is counted once and remembered (by identity,
    up to ``max_cached`` messages), so the many prefix counts ``trim_messages`` asks for cost
    a sum, not a re-tokenization.

    >>> from langchain_core.messages import HumanMessage
    >>> token_counter("gpt-4o")([HumanMessage("hello world")])
    9
    """
    tokenizer = Tokenizer.for_model(model)
    cache: dict[int, tuple[BaseMessage, int]] = {}

    def count(messages: Sequence[BaseMessage]) -> int:
        total = 3
        for message in messages:
            entry = cache.get(id(message))
            if entry is None or entry[0] is not message:
                tokens = sum(tokenizer.count_message(m) for m in to_chat(message))
                if len(cache) >= max_cached:
                    cache.clear()
                cache[id(message)] = (message, tokens)
                total += tokens
            else:
                total += entry[1]
        return total

    return count
