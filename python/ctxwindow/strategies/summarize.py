"""Strategies that shrink the window by summarizing: :class:`Summarize` (transactional,
incremental, one ``[Conversation Summary]`` message first in the conversation) and
:class:`ProgressiveSummarize` (full text, key points, one line, title only as turns age)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwindow._canonical import text_of
from ctxwindow._checks import check_int, check_number, type_name
from ctxwindow._types import Entry, Message
from ctxwindow.archive import PROVISIONAL_ID
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.strategies._calls import Summarizer, SummaryFailed, await_summarizer, call_summarizer
from ctxwindow.strategies.base import CompactionState, StrategyReport
from ctxwindow.summarizers import (
    SUMMARY_HEADER,
    TARGET_PREFIX,
    TRANSCRIPT_CLOSE,
    TRANSCRIPT_OPEN,
    extractive,
)

# SummaryFailed, call_summarizer and await_summarizer live in ctxwindow.strategies._calls (the
# summarizer-call machinery the compaction state shares); they are re-exported here, where
# users of the summarizing strategies look for them.
__all__ = ["COMPACTION_SYSTEM_PROMPT", "SummaryFailed", "Summarize", "ProgressiveSummarize", "call_summarizer",
           "await_summarizer", "render_transcript"]

logger = logging.getLogger("ctxwindow")

COMPACTION_SYSTEM_PROMPT = """You compact the history of an AI agent's conversation so the agent can continue its task without it.
PRESERVE, exactly: every decision with its rationale; errors and failures verbatim; progress as done / current / remaining; every user constraint, rule and preference verbatim; file paths, names, identifiers, numbers, amounts and dates.
DROP: greetings and filler, repetition, plans that were superseded (say what replaced them), raw tool output that was already acted upon.
FORMAT: start with "[Conversation Summary]", then short bullet lines, no preamble, within the token target."""


def render_transcript(entries: Sequence[Entry]) -> str:
    """One line per message: ``role: text``; tool calls as ``assistant called name(args)``."""
    lines = []
    for entry in entries:
        message = entry.original or entry.message
        text = " ".join(text_of(message).split())
        if message.get("role") == "tool":
            name = message.get("name") or "tool"
            lines.append(f"tool {name} result: {text}")
            continue
        if text:
            lines.append(f"{message.get('role')}: {text}")
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            lines.append(f"assistant called {function.get('name')}({function.get('arguments')})")
    return "\n".join(lines)


def _is_summary(entry: Entry) -> bool:
    return entry.kind == "summary"


@dataclass
class Summarize:
    """Replaces the oldest groups by one ``[Conversation Summary]`` user message placed first in
    the conversation. Incremental: the new summary folds the previous one and the newly replaced
    groups only. Transactional: if the summarizer raises, times out, returns nothing or returns
    something not shorter than what it replaces, nothing changes (:class:`SummaryFailed`; the
    cascade runs the next strategy) and summarizing is retried at the next compaction. The last
    ``preserve_recent`` messages are never summarized; groups are never split. The originals are
    archived and the summary names their retrieval id."""

    summarizer: Summarizer = extractive
    preserve_recent: int = 10
    timeout: float | None = 30.0
    name: str = "summarize"
    cost: str = "llm"
    failures: int = field(default=0, init=False)
    last_error: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not callable(self.summarizer):
            raise InvalidTypeError(f"summarizer must be a callable (system, user) -> str, not {type_name(self.summarizer)}")
        check_int(self.preserve_recent, "preserve_recent", 0)
        if self.timeout is not None:
            # A finite number of seconds: inf or nan would make every summary fail at the call.
            check_number(self.timeout, "timeout (seconds, or None for no limit)", above=0.0)
        if self.summarizer is extractive:
            self.cost = "free"

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        entries = state.entries
        # The previous summary: the first one that may be rewritten (normally first in the
        # conversation; after a pinned first message, second).
        previous = next((e for e in entries if _is_summary(e) and not state.is_protected(e)), None)
        start = entries.index(previous) + 1 if previous else 0
        tail_start = max(len(entries) - self.preserve_recent, start)
        chosen = self._prefix(state, previous, start, tail_start)
        # The tail is a preference: if summarizing before it cannot reach the target, the
        # unprotected groups in it are summarized too rather than dropped by the last resort.
        replaced = sum(e.tokens for e in chosen) + (previous.tokens if previous else 0)
        if state.total() - replaced + replaced // 3 > state.target:
            chosen = self._prefix(state, previous, start, len(entries))
        if not chosen:
            return report
        replaced = sum(e.tokens for e in chosen) + (previous.tokens if previous else 0)
        rest = state.total() - replaced
        room = state.target - rest
        if room < 64:  # the target is out of reach: at least fit the budget
            room = state.budget - rest
        # Use the room there is (the summarizer keeps the most important lines first); the
        # result must still be shorter than what it replaces.
        target = min(room - 16, replaced - 16)
        if target < 32:
            self._fail(f"no room for a summary ({room} tokens)")
        prior = previous.message["content"] if previous else "(none)"
        user = (f"Previous summary:\n{prior}\n\nMessages to fold in:\n"
                f"{TRANSCRIPT_OPEN}\n{render_transcript(chosen)}\n{TRANSCRIPT_CLOSE}\n"
                f"{TARGET_PREFIX} {target}\nWrite the updated summary.")
        try:
            text = state.summarize(self.summarizer, COMPACTION_SYSTEM_PROMPT, user, self.timeout).strip()
        except SummaryFailed as error:
            self._fail(str(error))
        if not text:
            self._fail("the summarizer returned nothing")
        if not text.startswith(SUMMARY_HEADER):
            text = f"{SUMMARY_HEADER}\n{text}"
        message: Message = {"role": "user", "content": f"{text}\n(originals: retrieval id {PROVISIONAL_ID})"}
        tokens = state.count_message(message)
        if tokens >= replaced:
            self._fail(f"the summary ({tokens} tokens) is not shorter than what it replaces ({replaced})")
        retrieval_id = state.archive.put([e.original or e.message for e in chosen])
        message = {"role": "user", "content": f"{text}\n(originals: retrieval id {retrieval_id})"}
        tokens = state.count_message(message)
        # Success: apply all at once.
        replaced_seqs = {e.seq for e in chosen}
        # The summary takes the place of the previous summary, or else of the first message it
        # replaces (after any pinned message that precedes it), and its seq: the conversation
        # keeps its order.
        first = previous if previous is not None else min(chosen, key=lambda e: e.seq)
        position = next(i for i, e in enumerate(state.entries) if e is first)
        state.entries = [e for e in state.entries if e is not previous and e.seq not in replaced_seqs]
        state.evicted.extend(chosen)
        seq = first.seq
        state.entries.insert(position, Entry(message, tokens, seq, seq, chosen[-1].turn, kind="summary"))
        report.evicted = [e.original or e.message for e in chosen]
        report.touched = 1
        report.tokens_after = state.total()
        self.failures, self.last_error = 0, None
        return report

    @staticmethod
    def _prefix(state: CompactionState, previous: Entry | None, start: int, end: int) -> list[Entry]:
        """The unprotected groups, oldest first, that end before position ``end`` (protected
        groups, such as a pinned first message, stay where they are)."""
        chosen: list[Entry] = []
        position = start
        for group in state.groups():
            if previous is not None and group[0] is previous:
                continue
            if position + len(group) > end:
                break
            position += len(group)
            if not state.group_protected(group):
                chosen.extend(group)
        return chosen

    def _fail(self, reason: str) -> Any:
        self.failures += 1
        self.last_error = reason
        raise SummaryFailed(reason)


@dataclass
class ProgressiveSummarize:
    """Ages messages: full text for turns newer than ``levels[0]``, key points from
    ``levels[0]`` turns old, one line from ``levels[1]``, title only from ``levels[2]`` (defaults
    1 / 5 / 20). A message is rewritten only when its age crosses a boundary; its original stays
    retrievable through the window's archive of the message (``Entry.original``)."""

    levels: tuple[int, int, int] = (1, 5, 20)
    summarizer: Summarizer = extractive
    name: str = "progressive_summarize"
    cost: str = "free"

    def __post_init__(self) -> None:
        levels = self.levels
        if (not isinstance(levels, (tuple, list)) or len(levels) != 3
                or any(isinstance(age, bool) or not isinstance(age, int) for age in levels)):
            raise InvalidTypeError(f"levels must be three ints (ages in turns), got {levels!r}")
        if not 0 < levels[0] < levels[1] < levels[2]:
            raise InvalidArgumentError(f"levels must be three increasing ages in turns > 0, got {levels}")
        self.levels = (levels[0], levels[1], levels[2])
        if not callable(self.summarizer):
            raise InvalidTypeError(f"summarizer must be a callable (system, user) -> str, not {type_name(self.summarizer)}")
        if self.summarizer is not extractive:
            self.cost = "llm"

    def _level_of(self, age: int) -> int:
        return sum(1 for boundary in self.levels if age >= boundary)

    @staticmethod
    def _current_level(entry: Entry) -> int:
        # The level is read from the message itself, so nothing is kept per message.
        if entry.original is None:
            return 0
        content = entry.message.get("content")
        for level, marker in ((3, "[Title] "), (2, "[One line] "), (1, "[Key points] ")):
            if isinstance(content, str) and content.startswith(marker):
                return level
        return 0

    def _render(self, state: CompactionState, entry: Entry, level: int) -> str:
        original = entry.original or entry.message
        text = text_of(original)
        if level == 1:
            user = f"{TRANSCRIPT_OPEN}\n{text}\n{TRANSCRIPT_CLOSE}\n{TARGET_PREFIX} {max(entry.tokens // 2, 16)}"
            summary = state.summarize(self.summarizer, COMPACTION_SYSTEM_PROMPT, user, 30.0)
            body = summary.removeprefix(SUMMARY_HEADER).strip()
            return f"[Key points] {body}" if body else f"[Key points] {' '.join(text.split())[:200]}"
        first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
        if level == 2:
            return f"[One line] {first_line[:160]}"
        return f"[Title] {' '.join(first_line.split()[:8])}"

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        for entry in list(state.entries):
            if state.is_protected(entry) or _is_summary(entry) or entry.message.get("tool_calls"):
                continue
            if not isinstance((entry.original or entry.message).get("content"), str):
                continue
            level = self._level_of(state.current_turn - entry.turn)
            if level <= self._current_level(entry):
                continue
            try:
                content = self._render(state, entry, level)
            except Exception:  # a failing summary leaves this message as it is
                logger.exception("ctxwindow: progressive summary of message %d failed", entry.seq)
                continue
            candidate = {**entry.message, "content": content}
            if state.count_message(candidate) < entry.tokens:
                state.rewrite(entry, candidate)
                report.touched += 1
        report.tokens_after = state.total()
        return report

