"""The part every framework adapter shares: a window per conversation, synced with the framework's
history through a conversion to chat messages, and its output mapped back to the framework's own
objects wherever the window did not change them."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, NamedTuple

from ctxwindow.errors import MissingDependencyError
from ctxwindow.messages import Message
from ctxwindow.sync import sync_window
from ctxwindow.window import ContextWindow

__all__ = ["Bridge", "Windows", "Piece", "missing", "SOURCE"]

#: The key under which a converted message names the framework object it came from. The token
#: counter ignores it; it never leaves the adapter (it is stripped from what the model gets).
SOURCE = "_ctxwindow_source"


def missing(package: str, extra: str) -> MissingDependencyError:
    return MissingDependencyError(f"this adapter needs the {package} package: pip install 'ctxwindow[{extra}]'")


class Piece(NamedTuple):
    """A run of the window's output: ``source`` is the framework object these messages are
    exactly the conversion of (None for a message the window wrote or rewrote); ``origin`` the
    object a rewritten message came from (None for one the window wrote)."""

    source: object | None
    messages: list[Message]
    origin: object | None = None


class Bridge:
    """One conversation: a window and the framework objects behind its messages.

    Memory: one entry per framework message of the current history (the framework holds those
    objects anyway); entries of histories no longer synced are dropped when they outnumber the
    current ones."""

    def __init__(self, window: ContextWindow, to_chat: Callable[[Any], Sequence[Message]]) -> None:
        self.window = window
        self._to_chat = to_chat
        self._sources: dict[int, tuple[object, list[Message]]] = {}
        self.lock = threading.Lock()

    def _convert(self, item: object) -> list[object]:
        messages = [dict(m) for m in self._to_chat(item)]
        # System messages become the window's system prompt, not conversation messages: an item
        # is matched on the others.
        self._sources[id(item)] = (item, [m for m in messages if m.get("role") not in ("system", "developer")])
        return [m if m.get("role") in ("system", "developer") else {**m, SOURCE: id(item)} for m in messages]

    def sync(self, items: list[Any]) -> None:
        """Hands the window the framework's whole history (only new items are converted)."""
        sync_window(self.window, items, self._convert)
        if len(self._sources) > 2 * len(items) + 64:
            held = {m.get(SOURCE) for m in self.window.messages()}
            held.update(id(item) for item in items)
            self._sources = {key: value for key, value in self._sources.items() if key in held}

    def pieces(self) -> Iterator[Piece]:
        """The window's ``messages()``, grouped by the framework object each run is exactly the
        conversion of; messages written or changed by the window come one by one, unattached."""
        messages = self.window.messages()
        index = 0
        while index < len(messages):
            message = messages[index]
            key = message.get(SOURCE)
            entry = self._sources.get(key) if isinstance(key, int) else None
            if entry is not None and entry[1]:
                source, converted = entry
                run = messages[index:index + len(converted)]
                if len(run) == len(converted) and all(
                        m.get(SOURCE) == key and _strip(m) == c for m, c in zip(run, converted)):
                    yield Piece(source, [_strip(m) for m in run], source)
                    index += len(converted)
                    continue
            yield Piece(None, [_strip(message)], entry[0] if entry is not None else None)
            index += 1


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
