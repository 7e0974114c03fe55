"""The free strategies (no model call): truncate, clear or collapse old tool results; drop the
oldest groups; keep a sliding window; evict the lowest-scoring groups."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ctxwindow._checks import check_fraction, check_int, type_name
from ctxwindow._types import Entry
from ctxwindow.archive import PROVISIONAL_ID
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.scoring import POLICIES, format_eviction_summary, score, select_evictions, summarize_for_eviction
from ctxwindow.strategies.base import CompactionState, StrategyReport

__all__ = [
    "TruncateToolResults",
    "ClearToolResults",
    "MicroCompact",
    "DropOldest",
    "SlidingWindow",
    "ScoredEviction",
]


def _tool_results(state: CompactionState) -> list[Entry]:
    """Unprotected tool results with string content, oldest first."""
    return [e for e in state.entries
            if e.role == "tool" and isinstance(e.message.get("content"), str) and not state.is_protected(e)]


@dataclass
class TruncateToolResults:
    """Keeps the head of long tool results: ``max_chars`` characters then
    ``"\\n\\n[Truncated: {total} chars total, showing first {n}]"``. Oldest first, until the
    window is under its target; a result is truncated once."""

    max_chars: int
    name: str = "truncate_tool_results"
    cost: str = "free"

    def __post_init__(self) -> None:
        check_int(self.max_chars, "max_chars", 1)

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        for entry in _tool_results(state):
            if not state.over_target():
                break
            content = entry.message["content"]
            if entry.original is not None or len(content) <= self.max_chars:
                continue
            head = content[: self.max_chars]
            truncated = f"{head}\n\n[Truncated: {len(content)} chars total, showing first {len(head)}]"
            if state.count_message({**entry.message, "content": truncated}) < entry.tokens:
                state.rewrite(entry, {**entry.message, "content": truncated})
                report.touched += 1
        report.tokens_after = state.total()
        return report


@dataclass
class ClearToolResults:
    """Replaces old tool results (all but the ``keep`` newest) by a placeholder that names the
    tool, the turn and a retrieval id; the originals go to the archive. Runs only if it would free
    at least ``clear_at_least`` tokens; never clears results of ``exclude_tools``."""

    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: Sequence[str] = ()
    name: str = "clear_tool_results"
    cost: str = "free"

    def __post_init__(self) -> None:
        check_int(self.keep, "keep", 0)
        check_int(self.clear_at_least, "clear_at_least", 0)
        tools = self.exclude_tools
        if isinstance(tools, (str, bytes)) or not isinstance(tools, (list, tuple, set, frozenset)):
            raise InvalidTypeError(f"exclude_tools must be a list of tool names, not {type_name(tools)}")
        if not all(isinstance(tool, str) for tool in tools):
            raise InvalidTypeError(f"exclude_tools must hold tool names (str), got {list(tools)!r}")
        self.exclude_tools = tuple(tools)

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        all_results = [e for e in state.entries if e.role == "tool"]
        newest = {id(e) for e in all_results[len(all_results) - self.keep:]} if self.keep else set()
        candidates = [e for e in _tool_results(state)
                      if id(e) not in newest and e.original is None
                      and state.tool_name(e) not in self.exclude_tools]
        plans = []
        for entry in candidates:
            # Measured with a provisional id; the original is archived only when it is cleared.
            saved = entry.tokens - state.count_message(self._placeholder(state, entry, PROVISIONAL_ID))
            if saved > 0:
                plans.append((entry, saved))
        if sum(saved for _, saved in plans) < self.clear_at_least:
            return report
        for entry, _ in plans:
            if not state.over_target():
                break
            retrieval_id = state.archive.put([entry.original or entry.message])
            state.rewrite(entry, self._placeholder(state, entry, retrieval_id))
            report.touched += 1
        report.tokens_after = state.total()
        return report

    @staticmethod
    def _placeholder(state: CompactionState, entry: Entry, retrieval_id: str) -> dict[str, object]:
        tool = state.tool_name(entry)
        return {**entry.message,
                "content": f"[Tool result cleared: {tool} at turn {entry.turn}; retrieval id {retrieval_id}]"}


_SPACES = re.compile(r"[ \t]+")
_TRAILING = re.compile(r"[ \t]+\n")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass
class MicroCompact:
    """Collapses whitespace in older tool outputs: runs of spaces and tabs to one space, trailing
    spaces dropped, three or more newlines to two."""

    name: str = "micro_compact"
    cost: str = "free"

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        for entry in _tool_results(state):
            if not state.over_target():
                break
            content = entry.message["content"]
            compact = _BLANK_LINES.sub("\n\n", _SPACES.sub(" ", _TRAILING.sub("\n", content)))
            if compact != content and state.count_message({**entry.message, "content": compact}) < entry.tokens:
                state.rewrite(entry, {**entry.message, "content": compact})
                report.touched += 1
        report.tokens_after = state.total()
        return report


def _drop_oldest_until(state: CompactionState, report: StrategyReport, done: Callable[[], bool]) -> None:
    for group in list(state.groups()):
        if done():
            break
        if state.group_protected(group):
            continue
        report.evicted.extend(e.original or e.message for e in state.evict_group(group[0].group))


@dataclass
class DropOldest:
    """Drops the oldest unprotected groups (FIFO) until the window is at or below
    ``low_watermark`` of the prompt budget (default: the window's target)."""

    low_watermark: float | None = None
    name: str = "drop_oldest"
    cost: str = "free"

    def __post_init__(self) -> None:
        if self.low_watermark is not None:
            check_fraction(self.low_watermark, "low_watermark")

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        target = state.target if self.low_watermark is None else min(
            state.target, int(self.low_watermark * state.budget))
        _drop_oldest_until(state, report, lambda: state.total() <= target)
        report.tokens_after = state.total()
        return report


@dataclass
class SlidingWindow:
    """Keeps the last ``n`` messages (whole groups; pinned and protected ones stay too)."""

    n: int
    name: str = "sliding_window"
    cost: str = "free"

    def __post_init__(self) -> None:
        check_int(self.n, "n", 0)

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        _drop_oldest_until(state, report, lambda: len(state.entries) <= self.n)
        report.tokens_after = state.total()
        return report


_CONTENT_TYPE = {"system": 0, "developer": 0, "user": 2, "assistant": 3, "tool": 4}


@dataclass
class ScoredEviction:
    """Evicts the lowest-scoring groups under a native scoring policy (default ``hybrid``) until
    the window is under its target; each run of evicted groups is replaced by one short user
    placeholder naming a retrieval id when that saves tokens."""

    policy: str = "hybrid"
    name: str = "scored_eviction"
    cost: str = "free"

    def __post_init__(self) -> None:
        if not isinstance(self.policy, str):
            raise InvalidTypeError(f"policy must be a str, not {type_name(self.policy)}")
        if self.policy not in POLICIES:
            raise InvalidArgumentError(f"unknown policy {self.policy!r}; known: {', '.join(POLICIES)}")

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        groups = list(state.groups())
        if not groups or not state.over_target():
            return report
        turns = np.array([g[0].turn for g in groups], dtype=np.int64)
        scores = score(
            self.policy, current_turn=state.current_turn, created_turn=turns, last_access_turn=turns,
            access_count=np.zeros(len(groups), dtype=np.int64),
            content_type=np.array([_CONTENT_TYPE.get(g[0].role, 3) for g in groups], dtype=np.uint8),
            pinned=np.array([state.group_protected(g) for g in groups]),
            reference_count=np.array([len(g) for g in groups], dtype=np.int64),
        )
        tokens = np.array([sum(e.tokens for e in g) for g in groups], dtype=np.int64)
        chosen = select_evictions(scores, tokens, pinned=np.array([state.group_protected(g) for g in groups]),
                                  target_free_tokens=max(state.total() - state.target, 0))
        for index in sorted(chosen.tolist()):
            group = groups[index]
            position = next(i for i, e in enumerate(state.entries) if e.group == group[0].group)
            removed = state.evict_group(group[0].group)
            originals = [e.original or e.message for e in removed]
            report.evicted.extend(originals)
            retrieval_id = state.archive.put(originals)
            summary = format_eviction_summary(
                [(f"{retrieval_id}#{i}", summarize_for_eviction(str(m.get("content") or "")), e.tokens)
                 for i, (m, e) in enumerate(zip(originals, removed))])
            placeholder = {"role": "user", "content": f"[Earlier messages removed, retrieval id {retrieval_id}]\n{summary}"}
            placeholder_tokens = state.count_message(placeholder)
            if placeholder_tokens < sum(e.tokens for e in removed) and state.total() + placeholder_tokens <= state.target:
                state.entries.insert(position, Entry(placeholder, placeholder_tokens, group[0].seq,
                                                     group[0].group, group[0].turn, kind="inserted"))
        report.tokens_after = state.total()
        return report
