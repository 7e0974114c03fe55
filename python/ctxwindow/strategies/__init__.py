"""Compaction strategies and their composition.

Free strategies (no model call): :class:`TruncateToolResults`, :class:`ClearToolResults`,
:class:`MicroCompact`, :class:`DropOldest`, :class:`SlidingWindow`, :class:`ScoredEviction`;
any callable ``(messages, budget) -> messages`` (:class:`CallableStrategy`); :class:`Cascade`.
"""

from ctxwindow.strategies.base import Archive, CompactionState, Entry, Strategy, StrategyReport
from ctxwindow.strategies.cascade import CallableStrategy, Cascade, as_strategy
from ctxwindow.strategies.free import (
    ClearToolResults,
    DropOldest,
    MicroCompact,
    ScoredEviction,
    SlidingWindow,
    TruncateToolResults,
)

__all__ = [
    "Archive",
    "CompactionState",
    "Entry",
    "Strategy",
    "StrategyReport",
    "CallableStrategy",
    "Cascade",
    "as_strategy",
    "ClearToolResults",
    "DropOldest",
    "MicroCompact",
    "ScoredEviction",
    "SlidingWindow",
    "TruncateToolResults",
]
