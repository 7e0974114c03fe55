"""HealthMonitor: each alert fires exactly when its condition holds for the required turns and
clears; snapshots of real replays equal values recomputed independently; trends and exports."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from ctxwindow import ContextOverflowError, ContextWindow, InvalidArgumentError, Tokenizer
from ctxwindow.health import Alert, HealthMonitor, HealthSnapshot, HealthThresholds
from ctxwindow.messages import from_tau_bench
from ctxwindow.strategies import Summarize

from .window_checks import call, result, user_facts_window

TOKENIZER = Tokenizer("o200k_base")


def snapshot(turn: int, **values: Any) -> HealthSnapshot:
    base: dict[str, Any] = {"turn": turn, "timestamp": 0.0, "total_tokens": 100, "budget_tokens": 1000,
                            "utilization": 0.5, "eviction_rate": 0.0, "compression_ratio": None,
                            "burn_rate": 100.0, "fidelity": None, "tool_result_bloat": 0.0}
    base.update(values)
    return HealthSnapshot(**base)


def monitor() -> HealthMonitor:
    return HealthMonitor(ContextWindow("gpt-4o", max_tokens=1000))


def metrics(alerts: list[Alert]) -> list[str]:
    return [a.metric for a in alerts]


def test_utilization_alert_needs_three_turns_and_clears() -> None:
    m = monitor()
    fired = [metrics(m.check_alerts(snapshot(t, utilization=u)))
             for t, u in enumerate([0.95, 0.95, 0.95, 0.97, 0.5, 0.95, 0.95, 0.95])]
    assert fired == [[], [], ["utilization"], [], [], [], [], ["utilization"]]
    assert m.alerts[0].level == "critical" and "above 90% for 3 turns" in m.alerts[0].message


def test_eviction_rate_alert_is_sustained() -> None:
    m = monitor()
    fired = [metrics(m.check_alerts(snapshot(t, eviction_rate=r))) for t, r in enumerate([6, 6, 2, 6, 6, 6, 6])]
    assert fired == [[], [], [], [], [], ["eviction_rate"], []]
    assert m.alerts[0].level == "warning"


def test_fidelity_bloat_compression_and_burn_alerts() -> None:
    m = monitor()
    assert metrics(m.check_alerts(snapshot(1, fidelity=0.7))) == ["fidelity"]
    assert metrics(m.check_alerts(snapshot(2, fidelity=0.7))) == []  # no repeat while unchanged
    assert metrics(m.check_alerts(snapshot(3, fidelity=0.9))) == []
    assert metrics(m.check_alerts(snapshot(4, fidelity=0.6))) == ["fidelity"]
    assert metrics(m.check_alerts(snapshot(5, tool_result_bloat=0.31))) == ["tool_result_bloat"]
    assert metrics(m.check_alerts(snapshot(6, compression_ratio=1.5))) == []  # not an LLM compaction
    assert metrics(m.check_alerts(snapshot(7, compression_ratio=1.5, llm_compaction=True))) == ["compression_ratio"]
    assert m.alerts[-1].level == "info"
    burst = metrics(m.check_alerts(snapshot(8, burn_rate=1000.0)))
    assert burst == ["burn_rate"]
    seen: list[Alert] = []
    custom = HealthMonitor(ContextWindow("gpt-4o", max_tokens=1000), HealthThresholds(tool_result_bloat=0.5),
                           on_alert=seen.append)
    assert custom.check_alerts(snapshot(1, tool_result_bloat=0.4)) == []
    assert metrics(custom.check_alerts(snapshot(2, tool_result_bloat=0.6))) == ["tool_result_bloat"] == metrics(seen)
    with pytest.raises(InvalidArgumentError):
        HealthThresholds(utilization=1.5)


def test_replay_snapshots_match_independent_recomputation(shared_data: Path) -> None:
    records = json.loads((shared_data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    alerts: list[Alert] = []
    for record in records[:40]:
        messages = from_tau_bench(record)
        window = ContextWindow("gpt-4o", max_tokens=4000, system=messages[0]["content"], preserve_recent=2,
                               strategies=[Summarize(preserve_recent=2)], on_alert=alerts.append)
        health = HealthMonitor(window)
        evicted: list[Any] = []
        window.events.on("on_evict", lambda e, u: evicted.extend(e))
        added = 0
        evicted_seen = 0
        for message in messages[1:]:
            try:
                window.add(message)
            except ContextOverflowError:
                break  # protected content alone exceeds 4k in a few runs
            added += TOKENIZER.count_message(message)
            if message["role"] != "user":
                continue
            snap, _ = health.observe()
            sent = window.messages()
            total = TOKENIZER.count_messages(sent)
            tools = sum(TOKENIZER.count_message(m) for m in sent if m["role"] == "tool")
            assert snap.total_tokens == total
            assert snap.utilization == total / 4000
            assert snap.tool_result_bloat == tools / total
            assert snap.burn_rate == added
            assert snap.eviction_rate == len(evicted) - evicted_seen
            added, evicted_seen = 0, len(evicted)
            if snap.compression_ratio is not None:
                last = window.last_compaction
                assert last is not None and snap.compression_ratio == last.tokens_before / last.tokens_after
                assert snap.fidelity is not None and 0.0 <= snap.fidelity <= 1.0
    assert alerts and all(a.level in ("info", "warning", "critical") for a in alerts)


def test_trend_report_and_exports() -> None:
    window = ContextWindow("gpt-4o", max_tokens=3000, preserve_recent=2)
    health = HealthMonitor(window)
    for i in range(8):
        window.add({"role": "user", "content": f"question {i} " + "word " * 60})
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", "row " * (50 * (i + 1))))
        health.observe()
    report = health.trend_report(last=5)
    assert report["snapshots"] == 5 and report["utilization_trend"] in ("rising", "falling", "stable")
    assert report["burn_rate_trend"] == "rising" and report["burn_rate_delta"] > 0
    buffer = io.StringIO()
    assert health.export_jsonl(buffer) == 8
    rows = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert {"utilization", "eviction_rate", "compression_ratio", "burn_rate", "fidelity",
            "tool_result_bloat"} <= set(rows[0])
    points = health.otel_metrics()
    names = {p["name"] for p in points}
    assert {"ctxwindow.context.utilization", "ctxwindow.burn.rate", "ctxwindow.tool_results.share"} <= names
    assert all(p["attributes"]["ctxwindow.model"] == "gpt-4o" for p in points)
    with pytest.raises(InvalidArgumentError):
        health.trend_report(last=1)


def test_a_nearly_empty_window_raises_no_growth_warnings() -> None:
    m = monitor()
    assert m.check_alerts(snapshot(1, utilization=0.02, burn_rate=10.0)) == []
    assert m.check_alerts(snapshot(2, utilization=0.02, burn_rate=1000.0, tool_result_bloat=0.9)) == []
    assert metrics(m.check_alerts(snapshot(3, utilization=0.3, burn_rate=5000.0, tool_result_bloat=0.9))) == [
        "tool_result_bloat", "burn_rate"]
    with pytest.raises(InvalidArgumentError):
        HealthThresholds(quiet_below=0.0)


def test_the_health_monitor_reports_the_gate() -> None:
    window = user_facts_window(strategies=[Summarize(preserve_recent=2)])
    monitor = HealthMonitor(window)
    window.add({"role": "user", "content": "and now? " + "more detail " * 200})
    collected = monitor.collect()
    last = window.last_compaction
    assert last is not None and last.gate is not None
    assert collected.fidelity == last.gate.score and collected.facts_lost == len(last.gate.lost)
