"""What every compaction strategy works on: the entries of the window in order, with their
groups and protection, and the operations that keep the window valid (rewrite a message's
content, evict whole groups), plus the archive that keeps originals retrievable."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ctxwindow.archive import Archive, MessageArchive

Message = dict[str, Any]

__all__ = ["Entry", "Archive", "CompactionState", "StrategyReport", "Strategy"]


@dataclass
class Entry:
    """One message in the window."""

    message: Message
    tokens: int
    seq: int
    group: int
    turn: int
    pinned: bool = False
    #: The message as added, when a strategy has rewritten it.
    original: Message | None = None

    @property
    def role(self) -> str:
        return str(self.message.get("role"))


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
    """The window during a compaction. ``total()`` includes the overhead (system prompt, tool
    definitions, reply priming); ``target`` and ``budget`` are totals in the same terms."""

    entries: list[Entry]
    count_message: Callable[[Message], int]
    overhead: int
    budget: int
    target: int
    archive: MessageArchive
    current_turn: int
    protected_groups: set[int] = field(default_factory=set)
    evicted: list[Entry] = field(default_factory=list)

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

    def rewrite(self, entry: Entry, message: Message) -> int:
        """Replaces the message of an unprotected entry (its role, calls and ids are kept by the
        callers) and recounts it; returns the tokens saved."""
        assert not self.is_protected(entry), "protected content is never altered"
        tokens = self.count_message(message)
        saved = entry.tokens - tokens
        if entry.original is None:
            entry.original = entry.message
        entry.message, entry.tokens = message, tokens
        return saved

    def evict_group(self, group_id: int) -> list[Entry]:
        """Removes a whole unprotected group; returns its entries."""
        removed = [e for e in self.entries if e.group == group_id]
        assert removed and not self.group_protected(removed), "protected content is never evicted"
        self.entries = [e for e in self.entries if e.group != group_id]
        self.evicted.extend(removed)
        return removed

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
