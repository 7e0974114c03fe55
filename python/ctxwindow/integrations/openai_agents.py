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
  system prompt.

Each sends exactly its window's ``messages()``: the window's system blocks (standing instructions
whose message left the history, context, notes, recall) are system items at the head of the
input. The session's system prompt is its ``system=`` setting (pass the agent's instructions so
that the budget counts them): the SDK sends the instructions itself, so the session leaves that
block out. The filter sends its window's system prompt (the agent's instructions, followed by the
texts of any system items of the input, e.g. the session's blocks) as the call's instructions,
unchanged when the input holds no system item. A rule stated in a message the session evicted
thus reaches every later call, through the session's block.

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
from ctxwindow.integrations._bridge import Bridge, Windows, missing, split
from ctxwindow.messages import Message, from_responses, to_responses

try:
    from agents.run_config import CallModelData, ModelInputData
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise missing("openai-agents", "openai-agents") from error

__all__ = ["ContextWindowSession", "call_model_input_filter", "InputFilter"]

def _turn_to_chat(turn: Any) -> Sequence[Message]:
    return from_responses(list(turn))


def _managed(bridge: Bridge, items: list[Any], instructions: str | None) -> tuple[list[Message], list[Any]]:
    """The window's blocks and its items for this history (the history's own items wherever
    the window kept a model turn unchanged)."""
    bridge.lead = [({"role": "system", "content": instructions},)] if instructions is not None else []
    bridge.sync(responses_turns(items))
    blocks, pieces = split(bridge.pieces())
    out: list[Any] = []
    for piece in pieces:
        turn: Any = piece.source  # a tuple of the history's items
        if turn is not None:
            out.extend(turn)
        else:
            out.extend(to_responses(piece.messages))
    return blocks, out


class ContextWindowSession:
    """An Agents SDK session that keeps every item in ``inner_session`` and returns the managed
    ones; see the module documentation. Other keyword arguments are
    :class:`~ctxwindow.ContextWindow` settings; ``window`` is the window behind it."""

    def __init__(self, inner_session: Any, model: str | None = None, *, max_tokens: int, **settings: Any) -> None:
        self.inner = inner_session
        self.session_id: str = inner_session.session_id
        self.session_settings = getattr(inner_session, "session_settings", None)
        self._windows = Windows({"model": model, "max_tokens": max_tokens, **settings}, _turn_to_chat, 1)
        self._system = settings.get("system")

    @property
    def window(self) -> Any:
        return self._windows.get(None).window

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The managed history (of the latest ``limit`` items of the inner session, if given):
        the window's blocks as system items (standing instructions whose message left the
        history, context, notes, recall; the system prompt only when it is not the ``system=``
        setting, which stands for the agent's instructions the SDK sends itself), then the
        conversation."""
        items = list(await self.inner.get_items(limit))
        bridge = self._windows.get(None)
        with bridge.lock:
            blocks, managed = _managed(bridge, items, None)
        if blocks and blocks[0]["content"] == self._system:
            blocks = blocks[1:]
        return to_responses(blocks) + managed

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
            blocks, managed = _managed(bridge, list(model_data.input), model_data.instructions)
        # The first block is the system prompt (the agent's instructions, with any system items
        # of the input): it goes as the instructions, the other blocks as system items.
        instructions = str(blocks[0]["content"]) if blocks else None
        return ModelInputData(input=to_responses(blocks[1:]) + managed, instructions=instructions)


def call_model_input_filter(model: str | None = None, *, max_tokens: int, **settings: Any) -> InputFilter:
    """A ``call_model_input_filter`` keeping the input of every model call of a run within
    ``max_tokens`` (see the module documentation). Use one per conversation (another
    conversation through the same filter is handled correctly, by a rebuild)."""
    return InputFilter({"model": model, "max_tokens": max_tokens, **settings})

