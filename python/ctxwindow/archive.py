"""The archive protocol: where the originals of evicted, cleared, merged or summarized messages go,
so that a placeholder's retrieval id always resolves.

A window writes to exactly one archive (``ContextWindow(..., archive=...)``; an in-memory
:class:`Archive` by default). Every store that can hold an archive implements
:class:`MessageArchive`: the in-memory archive here, and the checkpoint stores'
``session_archive(session_id)``. A retrieval id names one group of messages (a tool call with its
results comes back whole) and is unique within its archive.

>>> archive = Archive()
>>> retrieval_id = archive.put([{"role": "user", "content": "deploy to eu-west-1"}])
>>> archive.get(retrieval_id)[0]["content"]
'deploy to eu-west-1'
>>> [rid for rid, _ in archive.search("eu-west-1")] == [retrieval_id]
True
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["MessageArchive", "Archive", "archive_text"]

Message = dict[str, Any]
_WORDS = re.compile(r"\w[\w.\-/]*")


@runtime_checkable
class MessageArchive(Protocol):
    """What a window needs of an archive.

    - ``put(messages)`` stores a group of messages (copies) and returns its retrieval id;
    - ``get(retrieval_id)`` returns copies of that group, or None for an unknown id;
    - ``search(query, limit)`` returns ``(retrieval_id, messages)`` pairs, best match first.
    """

    def put(self, messages: Sequence[Message]) -> str: ...

    def get(self, retrieval_id: str) -> list[Message] | None: ...

    def search(self, query: str, limit: int = 10) -> list[tuple[str, list[Message]]]: ...


def archive_text(message: Message) -> str:
    """The searchable text of a message: its text content and its tool calls' names and arguments."""
    content = message.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    else:
        parts = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORDS.findall(text)}


class Archive:
    """The in-memory archive (the default). Retrieval ids are ``ctx-1``, ``ctx-2``, ... Search ranks
    groups by the number of distinct query words they contain, newest first on ties.

    Memory: the archive keeps every group put into it (that is its purpose); ``max_items`` bounds
    it, dropping the oldest groups first (their ids then no longer resolve)."""

    def __init__(self, max_items: int | None = None) -> None:
        if max_items is not None and (isinstance(max_items, bool) or not isinstance(max_items, int)
                                      or max_items < 1):
            raise InvalidArgumentError(f"max_items must be an int >= 1 or None, got {max_items!r}")
        self.max_items = max_items
        self._items: dict[str, list[Message]] = {}
        self._ids = itertools.count(1)

    def put(self, messages: Sequence[Message]) -> str:
        """Stores copies of ``messages`` as one group; returns its retrieval id."""
        if not all(isinstance(m, dict) for m in messages):
            raise InvalidTypeError("an archive stores message dicts")
        retrieval_id = f"ctx-{next(self._ids)}"
        self._items[retrieval_id] = [dict(m) for m in messages]
        if self.max_items is not None:
            while len(self._items) > self.max_items:
                del self._items[next(iter(self._items))]
        return retrieval_id

    def get(self, retrieval_id: str) -> list[Message] | None:
        """Copies of the group stored under ``retrieval_id``, or None."""
        items = self._items.get(retrieval_id)
        return [dict(m) for m in items] if items is not None else None

    def search(self, query: str, limit: int = 10) -> list[tuple[str, list[Message]]]:
        """Groups containing query words, most distinct words first, newest first on ties."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgumentError("query must be a non-empty str")
        wanted = _words(query)
        scored = []
        for order, (retrieval_id, messages) in enumerate(self._items.items()):
            found = len(wanted & _words("\n".join(archive_text(m) for m in messages)))
            if found:
                scored.append((-found, -order, retrieval_id))
        scored.sort()
        return [(rid, [dict(m) for m in self._items[rid]]) for _, _, rid in scored[:limit]]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, retrieval_id: object) -> bool:
        return retrieval_id in self._items

    def to_dict(self) -> dict[str, Any]:
        """The archive's content (for checkpoints)."""
        return {"items": {k: [dict(m) for m in v] for k, v in self._items.items()}}

    def restore(self, data: dict[str, Any]) -> None:
        """Replaces the content with a :meth:`to_dict` result."""
        items = {str(k): [dict(m) for m in v] for k, v in data.get("items", {}).items()}
        numbers = [int(k.rsplit("-", 1)[1]) for k in items if k.rsplit("-", 1)[-1].isdigit()]
        self._items = items
        self._ids = itertools.count(max(numbers, default=0) + 1)
