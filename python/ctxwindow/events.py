"""Events of a context window and their delivery.

Callbacks run after the window's state is consistent. A callback that raises never corrupts the
window: the error is logged (logger ``ctxwindow``) and kept in ``EventBus.errors``; it is re-raised
only when the window was built with ``raise_callback_errors=True``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EVENTS", "CallbackError", "EventBus", "StatusEvent"]

logger = logging.getLogger("ctxwindow")

#: How many callback errors an EventBus keeps.
MAX_ERRORS = 100

EVENTS = (
    "on_evict",
    "on_compact",
    "on_zone_change",
    "on_velocity_spike",
    "on_alert",
    "on_status",
    "on_turn_start",
    "on_turn_end",
    "on_tool_result",
    "on_overflow",
    "on_delegate_start",
    "on_delegate_end",
)


@dataclass(frozen=True)
class StatusEvent:
    """A human sentence about the window, e.g. "context window at 87% capacity (35,200/40,000
    tokens), compaction applied", with the numbers behind it."""

    message: str
    total_tokens: int
    budget_tokens: int
    utilization: float
    zone: str


@dataclass(frozen=True)
class CallbackError:
    """A callback that raised: which event, and the exception."""

    event: str
    error: BaseException


@dataclass
class EventBus:
    """Callbacks by event name, delivered in registration order."""

    raise_errors: bool = False
    callbacks: dict[str, list[Callable[..., Any]]] = field(default_factory=dict)
    #: The most recent callback errors (at most :data:`MAX_ERRORS`, oldest dropped first).
    errors: deque[CallbackError] = field(default_factory=lambda: deque(maxlen=MAX_ERRORS))

    def on(self, event: str, callback: Callable[..., Any]) -> None:
        """Registers ``callback`` for ``event`` (one of :data:`EVENTS`)."""
        if event not in EVENTS:
            raise ValueError(f"unknown event {event!r}; known: {', '.join(EVENTS)}")
        if not callable(callback):
            raise TypeError(f"the callback for {event} must be callable")
        self.callbacks.setdefault(event, []).append(callback)

    def has(self, event: str) -> bool:
        """Whether anything listens to ``event``."""
        return bool(self.callbacks.get(event))

    def emit(self, event: str, *args: Any) -> None:
        """Calls every callback of ``event``; errors are logged and kept (re-raised after all
        callbacks ran when ``raise_errors``)."""
        first: BaseException | None = None
        for callback in self.callbacks.get(event, ()):
            try:
                callback(*args)
            except Exception as error:  # a user callback may raise anything
                logger.exception("ctxwindow: %s callback %r raised", event, callback)
                self.errors.append(CallbackError(event, error))
                first = first or error
        if first is not None and self.raise_errors:
            raise first
