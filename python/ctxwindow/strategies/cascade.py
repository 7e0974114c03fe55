"""Composing strategies: ``Cascade`` runs them cheapest first and stops as soon as the window is
under its target; ``CallableStrategy`` adapts any ``(messages, budget) -> messages`` callable."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import logging

from ctxwindow._canonical import copy_message, tool_call_ids, validate_message
from ctxwindow._checks import type_name
from ctxwindow._types import Entry, Message
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.strategies._calls import SummaryFailed
from ctxwindow.strategies.base import CompactionState, Strategy, StrategyReport

__all__ = ["Cascade", "CallableStrategy", "as_strategy"]

_COST_ORDER = {"free": 0, "llm": 1}
logger = logging.getLogger("ctxwindow")


@dataclass
class CallableStrategy:
    """A custom strategy from a callable ``(messages, budget) -> messages``: it receives copies of
    the conversation (without the system prompt) and the token budget left for it, and returns
    the messages to keep, in order. It may drop messages, return rewritten copies, or add new
    messages (such as its own summary):

    - a returned message equal to one of the window's is that message (kept);
    - a changed tool result (same ``tool_call_id``) or changed assistant message with the same
      tool-call ids is a rewrite of that message (the original stays retrievable);
    - any other returned message is new, and the window's messages it does not return are
      evicted (reported to ``on_evict``).

    Dropping a tool call drops its results with it. The result then goes through the window's
    one checker (protected messages present and unchanged, every result after its call, every
    call answered, the first message a user message); an invalid result changes nothing."""

    function: Callable[[list[Message], int], Sequence[Message]]
    name: str = "custom"
    cost: str = "free"

    def __post_init__(self) -> None:
        if not callable(self.function):
            raise InvalidTypeError(f"function must be a callable (messages, budget) -> messages, "
                                   f"not {type_name(self.function)}")
        if not isinstance(self.name, str):
            raise InvalidTypeError(f"name must be a str, not {type_name(self.name)}")

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        result = list(self.function([copy_message(e.message) for e in state.entries],
                                    max(state.target - state.overhead, 0)))
        unused: dict[str, list[Entry]] = {}
        for entry in state.entries:
            unused.setdefault(_key(entry.message), []).append(entry)
        by_calls = {_calls_key(e.message): e for e in state.entries if _calls_key(e.message)}
        kept: list[Entry] = []
        used: set[int] = set()
        for message in result:
            if not isinstance(message, dict):
                raise InvalidTypeError(
                    f"strategy {self.name} returned a {type(message).__name__}, not a message dict")
            same = [e for e in unused.get(_key(message), []) if e.seq not in used]
            if same:
                used.add(same[0].seq)
                kept.append(same[0])
                continue
            validate_message(message)
            original = by_calls.get(_calls_key(message))
            if original is not None and original.seq not in used and not state.is_protected(original):
                used.add(original.seq)
                tokens = state.count_message(message)
                kept.append(original._replace(message=copy_message(message), tokens=tokens,
                                    original=original.original or original.message))
                report.touched += 1
                continue
            kept.append(Entry(copy_message(message), state.count_message(message), state.new_seq(), 0,
                              kept[-1].turn if kept else state.current_turn, kind="inserted"))
            report.touched += 1
        dropped = [e for e in state.entries if e.seq not in used]
        state.entries = kept
        state.evicted.extend(dropped)
        report.evicted = [e.original or e.message for e in dropped]
        report.tokens_after = state.total()
        return report


def _key(message: Message) -> str:
    return repr(sorted(message.items(), key=lambda kv: kv[0]))


def _calls_key(message: Message) -> str:
    """What ties a message to its tool-call group: the call ids it makes or the one it answers."""
    if message.get("role") == "tool":
        return f"result:{message.get('tool_call_id')}"
    ids = tool_call_ids(message)
    return "calls:" + ",".join(ids) if ids else ""


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
        if isinstance(self.strategies, (str, bytes, Mapping)) or not isinstance(self.strategies, Iterable):
            raise InvalidTypeError(f"strategies must be a list of strategies, not {type_name(self.strategies)}")
        resolved = [as_strategy(s) for s in self.strategies]
        for strategy in resolved:
            if not isinstance(strategy.cost, str) or strategy.cost not in _COST_ORDER:
                raise InvalidArgumentError(f"strategy {strategy.name} has cost {strategy.cost!r}; known: free, llm")
        self.strategies = sorted(resolved, key=lambda s: _COST_ORDER[s.cost])
        self.cost = "llm" if any(s.cost == "llm" for s in resolved) else "free"

    def run(self, state: CompactionState,
            settle: Callable[[CompactionState], list[str]] | None = None) -> list[StrategyReport]:
        """Applies the strategies in order until the window is under its target. ``settle``
        (the window's checker) validates each strategy's result: a strategy that raises, or
        whose result the checker refuses, leaves the state as it was and the next one runs."""
        reports = []
        for strategy in self.strategies:
            if not state.over_target():
                break
            saved = (list(state.entries), len(state.evicted), state.next_seq)
            state.strategy = strategy.name
            try:
                report = strategy.apply(state)
                problems = settle(state) if settle is not None else []
                if problems:
                    raise InvalidArgumentError(
                        f"strategy {strategy.name} planned an invalid window: {'; '.join(problems)}")
                reports.append(report)
                continue
            except SummaryFailed as failure:  # expected: summarizing is retried next time
                logger.warning("ctxwindow: %s did not apply (%s); trying the next strategy", strategy.name, failure)
            except InvalidArgumentError as refused:
                logger.warning("ctxwindow: %s; its plan was refused, trying the next strategy", refused)
            except Exception:  # a failing strategy is skipped; the next one runs
                logger.exception("ctxwindow: strategy %s failed; trying the next one", strategy.name)
            state.entries, state.next_seq = saved[0], saved[2]
            del state.evicted[saved[1]:]
        return reports

    def apply(self, state: CompactionState) -> StrategyReport:
        before = state.total()
        reports = self.run(state)
        evicted = [m for r in reports for m in r.evicted]
        return StrategyReport(self.name, before, state.total(), sum(r.touched for r in reports), evicted)
