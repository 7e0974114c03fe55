"""The archive protocol: where the originals of evicted, cleared, merged or summarized messages go,
so that a placeholder's retrieval id always resolves.

A window writes to exactly one archive (``ContextWindow(..., archive=...)``; an in-memory
:class:`Archive` by default). Every store that can hold an archive implements
:class:`MessageArchive`: the in-memory archive here, and the checkpoint stores'
``session_archive(session_id)``. A retrieval id names one group of messages (a tool call with its
results comes back whole).

Retrieval ids are content-addressed (:func:`retrieval_id`): the same group always gets the same
id, in every archive. That is what lets a compaction be planned (placeholders written with their
ids) before anything is stored: the window plans against a :class:`StagedArchive`, and only a
plan that passed every check is written to the real archive, so a refused or abandoned plan
leaves the archive as it was, and planning the same compaction again writes the same text.

>>> archive = Archive()
>>> retrieval_id = archive.put([{"role": "user", "content": "deploy to eu-west-1"}])
>>> archive.get(retrieval_id)[0]["content"]
'deploy to eu-west-1'
>>> [rid for rid, _ in archive.search("eu-west-1")] == [retrieval_id]
True
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["MessageArchive", "Archive", "StagedArchive", "archive_text", "put_groups", "retrieval_id"]

Message = dict[str, Any]
_WORDS = re.compile(r"\w[\w.\-/]*")


@runtime_checkable
class MessageArchive(Protocol):
    """What a window needs of an archive.

    - ``put(messages)`` stores a group of messages (copies) and returns its retrieval id, which
      must be :func:`retrieval_id` of the messages (putting the same group again is a no-op);
    - ``get(retrieval_id)`` returns copies of that group, or None for an unknown id;
    - ``search(query, limit)`` returns ``(retrieval_id, messages)`` pairs, best match first.
    """

    def put(self, messages: Sequence[Message]) -> str: ...

    def get(self, retrieval_id: str) -> list[Message] | None: ...

    def search(self, query: str, limit: int = 10) -> list[tuple[str, list[Message]]]: ...


def retrieval_id(messages: Sequence[Message]) -> str:
    """The retrieval id of a group of messages: ``ctx-`` and 16 hex digits of the SHA-256 of
    their canonical JSON. Equal groups have equal ids; distinct groups collide with probability
    about n^2 / 2^65 for n groups."""
    document = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, default=repr)
    return "ctx-" + hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()[:16]


#: An id of the same length as every retrieval id, for measuring a placeholder before archiving.
PROVISIONAL_ID = "ctx-" + "0" * 16


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


def _group(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """The retrieval id and copies of a group being stored; :class:`InvalidTypeError` for
    anything but message dicts."""
    if not all(isinstance(m, dict) for m in messages):
        raise InvalidTypeError("an archive stores message dicts")
    return retrieval_id(messages), [dict(m) for m in messages]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORDS.findall(text)}


class Archive:
    """The in-memory archive (the default). Search ranks groups by the number of distinct query
    words they contain, newest first on ties.

    Memory: the archive keeps every group put into it (that is its purpose); ``max_items`` bounds
    it, dropping the oldest groups first (their ids then no longer resolve)."""

    def __init__(self, max_items: int | None = None) -> None:
        if max_items is not None and (isinstance(max_items, bool) or not isinstance(max_items, int)
                                      or max_items < 1):
            raise InvalidArgumentError(f"max_items must be an int >= 1 or None, got {max_items!r}")
        self.max_items = max_items
        self._items: dict[str, list[Message]] = {}

    def put(self, messages: Sequence[Message]) -> str:
        """Stores copies of ``messages`` as one group; returns its retrieval id."""
        key, group = _group(messages)
        self._items.pop(key, None)  # stored again: it becomes the newest
        self._items[key] = group
        if self.max_items is not None:
            while len(self._items) > self.max_items:
                del self._items[next(iter(self._items))]
        return key

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
        self._items = {str(k): [dict(m) for m in v] for k, v in data.get("items", {}).items()}


class StagedArchive:
    """An archive in front of another that stores nothing until :meth:`commit`: what a
    compaction plan archives is held here (and resolves here) while the plan is checked, and
    written to the real archive only when the plan is applied."""

    def __init__(self, archive: MessageArchive) -> None:
        self.archive = archive
        self._staged: dict[str, list[Message]] = {}

    def put(self, messages: Sequence[Message]) -> str:
        key, group = _group(messages)
        self._staged[key] = group
        return key

    def get(self, retrieval_id: str) -> list[Message] | None:
        staged = self._staged.get(retrieval_id)
        return [dict(m) for m in staged] if staged is not None else self.archive.get(retrieval_id)

    def search(self, query: str, limit: int = 10) -> list[tuple[str, list[Message]]]:
        return self.archive.search(query, limit)

    @property
    def staged(self) -> dict[str, list[Message]]:
        """The groups waiting for :meth:`commit`, by retrieval id."""
        return self._staged

    def commit(self) -> None:
        """Writes the staged groups to the real archive (:func:`put_groups`) and forgets them."""
        put_groups(self.archive, self._staged)
        self._staged.clear()


def put_groups(archive: MessageArchive, groups: dict[str, list[Message]]) -> None:
    """Writes groups keyed by their retrieval id to ``archive``, oldest first. Raises
    :class:`InvalidArgumentError` when the archive names a group otherwise than
    :func:`retrieval_id` (the placeholders would not resolve). Groups are content-addressed, so
    a write that fails half-way leaves only harmless copies."""
    for key, messages in groups.items():
        stored = archive.put(messages)
        if stored != key:
            raise InvalidArgumentError(
                f"the archive stored a group as {stored!r}, expected {key!r}: a MessageArchive "
                "must name groups by ctxwindow.archive.retrieval_id")
