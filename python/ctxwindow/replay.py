"""Replaying a recorded conversation through a :class:`~ctxwindow.ContextWindow`, message by
message, as the agent loop that recorded it would have: :func:`replay` and its
:class:`ReplayReport` (tokens sent per model call managed vs unmanaged, utilization, zone changes,
evictions and compactions, overflows, the pairing check, key-fact fidelity, health alerts and the
time spent managing per message). ``ctxwindow replay`` prints it (:mod:`ctxwindow.cli`);
:mod:`ctxwindow.costreport` prices its model calls.

>>> from ctxwindow import ContextWindow
>>> window = ContextWindow("gpt-4o", max_tokens=4_000)
>>> report = replay([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
...                 window, ReplayReport("", "chat", "gpt-4o", 4_000, 0))
>>> report.calls, report.pairing_ok
(1, True)
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxwindow._canonical import text_of
from ctxwindow._types import Message
from ctxwindow.errors import ContextOverflowError
from ctxwindow.fidelity import key_fact_retention
from ctxwindow.health import HealthMonitor
from ctxwindow.messages import check_history
from ctxwindow.window import ContextWindow

__all__ = ["ReplayReport", "replay"]


@dataclass
class ReplayReport:
    """The numbers of a replay."""

    source: str
    format: str
    model: str
    max_tokens: int
    reserve_output: int
    messages: int = 0
    calls: int = 0
    sent_managed: list[int] = field(default_factory=list)
    sent_unmanaged: list[int] = field(default_factory=list)
    utilization: list[float] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    eviction_calls: list[int] = field(default_factory=list)
    compaction_calls: list[int] = field(default_factory=list)
    overflows: int = 0
    overflow_message: str = ""
    pairing_ok: bool = True
    turn_us: list[float] = field(default_factory=list)
    fidelity: float = 1.0
    fidelity_missing: list[str] = field(default_factory=list)
    evicted_messages: int = 0
    alerts: list[dict[str, Any]] = field(default_factory=list)
    #: Records of the file that are not chat messages, skipped: kind -> count.
    skipped: dict[str, int] = field(default_factory=dict)
    tool_definitions: int = 0
    tool_definition_tokens: int = 0
    #: The counter's name (``o200k_base``, ``claude-estimate``) and whether its counts are exact.
    encoding: str = ""
    exact: bool = True
    #: Key-fact fidelity of each compaction the health monitor saw (the figure of its alert).
    compaction_fidelity: list[float] = field(default_factory=list)
    fidelity_threshold: float = 0.75
    #: Cost with the prompt cache counted, per run (managed, unmanaged, cache_naive): see ctxwindow.costreport.
    cost: dict[str, Any] = field(default_factory=dict)
    #: Cached share of each call's prompt, per run.
    cached_share: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The report's figures as a JSON-ready dict (what ``ctxwindow replay --json`` writes)."""
        managed, unmanaged = sum(self.sent_managed), sum(self.sent_unmanaged)
        times = sorted(self.turn_us) or [0.0]
        return {
            "source": self.source, "format": self.format, "model": self.model,
            "encoding": self.encoding, "exact": self.exact,
            "max_tokens": self.max_tokens, "reserve_output": self.reserve_output,
            "messages": self.messages, "model_calls": self.calls,
            "tokens_sent_managed": managed, "tokens_sent_unmanaged": unmanaged,
            "tokens_saved": unmanaged - managed,
            "saved_fraction": (unmanaged - managed) / unmanaged if unmanaged else 0.0,
            "peak_utilization": max(self.utilization, default=0.0),
            "overflows": self.overflows, "pairing_ok": self.pairing_ok,
            "evicted_messages": self.evicted_messages,
            # The one fidelity figure, as the health alerts quote it: the lowest key-fact fidelity
            # of a compaction (None without compactions).
            "key_fact_fidelity": min(self.compaction_fidelity, default=None),
            "key_fact_fidelity_threshold": self.fidelity_threshold,
            "compaction_fidelity": self.compaction_fidelity,
            "compactions_below_fidelity_threshold": sum(f < self.fidelity_threshold for f in self.compaction_fidelity),
            "key_facts_in_final_prompt": self.fidelity,
            "skipped_records": self.skipped,
            "tool_definitions": self.tool_definitions,
            "tool_definition_tokens": self.tool_definition_tokens,
            "manage_us_p50": statistics.median(times),
            "manage_us_p99": times[min(len(times) - 1, int(0.99 * len(times)))],
            "events": self.events,
            "alerts": self.alerts,
            **({"cost": self.cost} if self.cost else {}),
        }


def replay(messages: list[Message], window: ContextWindow, report: ReplayReport,
           progress: Callable[[], Any] | None = None,
           on_call: Callable[[list[Message], Message, list[Message]], Any] | None = None) -> ReplayReport:
    """Replays ``messages`` (the system prompt already in ``window``) through ``window``.
    ``on_call(prompt, reply, replayed)``, when given, sees every model call: the prompt sent,
    the reply, and the conversation messages replayed before it."""
    counter = window.tokenizer
    unmanaged = 3 + window.usage.by_component["system_prompt"] + window.usage.by_component["tool_definitions"]
    last_evicted = 0
    last_compactions = 0

    def zone_change(old: str, new: str, reading: Any) -> None:
        report.events.append({"call": report.calls, "event": "zone", "detail": f"{old} -> {new}",
                              "tokens": reading.tokens})

    window.events.on("on_zone_change", zone_change)
    health = HealthMonitor(window)
    report.fidelity_threshold = health.thresholds.fidelity
    observed_compactions = window.compactions

    def observe() -> None:
        nonlocal observed_compactions
        snapshot, alerts = health.observe()
        for alert in alerts:
            report.alerts.append({"call": report.calls, "level": alert.level, "metric": alert.metric,
                                  "message": alert.message})
        if window.compactions != observed_compactions and snapshot.fidelity is not None:
            report.compaction_fidelity.append(snapshot.fidelity)
        observed_compactions = window.compactions

    replayed: list[Message] = []
    for message in messages:
        if message.get("role") == "system":
            continue
        if message.get("role") == "assistant" and not window.pending_messages():
            usage = window.usage
            report.calls += 1
            report.sent_managed.append(usage.total)
            report.sent_unmanaged.append(unmanaged)
            report.utilization.append(usage.total / usage.budget)
            report.zones.append(usage.zone)
            if on_call is not None:
                on_call(window.messages(), message, replayed)
            observe()
        started = time.perf_counter()
        try:
            window.add(message)
            sent = window.messages()
        except ContextOverflowError as error:
            report.overflows += 1
            report.overflow_message = str(error)
            break
        report.turn_us.append((time.perf_counter() - started) * 1e6)
        report.messages += 1
        replayed.append(message)
        unmanaged += counter.count_message(message)
        report.pairing_ok &= not check_history(sent)
        if window.evicted_messages != last_evicted or window.compactions != last_compactions:
            result = window.last_compaction
            if result is not None:
                report.events.append({
                    "call": report.calls, "event": "compaction",
                    "detail": ", ".join(result.applied) or "-",
                    "evicted": window.evicted_messages - last_evicted,
                    "tokens_before": result.tokens_before, "tokens_after": result.tokens_after})
                if window.evicted_messages != last_evicted:
                    report.eviction_calls.append(report.calls)
                else:
                    report.compaction_calls.append(report.calls)
            last_evicted, last_compactions = window.evicted_messages, window.compactions
        if progress is not None:
            progress()
    if window.compactions != observed_compactions and not report.overflows:
        observe()  # a compaction after the last model call
    report.evicted_messages = window.evicted_messages
    original = "\n".join(text_of(m) + "\n" + json.dumps(m.get("tool_calls") or "") for m in messages)
    kept = "\n".join(text_of(m) + "\n" + json.dumps(m.get("tool_calls") or "") for m in window.messages())
    fidelity = key_fact_retention(original, kept)
    report.fidelity, report.fidelity_missing = fidelity.score, fidelity.missing[:20]
    return report
