"""Composing strategies: ``Cascade`` runs them cheapest first and stops as soon as the window is
under its target; ``CallableStrategy`` adapts any ``(messages, budget) -> messages`` callable."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import logging

from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.messages import tool_call_ids
from ctxwindow.strategies.base import CompactionState, Entry, Strategy, StrategyReport
from ctxwindow.strategies.summarize import SummaryFailed

__all__ = ["Cascade", "CallableStrategy", "as_strategy"]

_COST_ORDER = {"free": 0, "llm": 1}
logger = logging.getLogger("ctxwindow")
Message = dict[str, Any]


@dataclass
class CallableStrategy:
    """A custom strategy from a callable ``(messages, budget) -> messages``: it receives the
    conversation (without the system prompt) and the token budget left for it, and returns the
    messages to keep, in order; it may drop messages or return rewritten copies. The result is
    checked: protected messages present and unchanged, every tool result after its call and
    every call answered; an invalid result changes nothing."""

    function: Callable[[list[Message], int], Sequence[Message]]
    name: str = "custom"
    cost: str = "free"

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        messages = [e.message for e in state.entries]
        result = list(self.function([dict(m) for m in messages], max(state.target - state.overhead, 0)))
        by_identity = {_key(e.message): e for e in state.entries}
        kept: list[Entry] = []
        seen: set[int] = set()
        for message in result:
            if not isinstance(message, dict):
                raise InvalidTypeError(f"strategy {self.name} returned a {type(message).__name__}, not a message dict")
            entry = by_identity.get(_key(message))
            if entry is not None and entry.seq not in seen:
                seen.add(entry.seq)
                kept.append(entry)
            else:
                previous = kept[-1] if kept else None
                group = previous.group if previous and message.get("role") == "tool" else -len(kept) - 1
                kept.append(Entry(message, state.count_message(message), -1, group,
                                  previous.turn if previous else state.current_turn))
        _check_result(state, kept, self.name)
        dropped = [e for e in state.entries if e.seq not in seen]
        state.entries = kept
        state.evicted.extend(dropped)
        report.evicted = [e.original or e.message for e in dropped]
        report.touched = sum(1 for e in kept if e.seq == -1)
        report.tokens_after = state.total()
        return report


def _key(message: Message) -> str:
    return repr(sorted(message.items(), key=lambda kv: kv[0]))


def _check_result(state: CompactionState, kept: list[Entry], name: str) -> None:
    present = {e.seq for e in kept}
    for entry in state.entries:
        if state.is_protected(entry) and entry.seq not in present:
            raise InvalidArgumentError(f"strategy {name} removed or changed a protected message")
    open_calls: set[str] = set()
    for entry in kept:
        if entry.role == "tool":
            call_id = entry.message.get("tool_call_id")
            if call_id not in open_calls:
                raise InvalidArgumentError(f"strategy {name} left a tool result without its call ({call_id})")
            open_calls.discard(call_id)
        else:
            if open_calls:
                raise InvalidArgumentError(f"strategy {name} left tool calls without results: {sorted(open_calls)}")
            open_calls = set(tool_call_ids(entry.message))
    if open_calls:
        raise InvalidArgumentError(f"strategy {name} left tool calls without results: {sorted(open_calls)}")


def as_strategy(strategy: object) -> Strategy:
    """A strategy object as it is, or a callable wrapped in :class:`CallableStrategy`."""
    if isinstance(strategy, Strategy):
        return strategy
    if callable(strategy):
        name = getattr(strategy, "__name__", "custom")
        return CallableStrategy(strategy, name=str(name))
    raise InvalidTypeError(
        f"a strategy must have name, cost and apply(state), or be a callable (messages, budget) -> "
        f"messages; got {type(strategy).__name__}")


@dataclass
class Cascade:
    """Runs strategies cheapest first (free before llm, then in the given order) and stops as
    soon as the window is under its target."""

    strategies: Sequence[Any] = field(default_factory=list)
    name: str = "cascade"
    cost: str = "free"

    def __post_init__(self) -> None:
        resolved = [as_strategy(s) for s in self.strategies]
        for strategy in resolved:
            if strategy.cost not in _COST_ORDER:
                raise InvalidArgumentError(f"strategy {strategy.name} has cost {strategy.cost!r}; known: free, llm")
        self.strategies = sorted(resolved, key=lambda s: _COST_ORDER[s.cost])
        self.cost = "llm" if any(s.cost == "llm" for s in resolved) else "free"

    def run(self, state: CompactionState) -> list[StrategyReport]:
        """Applies the strategies in order until the window is under its target."""
        reports = []
        for strategy in self.strategies:
            if not state.over_target():
                break
            try:
                reports.append(strategy.apply(state))
            except SummaryFailed as failure:  # expected: summarizing is retried next time
                logger.warning("ctxwindow: %s did not apply (%s); trying the next strategy", strategy.name, failure)
            except Exception:  # a failing strategy is skipped; the next one runs
                logger.exception("ctxwindow: strategy %s failed; trying the next one", strategy.name)
        return reports

    def apply(self, state: CompactionState) -> StrategyReport:
        before = state.total()
        reports = self.run(state)
        evicted = [m for r in reports for m in r.evicted]
        return StrategyReport(self.name, before, state.total(), sum(r.touched for r in reports), evicted)
