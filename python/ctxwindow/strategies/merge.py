"""``SemanticMerge``: near-duplicate tool outputs (repeated status polls, retried commands) are
merged into the newest one; the older ones become short placeholders that say what they
duplicated, and the merges are recorded."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ctxwindow._checks import check_fraction, type_name
from ctxwindow._embed import Embedder, embed
from ctxwindow._native import Tokenizer
from ctxwindow.errors import InvalidTypeError
from ctxwindow.strategies.base import CompactionState, StrategyReport

__all__ = ["SemanticMerge", "Merge", "hashed_embedder"]

#: How many merge records a SemanticMerge keeps.
MAX_MERGES = 1000

@functools.cache
def _default_tokenizer() -> Tokenizer:
    return Tokenizer("o200k_base")


def hashed_embedder(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """The default embedder: native hashed bag of pieces, 256 dimensions (offline, fast)."""
    return _default_tokenizer().embed_many(list(texts), 256)


@dataclass(frozen=True)
class Merge:
    """One merge: the older message (by sequence number) folded into the newer one."""

    older_seq: int
    newer_seq: int
    similarity: float
    tool: str


@dataclass
class SemanticMerge:
    """Merges tool results whose embeddings have cosine >= ``threshold`` with a newer result of
    the same tool, keeping the newest. ``embedder(texts) -> (n, d) array``: the default is the
    native hashed embedder (cheap enough for every turn); any model can be plugged in."""

    threshold: float = 0.85
    embedder: Embedder | None = None
    name: str = "semantic_merge"
    cost: str = "free"
    #: The most recent merges (at most :data:`MAX_MERGES`, oldest dropped first).
    merges: deque[Merge] = field(default_factory=lambda: deque(maxlen=MAX_MERGES), init=False)

    def __post_init__(self) -> None:
        check_fraction(self.threshold, "threshold")
        if self.embedder is not None and not callable(self.embedder):
            raise InvalidTypeError(f"embedder must be a callable (texts) -> array of shape (n, d), "
                                   f"not {type_name(self.embedder)}")

    def apply(self, state: CompactionState) -> StrategyReport:
        report = StrategyReport(self.name, state.total(), state.total())
        results = [e for e in state.entries if e.role == "tool" and isinstance(e.message.get("content"), str)
                   and e.original is None]
        if len(results) < 2:
            return report
        vectors = embed(self.embedder or hashed_embedder, [e.message["content"] for e in results], np.float64)
        norms = np.linalg.norm(vectors, axis=1)
        norms[norms == 0] = 1.0
        unit = vectors / norms[:, None]
        similarity = unit @ unit.T
        tools = [state.tool_name(e) for e in results]
        for i in range(len(results) - 1):
            older = results[i]
            if state.is_protected(older) or not state.over_target():
                continue
            later = [j for j in range(i + 1, len(results))
                     if tools[j] == tools[i] and similarity[i, j] >= self.threshold]
            if not later:
                continue
            j = later[-1]
            newer = results[j]
            placeholder = {**older.message, "content":
                           f"[Merged: near-duplicate of the later {tools[i]} result at turn {newer.turn} "
                           f"(similarity {similarity[i, j]:.2f})]"}
            if state.count_message(placeholder) < older.tokens:
                state.rewrite(older, placeholder)
                self.merges.append(Merge(older.seq, newer.seq, float(similarity[i, j]), tools[i]))
                report.touched += 1
        report.tokens_after = state.total()
        return report
