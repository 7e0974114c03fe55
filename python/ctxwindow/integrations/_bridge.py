"""The part every framework adapter shares: a window per conversation, synced with the framework's
history through a conversion to chat messages, and its output mapped back to the framework's own
objects wherever the window did not change them.

What the model receives is ``window.messages()`` whole: the system blocks (the system prompt,
the standing instructions whose message left the conversation, context, notes, recall) and the
conversation. Frameworks that keep the processed history as their own (LangChain with
``persist=True``, Pydantic AI) hand that output back on the next call; :meth:`Bridge.sync`
recognises it and gives the window the history it was made from, so nothing the window already
compacted is read back as conversation or as system prompt (a rule whose message was evicted
stays in force, a block is never folded into the system prompt a second time)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, NamedTuple

from ctxwindow.errors import MissingDependencyError
from ctxwindow.messages import Message
from ctxwindow.window import ContextWindow

__all__ = ["Bridge", "Windows", "Piece", "missing", "SOURCE", "SYSTEM_ROLES"]

#: The key under which a converted message names the framework object it came from. The token
#: counter ignores it; it never leaves the adapter (it is stripped from what the model gets).
SOURCE = "_ctxwindow_source"

#: The roles of the blocks sent before the conversation.
SYSTEM_ROLES = ("system", "developer")


def missing(package: str, extra: str) -> MissingDependencyError:
    return MissingDependencyError(f"this adapter needs the {package} package: pip install 'ctxwindow[{extra}]'")


class Piece(NamedTuple):
    """A run of the window's output: ``source`` is the framework object these messages are
    exactly the conversion of (None for a message the window wrote or rewrote, and for the
    system blocks); ``origin`` the object a rewritten message came from (None for one the window
    wrote)."""

    source: object | None
    messages: list[Message]
    origin: object | None = None

    @property
    def is_block(self) -> bool:
        """A system block (sent before the conversation), not a conversation message."""
        return self.source is None and self.messages[0].get("role") in SYSTEM_ROLES


class Bridge:
    """One conversation: a window and the framework objects behind its messages.

    Memory: one entry per framework message of the conversation's history (the framework holds
    those objects anyway; with a history the framework keeps compacted, the bridge holds the
    ones the window was given, as the framework would without compaction); entries of histories
    no longer synced are dropped when they outnumber the current ones."""

    def __init__(self, window: ContextWindow, to_chat: Callable[[Any], Sequence[Message]]) -> None:
        self.window = window
        self._to_chat = to_chat
        #: id(item) -> (item, its conversation messages (SOURCE-tagged), all its messages as synced)
        self._sources: dict[int, tuple[object, list[Message], list[Message]]] = {}
        self.lock = threading.Lock()
        #: What travels beside the history (the framework's system prompt), as last seen.
        self.lead: list[Any] = []
        #: The tool schemas last given to the window (adapters compare before re-counting).
        self.tool_key: tuple[str, ...] | None = None
        self._items: list[Any] = []  # the history last given to the window, lead included
        self._flat: list[Message] = []  # its conversion, as handed to ``window.sync``
        self._full: list[Any] = []  # the history last given to the window, lead excluded
        self._output: list[Any] = []  # what the adapter last returned in its place
        self._full_at_output: list[Any] = []
        #: How many items of :attr:`history` the last sync found as the previous one had them.
        self.unchanged = 0

    def _convert(self, item: object) -> list[Message]:
        entry = self._sources.get(id(item))
        if entry is not None and entry[0] is item:
            return entry[2]
        messages = [dict(m) for m in self._to_chat(item)]
        # System messages become the window's system prompt, not conversation messages: an item
        # is matched on the others.
        tagged = [m if m.get("role") in SYSTEM_ROLES else {**m, SOURCE: id(item)} for m in messages]
        self._sources[id(item)] = (item, [m for m in messages if m.get("role") not in SYSTEM_ROLES], tagged)
        return tagged

    @property
    def history(self) -> list[Any]:
        """The history last given to the window (after :meth:`expand`), lead excluded."""
        return self._full

    def expand(self, items: list[Any]) -> list[Any]:
        """``items`` with what this bridge last returned (:meth:`remember`), when they begin with
        it, replaced by the history that output was made from."""
        output = self._output
        count = len(output)
        if count and len(items) >= count and items[:count] == output:
            return self._full_at_output + items[count:]
        return items

    def remember(self, output: list[Any]) -> None:
        """Records what the adapter returned to the framework in place of the history last
        synced, for a framework that keeps it as its history (see :meth:`expand`)."""
        self._output = list(output)
        self._full_at_output = self._full

    def sync(self, items: Sequence[Any], *, own_output: bool = False) -> None:
        """Hands the window the framework's whole history, after :attr:`lead` (only new items
        are converted and counted). With ``own_output`` the history may begin with what this
        bridge returned last (see :meth:`expand`)."""
        every = self.lead + (self.expand(list(items)) if own_output else list(items))
        known = len(self._items)
        if known and len(every) >= known and every[:known] == self._items:
            # Equal items already synced keep their first objects (the pieces name those).
            every = self._items + every[known:]
            flat = self._flat + [m for item in every[known:] for m in self._convert(item)]
        else:
            flat = [m for item in every for m in self._convert(item)]
        self.window.sync(flat)
        full = every[len(self.lead):]
        before = self._full
        self.unchanged = len(before) if len(full) >= len(before) and full[:len(before)] == before else 0
        self._items, self._flat, self._full = every, flat, full
        if len(self._sources) > 2 * len(every) + 64:
            held = {id(item) for item in every}
            self._sources = {key: value for key, value in self._sources.items() if key in held}

    def pieces(self) -> Iterator[Piece]:
        """The window's ``messages()``, the system blocks first, one by one; then the
        conversation grouped by the framework object each run is exactly the conversion of;
        messages written or changed by the window come one by one, unattached."""
        messages = self.window.messages()
        index = 0
        while index < len(messages):
            message = messages[index]
            key = message.get(SOURCE)
            entry = self._sources.get(key) if isinstance(key, int) else None
            if entry is not None and entry[1]:
                source, converted = entry[0], entry[1]
                run = messages[index:index + len(converted)]
                if len(run) == len(converted) and all(
                        m.get(SOURCE) == key and _strip(m) == c for m, c in zip(run, converted)):
                    yield Piece(source, [_strip(m) for m in run], source)
                    index += len(converted)
                    continue
            yield Piece(None, [_strip(message)], entry[0] if entry is not None else None)
            index += 1


def split(pieces: Iterator[Piece]) -> tuple[list[Message], list[Piece]]:
    """The system blocks (in order) and the conversation's pieces of the window's output."""
    blocks: list[Message] = []
    conversation: list[Piece] = []
    for piece in pieces:
        if piece.is_block and not conversation:
            blocks.extend(piece.messages)
        else:
            conversation.append(piece)
    return blocks, conversation


def _strip(message: Message) -> Message:
    if SOURCE not in message:
        return message
    return {k: v for k, v in message.items() if k != SOURCE}


class Windows:
    """A bounded map from conversation keys (a LangGraph thread id, a session id) to bridges,
    least recently used first out (``max_conversations`` of them)."""

    def __init__(self, settings: dict[str, Any], to_chat: Callable[[Any], Sequence[Message]],
                 max_conversations: int = 256) -> None:
        ContextWindow(**settings)  # bad settings fail here, with the window's own errors
        self._settings = settings
        self._to_chat = to_chat
        self._bridges: OrderedDict[Hashable, Bridge] = OrderedDict()
        self._max = max_conversations
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Bridge:
        with self._lock:
            bridge = self._bridges.get(key)
            if bridge is None:
                bridge = Bridge(ContextWindow(**self._settings), self._to_chat)
                self._bridges[key] = bridge
                while len(self._bridges) > self._max:
                    self._bridges.popitem(last=False)
            else:
                self._bridges.move_to_end(key)
            return bridge
