"""Events of a window: callbacks run after the state is consistent, a raising callback is
logged and kept (re-raised only with ``raise_callback_errors=True``) and never corrupts the
window; status sentences and zone changes as the prompt fills."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwindow import ContextWindow

from .window_checks import check_valid


def test_callbacks_that_raise_do_not_corrupt() -> None:
    def boom(*args: Any) -> None:
        raise RuntimeError("callback failure")

    window = ContextWindow("gpt-4o", max_tokens=400, on_evict=boom, on_compact=boom, on_status=boom,
                           on_turn_start=boom, preserve_recent=1)
    for i in range(20):
        window.add({"role": "user", "content": f"m{i} " + "text " * 12})
    check_valid(window, None)
    assert window.events.errors and all(isinstance(e.error, RuntimeError) for e in window.events.errors)
    strict = ContextWindow("gpt-4o", max_tokens=4000, on_turn_start=boom, raise_callback_errors=True)
    with pytest.raises(RuntimeError):
        strict.add({"role": "user", "content": "hi"})
    check_valid(strict, None)


def test_events_status_zone_and_usage() -> None:
    statuses: list[str] = []
    zones: list[tuple[str, str]] = []
    window = ContextWindow("gpt-4o", max_tokens=1000, reserve_output=100, system="s",
                           on_status=lambda e: statuses.append(e.message),
                           on_zone_change=lambda old, new, r: zones.append((old, new)))
    for i in range(40):
        window.add({"role": "user", "content": f"turn {i} " + "word " * 15})
        window.add({"role": "assistant", "content": "ok " * 10})
    usage = window.usage
    assert usage.budget == 900 and usage.available == 900 - usage.total
    assert set(usage.by_component) == {"system_prompt", "tool_definitions", "message_history",
                                       "tool_results", "memory_injection", "output_reserved"}
    assert usage.by_component["output_reserved"] == 100
    assert statuses and statuses[0].startswith("context window at ") and "/900 tokens)" in statuses[0]
    assert zones and zones[0][0] == "green"
    # The zone is the last turn's reading, by the design's thresholds.
    reading = window.pressure_reading()
    assert reading is not None and reading.utilization == pytest.approx(reading.tokens / 900)
    u = reading.utilization
    assert window.usage.zone == ("red" if u >= 0.9 else "orange" if u >= 0.75 else "yellow" if u >= 0.5 else "green")
    assert window.usage.zone != "green"  # 40 turns of ~25 tokens fill most of 900 tokens
