"""PressureMonitor: zones by utilization, growth velocity, spikes, turns until red, and the
provider-reported count of a turn."""

from __future__ import annotations

import pytest

from ctxwindow import InvalidArgumentError
from ctxwindow.pressure import PressureMonitor, zone_of


def test_zones() -> None:
    assert [zone_of(u) for u in (0.0, 0.49, 0.5, 0.74, 0.75, 0.89, 0.9, 1.2)] == [
        "green", "green", "yellow", "yellow", "orange", "orange", "red", "red"]


def test_pressure_velocity_spike_and_turns_until_red() -> None:
    changes: list[tuple[str, str]] = []
    spikes: list[float] = []
    monitor = PressureMonitor(10_000, on_zone_change=lambda a, b, r: changes.append((a, b)),
                              on_velocity_spike=lambda r: spikes.append(r.velocity))
    for total in (1000, 1100, 1200, 1300, 1400, 1500):
        reading = monitor.observe(total)
    assert reading.velocity == pytest.approx(100)
    assert reading.turns_until_red == pytest.approx((9000 - 1500) / 100)
    assert not spikes
    reading = monitor.observe(6000)  # a huge tool output
    assert reading.spike and spikes
    assert changes == [("green", "yellow")]
    reported = monitor.report(9500)
    assert reported.reported and reported.zone == "red" and reported.turns_until_red == 0.0
    with pytest.raises(InvalidArgumentError):
        PressureMonitor(0)
