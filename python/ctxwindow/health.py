"""Health of a context window: six metrics per turn, graded alerts, trends, and exports.

>>> from ctxwindow import ContextWindow
>>> window = ContextWindow("gpt-4o", max_tokens=4000)
>>> monitor = HealthMonitor(window)
>>> window.add({"role": "user", "content": "hello"})
>>> snapshot = monitor.collect()
>>> round(snapshot.utilization, 3), monitor.check_alerts(snapshot)
(0.002, [])

Metrics (one snapshot per :meth:`HealthMonitor.collect`, normally once per turn):
utilization (prompt / budget), eviction rate (messages evicted since the last snapshot), compression
ratio (tokens before / after the last compaction), burn rate (tokens added since the last
snapshot), fidelity (deterministic key-fact retention of the last compaction), tool-result bloat
(tool result tokens / prompt).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import IO, Any

from ctxwindow.errors import InvalidArgumentError
from ctxwindow.window import CompactionResult, ContextWindow

__all__ = ["HealthThresholds", "HealthSnapshot", "Alert", "HealthMonitor", "LEVELS"]

LEVELS = ("info", "warning", "critical")


@dataclass(frozen=True)
class HealthThresholds:
    """When alerts fire (all configurable)."""

    utilization: float = 0.90  # critical when above for `utilization_turns` turns in a row
    utilization_turns: int = 3
    eviction_rate: float = 5.0  # warning when above for `eviction_turns` snapshots in a row
    eviction_turns: int = 3
    fidelity: float = 0.75  # warning when the last compaction kept less
    compression_ratio: float = 2.0  # info when an LLM compaction compressed less
    tool_result_bloat: float = 0.30  # warning when tool results take more of the prompt
    burn_spike: float = 3.0  # warning when the burn rate exceeds this many times its baseline
    baseline_alpha: float = 0.2
    #: No burn-rate or tool-result-bloat warning while the prompt uses less of the budget than
    #: this: growth in a nearly empty window is no pressure (a 2%-full window raises nothing).
    quiet_below: float = 0.25

    def __post_init__(self) -> None:
        for name in ("utilization", "fidelity", "tool_result_bloat", "baseline_alpha", "quiet_below"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InvalidArgumentError(f"{name} threshold must be in (0, 1], got {value}")
        for name in ("utilization_turns", "eviction_turns"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name} must be >= 1")
        if self.eviction_rate < 0 or self.compression_ratio < 1 or self.burn_spike <= 1:
            raise InvalidArgumentError("eviction_rate >= 0, compression_ratio >= 1 and burn_spike > 1 are required")


@dataclass(frozen=True)
class HealthSnapshot:
    """The health of the window at one turn."""

    turn: int
    timestamp: float
    total_tokens: int
    budget_tokens: int
    utilization: float
    eviction_rate: float
    compression_ratio: float | None
    burn_rate: float
    fidelity: float | None
    tool_result_bloat: float
    llm_compaction: bool = False
    #: Key facts the fidelity gate could not keep in the last compaction (None: it did not run).
    facts_lost: int | None = None


@dataclass(frozen=True)
class Alert:
    """An alert: ``level`` in info / warning / critical, the ``metric`` it is about, a sentence."""

    level: str
    metric: str
    message: str
    value: float
    threshold: float
    turn: int


@dataclass
class _Condition:
    streak: int = 0
    active: bool = False


class HealthMonitor:
    """Collects snapshots of a window, raises graded alerts (once per episode of a condition,
    again only after it cleared), reports trends and exports metrics."""

    def __init__(self, window: ContextWindow, thresholds: HealthThresholds | None = None,
                 on_alert: Callable[[Alert], Any] | None = None, history: int = 500) -> None:
        if history < 2:
            raise InvalidArgumentError(f"history must be >= 2, got {history}")
        self.window = window
        self.thresholds = thresholds or HealthThresholds()
        self.on_alert = on_alert
        self.snapshots: deque[HealthSnapshot] = deque(maxlen=history)
        self.alerts: list[Alert] = []
        self._conditions: dict[str, _Condition] = {}
        self._evicted_seen = window.evicted_messages
        self._added_seen = window.tokens_added
        self._compactions_seen = window.compactions
        self._burn_baseline: float | None = None
        window.measure_fidelity = True

    def collect(self) -> HealthSnapshot:
        """A snapshot of the window now; the rates cover the time since the previous one."""
        window = self.window
        usage = window.usage
        evicted = window.evicted_messages - self._evicted_seen
        added = window.tokens_added - self._added_seen
        last: CompactionResult | None = window.last_compaction
        new_compaction = window.compactions != self._compactions_seen and last is not None
        ratio = fidelity = None
        facts_lost: int | None = None
        llm = False
        if last is not None and last.tokens_after > 0 and (last.applied or last.evicted):
            ratio = last.tokens_before / last.tokens_after
            fidelity = last.fidelity
            facts_lost = len(last.gate.lost) if last.gate is not None else None
            llm = new_compaction and any(r.name in window.llm_strategy_names for r in last.reports if r.changed)
        snapshot = HealthSnapshot(
            turn=window.turn, timestamp=time.time(), total_tokens=usage.total, budget_tokens=usage.budget,
            utilization=usage.total / usage.budget, eviction_rate=float(evicted), compression_ratio=ratio,
            burn_rate=float(added), fidelity=fidelity,
            tool_result_bloat=usage.by_component["tool_results"] / usage.total if usage.total else 0.0,
            llm_compaction=llm, facts_lost=facts_lost)
        self._evicted_seen, self._added_seen = window.evicted_messages, window.tokens_added
        self._compactions_seen = window.compactions
        self.snapshots.append(snapshot)
        return snapshot

    def _condition(self, name: str, holds: bool, turns: int = 1) -> bool:
        """Whether the condition just became an alert (held `turns` times, not already active)."""
        state = self._conditions.setdefault(name, _Condition())
        if not holds:
            state.streak, state.active = 0, False
            return False
        state.streak += 1
        if state.streak >= turns and not state.active:
            state.active = True
            return True
        return False

    def check_alerts(self, snapshot: HealthSnapshot) -> list[Alert]:
        """The alerts this snapshot raises (each condition alerts once until it clears)."""
        t = self.thresholds
        raised: list[Alert] = []

        def alert(level: str, metric: str, value: float, threshold: float, message: str) -> None:
            raised.append(Alert(level, metric, message, value, threshold, snapshot.turn))

        if self._condition("utilization", snapshot.utilization > t.utilization, t.utilization_turns):
            alert("critical", "utilization", snapshot.utilization, t.utilization,
                  f"context window above {t.utilization:.0%} for {t.utilization_turns} turns "
                  f"({snapshot.total_tokens:,}/{snapshot.budget_tokens:,} tokens)")
        if self._condition("eviction_rate", snapshot.eviction_rate > t.eviction_rate, t.eviction_turns):
            alert("warning", "eviction_rate", snapshot.eviction_rate, t.eviction_rate,
                  f"more than {t.eviction_rate:g} messages evicted per turn for {t.eviction_turns} turns")
        if self._condition("fidelity", snapshot.fidelity is not None and snapshot.fidelity < t.fidelity):
            alert("warning", "fidelity", snapshot.fidelity or 0.0, t.fidelity,
                  f"the last compaction kept {snapshot.fidelity:.0%} of the key facts (below {t.fidelity:.0%})")
        low_ratio = snapshot.llm_compaction and snapshot.compression_ratio is not None \
            and snapshot.compression_ratio < t.compression_ratio
        if self._condition("compression_ratio", low_ratio):
            alert("info", "compression_ratio", snapshot.compression_ratio or 0.0, t.compression_ratio,
                  f"an LLM compaction compressed only {snapshot.compression_ratio:.1f}x "
                  f"(below {t.compression_ratio:g}x)")
        quiet = snapshot.utilization < t.quiet_below
        if self._condition("tool_result_bloat", not quiet and snapshot.tool_result_bloat > t.tool_result_bloat):
            alert("warning", "tool_result_bloat", snapshot.tool_result_bloat, t.tool_result_bloat,
                  f"tool results take {snapshot.tool_result_bloat:.0%} of the prompt "
                  f"(above {t.tool_result_bloat:.0%})")
        baseline = self._burn_baseline
        spike = not quiet and baseline is not None and baseline > 0 and snapshot.burn_rate > t.burn_spike * baseline
        if self._condition("burn_rate", spike):
            alert("warning", "burn_rate", snapshot.burn_rate, t.burn_spike * (baseline or 0.0),
                  f"burn rate {snapshot.burn_rate:,.0f} tokens/turn, over {t.burn_spike:g}x its baseline "
                  f"({baseline or 0:,.0f})")
        self._burn_baseline = snapshot.burn_rate if baseline is None else (
            t.baseline_alpha * snapshot.burn_rate + (1 - t.baseline_alpha) * baseline)
        for item in raised:
            self.alerts.append(item)
            if self.on_alert is not None:
                self.on_alert(item)
            self.window.events.emit("on_alert", item)
        return raised

    def observe(self) -> tuple[HealthSnapshot, list[Alert]]:
        """:meth:`collect` then :meth:`check_alerts`."""
        snapshot = self.collect()
        return snapshot, self.check_alerts(snapshot)

    def trend_report(self, last: int = 10) -> dict[str, Any]:
        """Trends over the last ``last`` snapshots: utilization and burn-rate deltas (last minus
        first), average fidelity, and a direction for each (rising / falling / stable, with a 5%
        of budget or of the mean burn dead band)."""
        if last < 2:
            raise InvalidArgumentError(f"last must be >= 2, got {last}")
        window = list(self.snapshots)[-last:]
        if not window:
            return {"snapshots": 0}
        first, final = window[0], window[-1]
        utilization_delta = final.utilization - first.utilization
        burn = [s.burn_rate for s in window]
        mean_burn = sum(burn) / len(burn)
        burn_delta = final.burn_rate - first.burn_rate
        fidelities = [s.fidelity for s in window if s.fidelity is not None]

        def direction(delta: float, band: float) -> str:
            return "rising" if delta > band else "falling" if delta < -band else "stable"

        return {
            "snapshots": len(window),
            "from_turn": first.turn, "to_turn": final.turn,
            "utilization": final.utilization, "utilization_delta": utilization_delta,
            "utilization_trend": direction(utilization_delta, 0.05),
            "burn_rate_mean": mean_burn, "burn_rate_delta": burn_delta,
            "burn_rate_trend": direction(burn_delta, 0.05 * mean_burn if mean_burn else 0.0),
            "fidelity_mean": sum(fidelities) / len(fidelities) if fidelities else None,
            "evictions": sum(s.eviction_rate for s in window),
            "alerts": len([a for a in self.alerts if first.turn <= a.turn <= final.turn]),
        }

    def export_jsonl(self, file: IO[str]) -> int:
        """Writes the snapshots as JSON lines; returns how many."""
        for snapshot in self.snapshots:
            file.write(json.dumps(asdict(snapshot)) + "\n")
        return len(self.snapshots)

    def otel_metrics(self, snapshot: HealthSnapshot | None = None) -> list[dict[str, Any]]:
        """OpenTelemetry-style data points (name, value, unit, attributes) of a snapshot (the
        latest by default), ready for any metrics exporter; no OpenTelemetry package needed."""
        snapshot = snapshot or (self.snapshots[-1] if self.snapshots else self.collect())
        attributes = {"ctxwindow.model": self.window.model or "", "ctxwindow.profile": self.window.profile,
                      "ctxwindow.turn": snapshot.turn}
        points = [
            ("ctxwindow.context.utilization", snapshot.utilization, "1"),
            ("ctxwindow.context.tokens", snapshot.total_tokens, "{token}"),
            ("ctxwindow.eviction.rate", snapshot.eviction_rate, "{message}/{turn}"),
            ("ctxwindow.compression.ratio", snapshot.compression_ratio, "1"),
            ("ctxwindow.burn.rate", snapshot.burn_rate, "{token}/{turn}"),
            ("ctxwindow.fidelity.key_facts", snapshot.fidelity, "1"),
            ("ctxwindow.fidelity.facts_lost", snapshot.facts_lost, "{fact}"),
            ("ctxwindow.tool_results.share", snapshot.tool_result_bloat, "1"),
        ]
        return [{"name": name, "value": value, "unit": unit, "attributes": dict(attributes)}
                for name, value, unit in points if value is not None]

