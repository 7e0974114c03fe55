"""OpenAI Agents SDK: a ``Session`` wrapper and a ``call_model_input_filter``
(``pip install 'ctxwindow[openai-agents]'``).

.. code-block:: python

    from agents import Agent, RunConfig, Runner, SQLiteSession
    from ctxwindow.integrations.openai_agents import ContextWindowSession, call_model_input_filter

    session = ContextWindowSession(SQLiteSession("user-42", "chats.db"), model="gpt-4o", max_tokens=32_000)
    config = RunConfig(call_model_input_filter=call_model_input_filter(model="gpt-4o", max_tokens=32_000))
    result = await Runner.run(agent, "Fix the failing test", session=session, run_config=config)

Use both. The runner reads the session once per ``Runner.run`` and then keeps the items of that
run (model outputs, tool results) in memory, adding them to every model call of the run:

- :class:`ContextWindowSession` wraps any session (e.g. ``SQLiteSession``): the inner session
  keeps every item; ``get_items()`` returns the managed ones (valid pairs, within the budget);
- :func:`call_model_input_filter` manages the input of every model call within a run, so a long
  run of tool calls stays within the budget too. The agent's instructions are counted as the
  system prompt and passed through unchanged.

Items are Responses API items; they are converted with :func:`ctxwindow.messages.from_responses`
one model turn at a time (:func:`ctxwindow.formats.responses_turns`), only turns new since the last
call, and a turn the window keeps unchanged is sent as the very items it was given. Tool schemas
are not visible to a session or an input filter: pass them as ``tools=`` (OpenAI tool dicts) if
the budget should count them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxwindow.formats import responses_turns
from ctxwindow.integrations._bridge import Bridge, Windows, missing
from ctxwindow.messages import Message, from_responses, to_responses

try:
    from agents.run_config import CallModelData, ModelInputData
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise missing("openai-agents", "openai-agents") from error

__all__ = ["ContextWindowSession", "call_model_input_filter", "InputFilter"]

def _turn_to_chat(turn: Any) -> Sequence[Message]:
    return from_responses(list(turn))


def _managed(bridge: Bridge, items: list[Any], instructions: str | None) -> list[Any]:
    """The window's items for this history; the window's own system message left out (the
    instructions travel separately)."""
    turns: list[Any] = responses_turns(items)
    if instructions is not None:
        turns.insert(0, ({"role": "system", "content": instructions},))
    bridge.sync(turns)
    out: list[Any] = []
    for piece in bridge.pieces():
        if piece.source is not None:
            out.extend(piece.source)  # type: ignore[arg-type]
        else:
            out.extend(to_responses([m for m in piece.messages if m["role"] not in ("system", "developer")]))
    return out


class ContextWindowSession:
    """An Agents SDK session that keeps every item in ``inner_session`` and returns the managed
    ones; see the module documentation. Other keyword arguments are
    :class:`~ctxwindow.ContextWindow` settings; ``window`` is the window behind it."""

    def __init__(self, inner_session: Any, model: str | None = None, *, max_tokens: int, **settings: Any) -> None:
        self.inner = inner_session
        self.session_id: str = inner_session.session_id
        self.session_settings = getattr(inner_session, "session_settings", None)
        self._windows = Windows({"model": model, "max_tokens": max_tokens, **settings}, _turn_to_chat, 1)

    @property
    def window(self) -> Any:
        return self._windows.get(None).window

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The managed history (of the latest ``limit`` items of the inner session, if given)."""
        items = list(await self.inner.get_items(limit))
        bridge = self._windows.get(None)
        with bridge.lock:
            return _managed(bridge, items, None)

    async def add_items(self, items: list[Any]) -> None:
        """Stores the items in the inner session (all of them)."""
        await self.inner.add_items(items)

    async def pop_item(self) -> Any:
        """Pops the newest item of the inner session."""
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        """Clears the inner session."""
        await self.inner.clear_session()


class InputFilter:
    """The ``RunConfig(call_model_input_filter=...)`` callable :func:`call_model_input_filter`
    returns; ``window`` is the window behind it."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._windows = Windows(settings, _turn_to_chat, 1)

    @property
    def window(self) -> Any:
        return self._windows.get(None).window

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        bridge = self._windows.get(None)
        with bridge.lock:
            managed = _managed(bridge, list(model_data.input), model_data.instructions)
        return ModelInputData(input=managed, instructions=model_data.instructions)


def call_model_input_filter(model: str | None = None, *, max_tokens: int, **settings: Any) -> InputFilter:
    """A ``call_model_input_filter`` keeping the input of every model call of a run within
    ``max_tokens`` (see the module documentation). Use one per conversation (another
    conversation through the same filter is handled correctly, by a rebuild)."""
    return InputFilter({"model": model, "max_tokens": max_tokens, **settings})

