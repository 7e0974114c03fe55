"""Compaction as plan -> check -> apply.

The strategies (built-in or custom) change a scratch :class:`CompactionState`; after each one the
window's one checker (:func:`settle`) validates what it planned (the provider rules of
:func:`~ctxwindow.messages.check_history`, protected messages present and unchanged) and a refused
plan is undone. The last resort (drop the oldest whole groups) is one more plan through the same
checker, then the budget is checked with the window's calibration, and only then does the
conversation store apply the plan, in one step. Nothing before that changes the window.

When the window has no strategies and no pinned messages and the newest user message lies in the
protected tail, the plan is a cut at the front of the native FIFO, found in O(k) for k evicted
entries and applied in O(k), so a turn costs the same whatever the length of the conversation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwindow.archive import MessageArchive, StagedArchive
from ctxwindow.conversation import ConversationStore, settle_groups
from ctxwindow.errors import ContextOverflowError
from ctxwindow.events import EventBus, StatusEvent
from ctxwindow.gate import FidelityGate, GateOutcome
from ctxwindow.messages import PLACEHOLDER_USER, Message, check_history
from ctxwindow.strategies import Cascade, CompactionState, DropOldest, Entry, StrategyReport

__all__ = ["CompactionResult", "Plan", "Limits", "GateSettings", "plan_compaction", "apply_plan", "protected_tokens",
           "settle", "compaction_result", "announce"]


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did: the strategies that changed something (in order), the prompt
    before and after, and the messages removed from the window (oldest first, as added)."""

    applied: list[str]
    tokens_before: int
    tokens_after: int
    evicted: list[Message]
    reports: list[StrategyReport] = field(default_factory=list)
    reason: str = "compact"
    #: Key-fact retention across this compaction: the fidelity gate's score when it ran, else
    #: the retention of the window's text when a health monitor measures it.
    fidelity: float | None = None
    #: What the fidelity gate found and did (None when it did not run: no strategies, or off).
    gate: GateOutcome | None = None


@dataclass(frozen=True)
class Limits:
    """The budget of one compaction, in counted tokens. ``overhead`` is everything that is not
    conversation (reply priming, system prompt, context, notes, tools) plus the placeholder user
    message the window may need; ``budget`` and ``target`` are prompt totals already divided by
    the calibration, so a plan within ``budget`` is within the real budget once calibrated."""

    overhead: int
    budget: int
    target: int
    real_budget: int
    calibration: float
    preserve_recent: int

    def needed(self, total: int) -> int:
        """The calibrated size of a prompt of ``total`` counted tokens."""
        return math.ceil(total * self.calibration)


@dataclass(frozen=True)
class Plan:
    """A checked compaction, ready to apply: either a front cut of ``cut`` entries (``cut_tokens``
    tokens) on the native FIFO, or the whole planned ``entries``."""

    entries: tuple[Entry, ...] | None
    cut: int
    cut_tokens: int
    evicted: tuple[Entry, ...]
    reports: tuple[StrategyReport, ...]
    next_seq: int
    #: The originals the plan archives (retrieval id -> group), written when it is applied.
    archived: dict[str, list[Message]] = field(default_factory=dict)
    gate: GateOutcome | None = None


@dataclass(frozen=True)
class GateSettings:
    """What the fidelity gate needs from the window: the text sent besides the conversation
    (system prompt, instructions, notes, context, tools) and a text counter."""

    overhead_text: str
    count: Callable[[str], int]


def settle(state: CompactionState, protected: dict[int, Message], stored: Mapping[int, int] | None = None) -> list[str]:
    """The one check of a planned window: groups are re-derived from the messages (results of a
    dropped call leave with it), then what a provider would reject, any protected message
    missing or changed, and any message of the window moved out of its order (``stored``: the
    position in the window of each seq; a summary or placeholder takes the seq, and so the
    place, of the first message it replaces). Returns the problems (empty: valid)."""
    stored = stored or {}
    entries, orphans = settle_groups(state.entries)
    state.entries = entries
    state.evicted.extend(orphans)
    messages = [e.message for e in entries]
    if messages and messages[0].get("role") != "user":
        messages.insert(0, PLACEHOLDER_USER)
    problems = check_history(messages)
    present = {e.seq: e.message for e in entries}
    order = [stored[e.seq] for e in entries if e.seq in stored]
    if any(a >= b for a, b in zip(order, order[1:])):
        problems.append("messages of the conversation were reordered")
    for seq, message in protected.items():
        if present.get(seq) != message:
            problems.append(f"protected message {seq} was {'changed' if seq in present else 'removed'}")
    return problems


def _overflow(needed: int, limits: Limits, what: str) -> ContextOverflowError:
    return ContextOverflowError(needed, limits.real_budget, f"protected content ({what})")


def protected_tokens(entries: Sequence[Entry], groups: set[int], limits: Limits, extra: int = 0) -> int:
    """Counted tokens of what can never be evicted: the overhead, the protected ``groups`` and
    ``extra`` (a tool-call group still waiting for results)."""
    return limits.overhead + extra + sum(e.tokens for e in entries if e.group in groups)


def plan_compaction(store: ConversationStore, cascade: Cascade, limits: Limits,
                    count_message: Callable[[Message], int], archive: MessageArchive, *,
                    answers: dict[Any, Any], awaiting: bool, gate: GateSettings | None = None) -> Plan:
    """Plans and checks a compaction towards ``limits.target``; raises
    :class:`ContextOverflowError` when protected content alone exceeds the budget. Changes
    nothing: the originals the plan archives are staged in ``Plan.archived`` and written by the
    window (:func:`ctxwindow.archive.put_groups`) once its whole operation succeeded."""
    if not cascade.strategies and store.pinned == 0:
        plan = _plan_front_cut(store, limits)
        if plan is not None:
            return plan
    entries = store.entries()
    groups = store.protected_groups(entries, limits.preserve_recent)
    needed = protected_tokens(entries, groups, limits)
    if needed > limits.budget:
        raise _overflow(limits.needed(needed), limits, "system prompt, pinned, newest user and recent messages")
    protected = {e.seq: e.message for e in entries if e.pinned or e.group in groups}
    staged = StagedArchive(archive)
    stored = {e.seq: position for position, e in enumerate(entries)}
    state = CompactionState(
        entries=list(entries), count_message=count_message, overhead=limits.overhead,
        budget=limits.budget, target=limits.target, archive=staged, current_turn=store.turn,
        protected_groups=groups, answers=answers, awaiting=awaiting, next_seq=store.seq)

    checker = None
    if gate is not None and cascade.strategies:
        checker = FidelityGate(entries, gate.overhead_text, gate.count,
                               max(limits.budget - limits.overhead, 0) // 5)

    def check(planned: CompactionState) -> list[str]:
        problems = settle(planned, protected, stored)
        if not problems and checker is not None:
            problems = checker.check(planned, planned.strategy) or settle(planned, protected, stored)
        return problems

    reports = cascade.run(state, check)
    if state.total() > state.target:
        reports.append(_last_resort(state, checker))
    problems = settle(state, protected, stored)
    if problems:  # the last resort only removes whole groups: a refusal here is a bug
        raise AssertionError(f"the last resort planned an invalid window: {'; '.join(problems)}")
    if state.total() > state.budget:
        raise _overflow(limits.needed(state.total()), limits, "after every strategy and the last resort")
    evicted = tuple(sorted(state.evicted, key=lambda e: e.seq))
    # Only what the planned window still refers to is archived (a refused strategy's groups are not).
    text = "\n".join(str(e.message.get("content")) for e in state.entries)
    archived = {key: group for key, group in staged.staged.items() if key in text}
    return Plan(tuple(state.entries), 0, 0, evicted, tuple(reports), state.next_seq, archived,
                checker.outcome if checker is not None else None)


def _last_resort(state: CompactionState, checker: FidelityGate | None) -> StrategyReport:
    """Drops the oldest whole groups, keeping a conversation summary (and its kept facts) while
    anything else can go; the facts of what is dropped join the kept facts. Room for them is
    made by dropping further (a few rounds at most); the summary goes only if the budget cannot
    be met otherwise."""
    before = state.total()
    summaries = {e.group for e in state.entries if e.kind == "summary"}
    protected = set(state.protected_groups)
    target, reserve = state.target, 0
    start = (list(state.entries), len(state.evicted), state.next_seq)
    for _ in range(6):
        state.protected_groups = protected | summaries
        state.target = target - reserve
        DropOldest().apply(state)
        state.target = target
        state.protected_groups = set(protected)
        if checker is not None:
            checker.check(state, "drop_oldest", last_resort=True)
        summaries |= {e.group for e in state.entries if e.kind == "summary"}
        excess = state.total() - target
        if excess <= 0 or checker is None or not any(
                not state.group_protected(g) and g[0].kind != "summary" for g in state.groups()):
            break
        reserve += excess
        state.entries, state.next_seq = list(start[0]), start[2]
        del state.evicted[start[1]:]
    if state.total() > state.budget and checker is not None:
        # The summary is too big for what is left: it gives way to its kept facts (those that fit).
        summary = next((e for e in state.entries if e.kind == "summary" and not state.is_protected(e)), None)
        if summary is not None:
            state.entries = [e for e in state.entries if e is not summary]
            state.evicted.append(summary)
            checker.check(state, "drop_oldest", last_resort=True, room=state.budget - state.total())
    if state.total() > state.budget:
        DropOldest().apply(state)
        if checker is not None:
            checker.check(state, "drop_oldest", last_resort=True, room=state.budget - state.total())
    evicted = [e.original or e.message for e in state.evicted[start[1]:]]
    return StrategyReport("drop_oldest", before, state.total(), 0, evicted)


def _plan_front_cut(store: ConversationStore, limits: Limits) -> Plan | None:
    """The last resort as a cut at the front, when the protected messages form a suffix of the
    conversation (else None: the general path plans it)."""
    count = len(store)
    # The protected tail: the last preserve_recent messages, widened to whole groups.
    tail_groups: set[int] = set()
    index = count - 1
    while index >= 0 and (count - 1 - index < limits.preserve_recent
                          or store.entry(index).group in tail_groups):
        tail_groups.add(store.entry(index).group)
        index -= 1
    tail_start = index + 1
    messages = store.messages
    if not any(m.get("role") == "user" for m in messages[tail_start:]) and any(
            m.get("role") == "user" for m in messages[:tail_start]):
        return None  # the newest user message lies before the tail
    total = limits.overhead + store.tokens
    cut = cut_tokens = 0
    position = 0
    while total - cut_tokens > limits.target and position < tail_start:
        group_tokens = store.entry(position).tokens
        end = position + 1
        while end < tail_start and store.entry(end).role == "tool":
            group_tokens += store.entry(end).tokens
            end += 1
        cut_tokens += group_tokens
        position = cut = end
    remaining = messages[cut:]
    if remaining and remaining[0].get("role") != "user":
        remaining = [PLACEHOLDER_USER, *remaining]
    # The stored history is valid, so a cut is valid when the first remaining group is: check
    # that group only (O(group), not O(window)).
    head = 2 if remaining and remaining[0] is PLACEHOLDER_USER else 1
    while head < len(remaining) and remaining[head].get("role") == "tool":
        head += 1
    problems = check_history(remaining[:head], pending_tail=False)
    if problems:  # a cut at group boundaries of a valid history stays valid: a bug
        raise AssertionError(f"the front cut planned an invalid window: {'; '.join(problems)}")
    if total - cut_tokens > limits.budget:
        raise _overflow(limits.needed(total - cut_tokens), limits, "newest user and recent messages")
    evicted = tuple(store.entry(i) for i in range(cut))
    return Plan(None, cut, cut_tokens, evicted, (), store.seq)


def apply_plan(store: ConversationStore, plan: Plan) -> list[Entry]:
    """Applies a checked plan to the store in one step; returns the evicted entries. The
    originals the plan archives (``plan.archived``) are written by the window when the whole
    operation succeeds (:func:`ctxwindow.archive.put_groups`)."""
    if plan.entries is None:
        store.drop_front(plan.cut, plan.cut_tokens)
    else:
        store.replace(plan.entries, plan.next_seq)
    return list(plan.evicted)


def compaction_result(plan: Plan, evicted: list[Message], before: int, after: int, reason: str,
                      measure: Callable[[], float] | None) -> CompactionResult:
    """The result of an applied plan: the strategies that changed something (``drop_oldest``
    named when the last resort evicted), and the key-fact retention across it (the gate's score
    when it ran, else ``measure()`` when given)."""
    reports = list(plan.reports)
    applied = [r.name for r in reports if r.changed]
    if evicted and "drop_oldest" not in applied and not any(r.evicted for r in reports if r.name != "drop_oldest"):
        applied.append("drop_oldest")
    fidelity = None
    if applied or evicted:
        fidelity = plan.gate.score if plan.gate is not None else (measure() if measure is not None else None)
    return CompactionResult(applied, before, after, evicted, reports, reason, fidelity, plan.gate)


def announce(events: EventBus, result: CompactionResult, usage: Any) -> None:
    """The events of a compaction (after it committed): ``on_evict`` when it removed messages,
    ``on_compact``, and ``on_status`` with a sentence for people (``usage``: the window's)."""
    if result.evicted:
        events.emit("on_evict", result.evicted, usage)
    events.emit("on_compact", result)
    if events.has("on_status"):
        sentence = (f"context window at {usage.utilization:.0%} capacity ({usage.total:,}/{usage.budget:,} tokens), "
                    + ("compaction applied" if result.applied else "nothing to compact"))
        events.emit("on_status", StatusEvent(sentence, usage.total, usage.budget, usage.utilization, usage.zone))
