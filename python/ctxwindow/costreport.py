"""The money side of a replay: each model call's prompt prefix shared with the previous call and
its cost, for the managed window, the unmanaged prompt (everything appended, never compacted)
and a "cache-naive" manager, all replayed from the same conversation.

Cache-naive means the usual trim-to-fit: before every call the oldest messages are dropped just
until the prompt fits the budget (a ``ContextWindow`` with ``trigger=target=1.0`` and
``cache="off"``, as LangChain's ``trim_messages`` or a token-limited memory do it), so once
the budget is reached every call rewrites the start of the conversation.

>>> from ctxwindow.cost import OPENAI, PRICES
>>> messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
>>> comparison = compare_costs(messages, "gpt-4o", 4_000, PRICES["gpt-4o"], OPENAI)
>>> sorted(comparison.runs)
['cache_naive', 'managed', 'unmanaged']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxwindow.cache import CacheSchedule
from ctxwindow.cost import CacheRules, Prices, RunCost
from ctxwindow.messages import Message, text_of
from ctxwindow.window import ContextWindow

__all__ = ["CostComparison", "CostRecorder", "compare_costs", "naive_window", "price_replay", "replay_cost"]


class CostRecorder:
    """Prices the calls of one replay for the managed window and for the unmanaged prompt; hand
    :meth:`on_call` to :func:`ctxwindow.cli.replay`."""

    def __init__(self, window: ContextWindow, prices: Prices, rules: CacheRules, *, unmanaged: bool = True) -> None:
        self.window = window
        self.managed = RunCost(window.tokenizer, prices, rules)
        self.unmanaged: RunCost | None = RunCost(window.tokenizer, prices, rules) if unmanaged else None
        self._history: list[Message] = [dict(m) for m in window.messages()]  # the system blocks
        self._appended = 0

    def on_call(self, sent: list[Message], output: Message, replayed: list[Message]) -> None:
        """One model call: ``sent`` is the managed prompt, ``output`` the reply, ``replayed``
        every conversation message added before it."""
        window = self.window
        output_tokens = window.tokenizer.count_message(output)
        tools = window.usage.by_component["tool_definitions"]
        self.managed.call(sent, output_tokens, tools)
        if self.unmanaged is not None:
            self._history.extend(replayed[self._appended:])
            self._appended = len(replayed)
            self.unmanaged.call(self._history, output_tokens, tools)


def price_replay(model: str) -> tuple[Prices, CacheRules] | None:
    """The prices and cache rules of ``model``, or None when its price is unknown."""
    from ctxwindow.cost import price_for, rules_for
    from ctxwindow.errors import InvalidArgumentError

    try:
        return price_for(model), rules_for(model)
    except InvalidArgumentError:
        return None


def replay_cost(messages: list[Message], window: ContextWindow, prices: Prices, rules: CacheRules) -> RunCost:
    """Replays ``messages`` through ``window`` (a fresh one) and prices its calls."""
    recorder, _, _ = _replay_priced(messages, window, prices, rules, unmanaged=False)
    return recorder.managed


def naive_window(model: str | None, max_tokens: int, reserve_output: int = 0, **settings: Any) -> ContextWindow:
    """The cache-naive manager: trim to fit before every call (see the module documentation)."""
    settings = {**settings, "trigger": 1.0, "target": 1.0, "cache": "off"}
    return ContextWindow(model, max_tokens=max_tokens, reserve_output=reserve_output, **settings)


@dataclass
class CostComparison:
    """The runs of one conversation: ``managed``, ``unmanaged``, ``cache_naive`` (and any other
    managed variant asked for), each a :class:`~ctxwindow.cost.RunCost`; ``budget_ok`` says
    whether every managed prompt fitted its budget, ``compactions`` counts per managed run."""

    runs: dict[str, RunCost] = field(default_factory=dict)
    budget_ok: dict[str, bool] = field(default_factory=dict)
    compactions: dict[str, int] = field(default_factory=dict)
    #: Runs stopped by a :class:`~ctxwindow.ContextOverflowError` (protected content alone over
    #: the budget), with its message.
    overflows: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: run.summary() for name, run in self.runs.items()}
        for name, ok in self.budget_ok.items():
            out[name]["budget_ok"] = ok
            out[name]["compactions"] = self.compactions[name]
        return out


def _replay_priced(messages: list[Message], window: ContextWindow, prices: Prices, rules: CacheRules,
                   unmanaged: bool) -> tuple[CostRecorder, bool, str]:
    from ctxwindow.cli import ReplayReport, replay

    recorder = CostRecorder(window, prices, rules, unmanaged=unmanaged)
    fits = True

    def on_call(sent: list[Message], output: Message, replayed: list[Message]) -> None:
        nonlocal fits
        usage = window.usage
        fits &= usage.total <= usage.budget
        recorder.on_call(sent, output, replayed)

    report = ReplayReport("", "", window.model or "", window.max_tokens, window.reserve_output)
    replay(messages, window, report, on_call=on_call)
    return recorder, fits, report.overflow_message if report.overflows else ""


def compare_costs(messages: list[Message], model: str | None, max_tokens: int, prices: Prices,
                  rules: CacheRules, *, reserve_output: int = 0, variants: dict[str, dict[str, Any]] | None = None,
                  **settings: Any) -> CostComparison:
    """Replays ``messages`` (a leading system message becomes the system prompt) through the
    managed window (``cache="auto"`` with ``prices`` unless ``settings`` say otherwise), the cache-naive one
    (:func:`naive_window`) and any ``variants`` (name to extra settings), pricing every call."""
    system = next((text_of(m) for m in messages if m["role"] == "system"), None)
    runs: dict[str, Callable[[], ContextWindow]] = {
        "managed": lambda: ContextWindow(model, max_tokens=max_tokens, reserve_output=reserve_output,
                                         system=system, **{"cache": CacheSchedule(prices), **settings}),
        "cache_naive": lambda: naive_window(model, max_tokens, reserve_output, system=system, **settings),
    }
    def variant(extra: dict[str, Any]) -> Callable[[], ContextWindow]:
        return lambda: ContextWindow(model, max_tokens=max_tokens, reserve_output=reserve_output, system=system,
                                     **{**settings, **extra})

    for name, extra in (variants or {}).items():
        runs[name] = variant(extra)
    comparison = CostComparison()
    for name, make in runs.items():
        window = make()
        recorder, fits, overflow = _replay_priced(messages, window, prices, rules, unmanaged=name == "managed")
        comparison.runs[name] = recorder.managed
        comparison.budget_ok[name] = fits
        if overflow:
            comparison.overflows[name] = overflow
        comparison.compactions[name] = window.compactions
        if recorder.unmanaged is not None:
            comparison.runs["unmanaged"] = recorder.unmanaged
    return comparison
