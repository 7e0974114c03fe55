"""The types every part of the package shares, each defined here once.

- :data:`Message`: a chat message in the canonical form (an OpenAI chat dict; see
  :mod:`ctxwindow.messages`).
- :class:`SupportsModelDump` and :data:`MessageLike`: what ``add``, ``extend`` and ``sync`` take (a
  chat dict or an OpenAI SDK message object).
- :class:`TextCounter` and :class:`TokenCounter`: the two token-counter protocols. A
  ``TextCounter`` counts text (all that rendering tool definitions needs; any object with a
  ``count(text) -> int`` method); a ``TokenCounter`` is what the window needs of its counter
  (text, many texts, messages with the chat accounting), which every tokenizer of
  :mod:`ctxwindow.tokenizer` is.
- :class:`Entry`: one message held by a window, as strategies see it.

This module imports nothing else from the package, so any module may import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, Union, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Message", "SupportsModelDump", "MessageLike", "TextCounter", "TokenCounter", "Entry"]

#: A chat message in the canonical form: ``{"role", "content", "tool_calls", "tool_call_id",
#: "name"}`` (see :mod:`ctxwindow.messages`).
Message = dict[str, Any]


class SupportsModelDump(Protocol):
    """A pydantic model (the OpenAI SDK's message types)."""

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]: ...


#: What ``add``, ``extend`` and ``sync`` take: a chat dict or an OpenAI SDK message object.
MessageLike = Union[Mapping[str, Any], SupportsModelDump]


@runtime_checkable
class TextCounter(Protocol):
    """Counts the tokens of a text: the least a counter must do (a provider SDK's counter
    wrapped in an object, say)."""

    def count(self, text: str) -> int: ...


@runtime_checkable
class TokenCounter(TextCounter, Protocol):
    """What the rest of the package needs of a token counter: the text counts of
    :class:`TextCounter`, and the chat accounting of messages
    (:meth:`ctxwindow.Tokenizer.count_messages`)."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool: ...

    def count_many(self, texts: Sequence[str]) -> npt.NDArray[np.uint32]: ...

    def count_message(self, message: Mapping[str, Any]) -> int: ...

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int: ...


class Entry(NamedTuple):
    """One message in the window. Entries are values (a named tuple: one is made for every
    message added, so it must be cheap): a strategy that rewrites a message puts a new entry in
    its place (``CompactionState.rewrite``), so a plan that is refused leaves the window's own
    entries untouched.

    ``group`` is assigned by the conversation store from the message itself: a tool call's
    group is the ``seq`` of the assistant message that makes the call, and its results join it by
    ``tool_call_id``; every other message is a group of its own. A strategy never decides
    groups, so a rewritten assistant message keeps its results."""

    message: Message
    tokens: int
    seq: int
    group: int
    turn: int
    pinned: bool = False
    #: The message as added, when a strategy has rewritten it.
    original: Message | None = None
    #: "message" (added by the user of the window), "summary" (a ``[Conversation Summary]``
    #: written by :class:`~ctxwindow.strategies.Summarize`) or "inserted" (any other message a
    #: strategy wrote, such as a placeholder for evicted messages). Only a "message" can be the
    #: newest user message.
    kind: str = "message"

    @property
    def role(self) -> str:
        """The message's role."""
        return str(self.message.get("role"))
