"""What ties a :class:`~ctxwindow.recall.Recall` to its window (``ContextWindow(recall=...)``).

During an operation the window hands the link what its compactions took out of the
conversation (:meth:`RecallLink.evicted`) and the text of a new user message
(:meth:`RecallLink.ask`). At commit (the ``recall`` phase of the unit of work, after the archive
writes) the link ingests the evicted groups into recall and, for a new user message, makes the
recall block within the room the compactions kept for it. It is a participant of the unit of
work: a failed operation forgets what it archived and queued.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ctxwindow.blocks import PromptBlocks
from ctxwindow.errors import InvalidArgumentError
from ctxwindow.messages import Message
from ctxwindow.recall import Recall, message_key, parse_recall_arguments, render_group
from ctxwindow.strategies import Entry
from ctxwindow.tokenizer import TokenCounter
from ctxwindow.unit_of_work import UnitOfWork

__all__ = ["RecallLink", "answer_recall_call"]


class RecallLink:
    """The recall side of a window's operations; see the module documentation.

    ``messages()`` gives the conversation as the window holds it, ``room()`` the tokens the recall
    block may use now (the calibrated budget less everything else)."""

    def __init__(self, recall: Recall, blocks: PromptBlocks, counter: TokenCounter, unit: UnitOfWork,
                 messages: Callable[[], Sequence[Message]], room: Callable[[], int]) -> None:
        self.recall = recall
        self._blocks, self._counter, self._unit = blocks, counter, unit
        self._messages, self._room = messages, room
        #: Groups evicted in the current operation: (messages, seq, turn).
        self._pending: list[tuple[list[Message], int | None, int | None]] = []
        #: The user message whose recall block is made at commit.
        self._query: str | None = None
        self._scheduled = False

    # --- the unit of work -----------------------------------------------------------------------

    def savepoint(self) -> int:
        """Starts an operation with nothing queued."""
        self._pending, self._query, self._scheduled = [], None, False
        return self.recall.savepoint()

    def rollback(self, mark: int) -> None:
        """Forgets what the failed operation archived and queued."""
        self.recall.rollback(mark)
        self._pending, self._query, self._scheduled = [], None, False

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._unit.defer("recall", self._commit)

    # --- during an operation ----------------------------------------------------------------------

    def evicted(self, removed: Iterable[Entry], archived: Mapping[str, list[Message]]) -> None:
        """Queues what a compaction took out of the conversation: the evicted groups (originals of
        rewritten messages) and the originals it archived."""
        groups: dict[int, tuple[list[Message], int, int]] = {}
        for entry in removed:
            if entry.kind != "message":
                continue
            if entry.group in groups:
                groups[entry.group][0].append(entry.original or entry.message)
            else:
                groups[entry.group] = ([entry.original or entry.message], entry.seq, entry.turn)
        self._pending.extend(groups.values())
        self._pending.extend((list(group), None, None) for group in archived.values())
        if self._pending:
            self._schedule()

    def ask(self, query: str) -> None:
        """The recall block is made for this user message at commit."""
        self._query = query
        self._schedule()

    def present(self) -> set[Any]:
        """What identifies each message of the conversation verbatim (O(window))."""
        return {message_key(m) for m in self._messages()}

    def _commit(self) -> None:
        recall = self.recall
        if self._pending:
            pending, self._pending = self._pending, []
            recall.ingest(pending, self._counter.count_many)
        query, self._query = self._query, None
        if query is None:
            return
        limit = min(recall.max_tokens, self._room())
        message, tokens, _ = recall.block(query, self._counter.count, self._counter.count_message,
                                          self.present(), limit)
        self._blocks.set_recall(message, tokens, recall.max_tokens)


def answer_recall_call(arguments: str | Mapping[str, Any], link: RecallLink | None,
                       archive_get: Callable[[str], list[Message] | None], count: Callable[[str], int]) -> str:
    """The answer to the model's call of :meth:`Recall.tool_schema`'s tool (see
    ``ContextWindow.handle_recall_call``): ``{"query": ...}`` searches recall's archive for groups
    not in the window now, within recall's ``max_tokens``; ``{"id": ...}`` returns one group by its
    retrieval id (recall's archive, then the placeholders' archive)."""
    query, rid = parse_recall_arguments(arguments)
    if rid is not None:
        group = link.recall.get(rid) if link is not None else None
        if group is None:
            group = archive_get(rid)
        if group is None:
            return f"No archived messages with id {rid[:80]}."
        return f"--- {rid}\n{render_group(group)}"
    assert query is not None
    if link is None:
        raise InvalidArgumentError("this window has no recall archive to search: pass recall=Recall(...)")
    recall = link.recall
    sections, used = [], 0
    for hit in recall.hits(query, recall.k, link.present()):
        section = f"--- {hit.retrieval_id}\n{render_group(hit.messages)}"
        tokens = count(section)
        if used + tokens > recall.max_tokens:
            sections.append(f"--- {hit.retrieval_id}: {tokens} tokens, too long to show here; ask for it by id")
            continue
        sections.append(section)
        used += tokens
    if not sections:
        shown = query if len(query) <= 80 else query[:80] + "..."
        return f"Nothing archived matches {shown!r}."
    return "\n".join(sections)
