"""What every compaction strategy works on: the entries of the window in order, with their
groups and protection, and the operations that keep the window valid (rewrite a message's
content, evict whole groups), plus the archive that keeps originals retrievable."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ctxwindow._types import Entry, Message
from ctxwindow.archive import Archive, MessageArchive
from ctxwindow.errors import InvalidArgumentError
from ctxwindow.strategies._calls import NeedsAwait, SummaryFailed, call_summarizer, is_async_callable

# Entry is defined in ctxwindow._types and NeedsAwait in ctxwindow.strategies._calls; both are
# re-exported here, where strategies and the window find what a compaction works on.
__all__ = ["Entry", "Archive", "CompactionState", "NeedsAwait", "StrategyReport", "Strategy"]


@dataclass
class StrategyReport:
    """What one strategy did."""

    name: str
    tokens_before: int
    tokens_after: int
    touched: int = 0
    evicted: list[Message] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.touched > 0 or bool(self.evicted)


@dataclass
class CompactionState:
    """The window during a compaction: a scratch copy that strategies change towards their
    target. ``total()`` includes the overhead (system prompt, tool definitions, reply priming);
    ``target`` and ``budget`` are totals in the same terms (already divided by the window's
    calibration). Nothing here touches the window: the planned entries are checked and applied
    by the window only when the whole compaction succeeded."""

    entries: list[Entry]
    count_message: Callable[[Message], int]
    overhead: int
    budget: int
    target: int
    archive: MessageArchive
    current_turn: int
    protected_groups: set[int] = field(default_factory=set)
    evicted: list[Entry] = field(default_factory=list)
    #: Answers of summarizers already awaited for this compaction (async callers).
    answers: dict[tuple[int, str, str], Any] = field(default_factory=dict)
    #: True when planning for an async caller (summarizers are awaited, not called).
    awaiting: bool = False
    next_seq: int = 0
    #: The name of the strategy planning now (set by the cascade).
    strategy: str = ""

    def total(self) -> int:
        return self.overhead + sum(entry.tokens for entry in self.entries)

    def over_target(self) -> bool:
        return self.total() > self.target

    def is_protected(self, entry: Entry) -> bool:
        return entry.pinned or entry.group in self.protected_groups

    def groups(self) -> Iterator[list[Entry]]:
        """The groups, oldest first."""
        for _, members in itertools.groupby(self.entries, key=lambda e: e.group):
            yield list(members)

    def group_protected(self, group: list[Entry]) -> bool:
        return any(self.is_protected(entry) for entry in group)

    def new_seq(self) -> int:
        """A sequence number for a message a strategy creates (unique in the window)."""
        self.next_seq += 1
        return self.next_seq

    def rewrite(self, entry: Entry, message: Message) -> int:
        """Puts a rewritten ``message`` in place of an unprotected entry (its role, calls and
        ids are kept by the callers), recounted; the original stays retrievable. Returns the
        tokens saved."""
        if self.is_protected(entry):
            raise InvalidArgumentError("protected content is never altered")
        position = next(i for i, e in enumerate(self.entries) if e is entry)
        tokens = self.count_message(message)
        self.entries[position] = entry._replace(message=message, tokens=tokens,
                                                original=entry.original or entry.message)
        return entry.tokens - tokens

    def evict_group(self, group_id: int) -> list[Entry]:
        """Removes a whole unprotected group; returns its entries."""
        removed = [e for e in self.entries if e.group == group_id]
        if not removed or self.group_protected(removed):
            raise InvalidArgumentError("protected content is never evicted")
        self.entries = [e for e in self.entries if e.group != group_id]
        self.evicted.extend(removed)
        return removed

    def summarize(self, summarizer: Callable[[str, str], Any], system: str, user: str,
                  timeout: float | None) -> str:
        """Calls ``summarizer(system, user)``: directly for sync callers; for async callers the
        window awaits it on the caller's loop (see :class:`NeedsAwait`) and the answer comes
        from :attr:`answers` when the plan is made again. Raises ``SummaryFailed``."""
        key = (id(summarizer), system, user)
        if key in self.answers:
            answer = self.answers[key]
            if isinstance(answer, SummaryFailed):
                raise answer
            return str(answer)
        if self.awaiting:
            raise NeedsAwait(key, lambda: summarizer(system, user), timeout, is_async_callable(summarizer))
        return call_summarizer(summarizer, system, user, timeout)

    def tool_name(self, entry: Entry) -> str:
        """The function name of a tool result (its ``name``, else the call it answers)."""
        name = entry.message.get("name")
        if isinstance(name, str) and name:
            return name
        call_id = entry.message.get("tool_call_id")
        for other in self.entries:
            if other.group == entry.group:
                for call in other.message.get("tool_calls") or []:
                    if call.get("id") == call_id:
                        return str(call.get("function", {}).get("name", "tool"))
        return "tool"


@runtime_checkable
class Strategy(Protocol):
    """A compaction strategy: ``cost`` is "free" (no model call) or "llm"; ``apply`` changes the
    state towards its target and reports what it did."""

    name: str
    cost: str

    def apply(self, state: CompactionState) -> StrategyReport: ...
