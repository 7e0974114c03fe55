"""Compaction strategies and their composition.

Free strategies (no model call): :class:`TruncateToolResults`, :class:`ClearToolResults`,
:class:`MicroCompact`, :class:`DropOldest`, :class:`SlidingWindow`, :class:`ScoredEviction`;
any callable ``(messages, budget) -> messages`` (:class:`CallableStrategy`); :class:`Cascade`.
Summaries: :class:`Summarize` (transactional, incremental), :class:`ProgressiveSummarize`;
:class:`SemanticMerge` (near-duplicate tool outputs); :class:`Notes` (carried verbatim).
"""

from ctxwindow.strategies.base import Archive, CompactionState, Entry, Strategy, StrategyReport
from ctxwindow.strategies.cascade import CallableStrategy, Cascade, as_strategy
from ctxwindow.strategies.merge import Merge, SemanticMerge
from ctxwindow.strategies.notes import Note, Notes
from ctxwindow.strategies.summarize import ProgressiveSummarize, Summarize, SummaryFailed
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
    "Merge",
    "SemanticMerge",
    "Note",
    "Notes",
    "ProgressiveSummarize",
    "Summarize",
    "SummaryFailed",
]
