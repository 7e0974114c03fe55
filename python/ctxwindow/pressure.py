"""Pressure zones, growth velocity and spikes of a context window.

Zones by utilization of the prompt budget: green < 50% <= yellow < 75% <= orange < 90% <= red.
Velocity is the rolling mean of the per-turn growth over the last ``window`` turns; its baseline
is an exponential moving average; a spike is a velocity above ``spike_factor`` times the baseline.
Provider-reported counts replace the estimate of the turn they belong to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxwindow.errors import InvalidArgumentError

__all__ = ["ZONES", "zone_of", "PressureReading", "PressureMonitor"]

ZONES = ("green", "yellow", "orange", "red")
ZONE_THRESHOLDS = (0.5, 0.75, 0.9)


def zone_of(utilization: float) -> str:
    """The zone of a utilization (fraction of the budget)."""
    for zone, threshold in zip(ZONES, ZONE_THRESHOLDS):
        if utilization < threshold:
            return zone
    return "red"


@dataclass(frozen=True)
class PressureReading:
    """The pressure after one turn."""

    tokens: int
    utilization: float
    zone: str
    velocity: float
    baseline: float
    spike: bool
    turns_until_red: float | None
    reported: bool


class PressureMonitor:
    """Follows the prompt size turn by turn. ``on_zone_change(old, new, reading)`` and
    ``on_velocity_spike(reading)`` are called when they happen."""

    def __init__(
        self,
        budget_tokens: int,
        *,
        window: int = 5,
        spike_factor: float = 3.0,
        ema_alpha: float = 0.2,
        on_zone_change: Callable[[str, str, PressureReading], Any] | None = None,
        on_velocity_spike: Callable[[PressureReading], Any] | None = None,
    ) -> None:
        if budget_tokens <= 0:
            raise InvalidArgumentError(f"budget_tokens must be > 0, got {budget_tokens}")
        if window < 1:
            raise InvalidArgumentError(f"window must be >= 1, got {window}")
        if spike_factor <= 1:
            raise InvalidArgumentError(f"spike_factor must be > 1, got {spike_factor}")
        if not 0 < ema_alpha <= 1:
            raise InvalidArgumentError(f"ema_alpha must be in (0, 1], got {ema_alpha}")
        self.budget_tokens = budget_tokens
        self.spike_factor = spike_factor
        self.ema_alpha = ema_alpha
        self.on_zone_change = on_zone_change
        self.on_velocity_spike = on_velocity_spike
        self._totals: deque[int] = deque(maxlen=window + 1)
        self._reported: deque[bool] = deque(maxlen=window + 1)
        self._baseline: float | None = None
        self.last: PressureReading | None = None

    @property
    def zone(self) -> str:
        """The current zone (green before any turn)."""
        return self.last.zone if self.last else "green"

    def observe(self, tokens: int, *, reported: bool = False) -> PressureReading:
        """Records the prompt size at the end of a turn."""
        self._totals.append(tokens)
        self._reported.append(reported)
        return self._update()

    def report(self, tokens: int) -> PressureReading:
        """A provider-reported count for the latest turn: it replaces the estimate."""
        if not self._totals:
            return self.observe(tokens, reported=True)
        self._totals[-1] = tokens
        self._reported[-1] = True
        return self._update(rebase=False)

    def _update(self, rebase: bool = True) -> PressureReading:
        totals = list(self._totals)
        growth = [b - a for a, b in zip(totals, totals[1:])]
        velocity = sum(growth) / len(growth) if growth else 0.0
        baseline = self._baseline if self._baseline is not None else velocity
        spike = bool(growth) and baseline > 0 and velocity > self.spike_factor * baseline
        if rebase and growth:
            self._baseline = velocity if self._baseline is None else (
                self.ema_alpha * velocity + (1 - self.ema_alpha) * self._baseline)
        tokens = totals[-1]
        utilization = tokens / self.budget_tokens
        red_at = ZONE_THRESHOLDS[-1] * self.budget_tokens
        if tokens >= red_at:
            until_red: float | None = 0.0
        elif velocity > 0:
            until_red = (red_at - tokens) / velocity
        else:
            until_red = None
        reading = PressureReading(tokens, utilization, zone_of(utilization), velocity,
                                  baseline, spike, until_red, self._reported[-1])
        previous, self.last = self.last, reading
        old_zone = previous.zone if previous else "green"
        if reading.zone != old_zone and self.on_zone_change:
            self.on_zone_change(old_zone, reading.zone, reading)
        if spike and self.on_velocity_spike:
            self.on_velocity_spike(reading)
        return reading
