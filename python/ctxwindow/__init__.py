"""ctxwindow: keep an LLM agent's context window inside its token budget.

Exact token counts (identical to ``tiktoken``), a token-tracked FIFO history whose eviction
cost does not grow with the conversation, and the pieces to build a managed context window on.

>>> from ctxwindow import Tokenizer, TokenHistory
>>> Tokenizer.for_model("gpt-4o").count("hello world")
2
>>> history = TokenHistory()
>>> history.push({"role": "user", "content": "hi"}, 8)
>>> history.total_tokens
8
"""

from __future__ import annotations

from ctxwindow._native import HistorySnapshot, TokenHistory, __version__
from ctxwindow.errors import (
    CheckpointCommitUnknownError,
    CheckpointCorruptError,
    CheckpointStoreError,
    ContextOverflowError,
    CtxWindowError,
    HistoryIndexError,
    InvalidArgumentError,
    InvalidTextError,
    InvalidTypeError,
    MalformedMessageError,
    MissingDependencyError,
    SnapshotError,
    StaleCheckpointError,
    UnknownEncodingError,
    WindowBusyError,
)
from ctxwindow.window import CompactionResult, ContextWindow, Usage
from ctxwindow.gate import GateOutcome
from ctxwindow.cache import CacheSchedule
from ctxwindow.cost import Prices
from ctxwindow.delegate import DelegationResult
from ctxwindow.instructions import Instruction, StandingInstructions
from ctxwindow.recall import Recall, RecallHit
from ctxwindow.tokenizer import (
    CallableTokenizer,
    EstimateTokenizer,
    HeuristicTokenizer,
    TokenCounter,
    Tokenizer,
    encoding_for_model,
    encoding_names,
    image_tokens,
)

__all__ = [
    "__version__",
    "ContextWindow",
    "CompactionResult",
    "Usage",
    "GateOutcome",
    "CacheSchedule",
    "Prices",
    "DelegationResult",
    "Instruction",
    "StandingInstructions",
    "Recall",
    "RecallHit",
    "TokenHistory",
    "HistorySnapshot",
    "Tokenizer",
    "HeuristicTokenizer",
    "EstimateTokenizer",
    "CallableTokenizer",
    "TokenCounter",
    "encoding_names",
    "encoding_for_model",
    "image_tokens",
    "CtxWindowError",
    "ContextOverflowError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "UnknownEncodingError",
    "SnapshotError",
    "HistoryIndexError",
    "InvalidTextError",
    "MalformedMessageError",
    "MissingDependencyError",
    "StaleCheckpointError",
    "CheckpointCorruptError",
    "CheckpointStoreError",
    "CheckpointCommitUnknownError",
    "WindowBusyError",
]
