"""Type stubs of the native module ``ctxwindow._native`` (Rust, PyO3)."""

from typing import Any, Callable, Iterable, Iterator, Mapping, final

import numpy as np
import numpy.typing as npt

__version__: str
__all__ = [
    "__version__",
    "TokenHistory",
    "HistorySnapshot",
    "Tokenizer",
    "Bm25Index",
    "HeuristicTokenizer",
    "EstimateTokenizer",
    "CallableTokenizer",
    "encoding_names",
    "encoding_for_model",
    "image_tokens",
    "model_names",
    "model_table",
    "score_columns",
    "select_columns",
    "order_keys",
    "key_histogram",
]

@final
class HistorySnapshot:
    """A restorable point of one TokenHistory. Holds no copy of the items."""

    def __len__(self) -> int: ...
    @property
    def total_tokens(self) -> int: ...

@final
class TokenHistory:
    """A token-tracked FIFO of arbitrary objects, evicted by whole groups, oldest first.

    Safe to share between threads. Removing k entries costs O(k) whatever the length.
    """

    def __new__(cls) -> TokenHistory: ...
    def push(self, item: object, tokens: int, starts_group: bool = True) -> None:
        """Append ``item`` costing ``tokens``; ``starts_group=False`` attaches it to the group
        of the previous entry (a tool result to its call)."""
    def evict(
        self, max_tokens: int, overhead: int = 0, low_watermark: int | None = None
    ) -> list[Any]:
        """Drop the oldest whole groups until ``total + overhead <= target`` (target:
        ``low_watermark`` if given, else ``max_tokens``); nothing while ``total + overhead <=
        max_tokens``. Returns the evicted items, oldest first."""
    def snapshot(self) -> HistorySnapshot:
        """A marker of the current state for :meth:`rollback`."""
    def rollback(self, snapshot: HistorySnapshot) -> None:
        """Restore exactly the state at ``snapshot``."""
    def clear(self) -> None:
        """Remove every entry (a rollback to an earlier snapshot restores them)."""
    @property
    def total_tokens(self) -> int: ...
    @property
    def kept_for_snapshots(self) -> int: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: int, /) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...
    def entry(self, index: int) -> tuple[Any, int, bool]:
        """``(item, tokens, starts_group)`` of the entry at ``index``."""
    def entries(self) -> list[tuple[Any, int, bool]]:
        """Every entry as ``(item, tokens, starts_group)``, oldest first."""
    def token_counts(self) -> list[int]:
        """Token counts of the entries, oldest first."""

@final
class Tokenizer:
    """Exact token counts, identical to ``tiktoken``'s ``encode_ordinary``."""

    def __new__(cls, encoding: str) -> Tokenizer: ...
    @staticmethod
    def for_model(model: str) -> Tokenizer | EstimateTokenizer:
        """The exact tokenizer of an OpenAI model; for ``claude-...`` and ``gemini-...``, which
        have no public vocabulary, their :class:`EstimateTokenizer`."""
    @property
    def name(self) -> str: ...
    @property
    def exact(self) -> bool: ...
    @property
    def vocab_size(self) -> int: ...
    def count(self, text: str) -> int: ...
    def count_many(self, texts: Iterable[str]) -> npt.NDArray[np.uint32]: ...
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Iterable[int]) -> str: ...
    def pieces(self, text: str) -> list[str]: ...
    def embed_many(self, texts: Iterable[str], dim: int = 256) -> npt.NDArray[np.float32]:
        """Hashed bag-of-pieces embeddings (rows L2-normalized), shape (len(texts), dim)."""
    def count_message(self, message: Mapping[str, Any]) -> int: ...
    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int: ...
    def __reduce__(self) -> tuple[type[Tokenizer], tuple[str]]: ...

@final
class HeuristicTokenizer:
    """An estimate, ``ceil(chars / chars_per_token)``, for models without a public vocabulary."""

    def __new__(cls, chars_per_token: float = 4.0) -> HeuristicTokenizer: ...
    @property
    def name(self) -> str: ...
    @property
    def exact(self) -> bool: ...
    @property
    def chars_per_token(self) -> float: ...
    def count(self, text: str) -> int: ...
    def count_many(self, texts: Iterable[str]) -> npt.NDArray[np.uint32]: ...
    def count_message(self, message: Mapping[str, Any]) -> int: ...
    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int: ...

@final
class EstimateTokenizer:
    """An estimate for a model without a public vocabulary: the exact count with a public one
    (``encoding``), times ``scale`` (the family's measured ``ratio`` times ``1 + margin``)."""

    def __new__(cls, model: str, scale: float | None = None) -> EstimateTokenizer: ...
    @property
    def name(self) -> str: ...
    @property
    def exact(self) -> bool: ...
    @property
    def model(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def encoding(self) -> str: ...
    @property
    def scale(self) -> float: ...
    @property
    def ratio(self) -> float: ...
    @property
    def margin(self) -> float: ...
    @property
    def tool_overhead(self) -> int: ...
    def count(self, text: str) -> int: ...
    def count_many(self, texts: Iterable[str]) -> npt.NDArray[np.uint32]: ...
    def count_message(self, message: Mapping[str, Any]) -> int: ...
    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int: ...
    def __reduce__(self) -> tuple[type[EstimateTokenizer], tuple[str, float]]: ...

@final
class CallableTokenizer:
    """Any ``(str) -> int`` callable as a token counter, with the chat accounting."""

    def __new__(
        cls, counter: Callable[[str], int], name: str | None = None, exact: bool = False
    ) -> CallableTokenizer: ...
    @property
    def name(self) -> str: ...
    @property
    def exact(self) -> bool: ...
    def count(self, text: str) -> int: ...
    def count_many(self, texts: Iterable[str]) -> npt.NDArray[np.uint32]: ...
    def count_message(self, message: Mapping[str, Any]) -> int: ...
    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int: ...

def encoding_names() -> list[str]: ...
def encoding_for_model(model: str) -> str: ...
def image_tokens(
    detail: str = "auto", width: int | None = None, height: int | None = None, model: str | None = None
) -> int:
    """Tokens of an image part, priced as ``model``'s family does (GPT-4o's when None)."""

def model_names(model: str) -> list[str]:
    """``model``, then what follows each provider prefix in it (ending in ``:``, ``/`` or ``.``):
    the names every model table is searched for, in order. A lone surrogate raises
    ``InvalidTextError``."""

def model_table() -> list[tuple[str, str, str]]:
    """The counting rows of the core's model table in lookup order: ``(pattern, kind, value)``,
    ``pattern`` a model name or a prefix ending in ``*``; ``kind`` ``"encoding"`` (``value``: the
    encoding's name) or ``"estimate"`` (``value``: the family, e.g. ``"claude"``)."""

def score_columns(
    policy_name: str,
    current_turn: int,
    params: Mapping[str, Any],
    *,
    tokens: npt.NDArray[np.int64] | None = None,
    created_turn: npt.NDArray[np.int64] | None = None,
    last_access_turn: npt.NDArray[np.int64] | None = None,
    access_count: npt.NDArray[np.int64] | None = None,
    content_type: npt.NDArray[np.uint8] | None = None,
    priority: npt.NDArray[Any] | None = None,
    pinned: npt.NDArray[np.uint8] | None = None,
    reference_count: npt.NDArray[np.int64] | None = None,
    embedding: npt.NDArray[Any] | None = None,
    task_embedding: npt.NDArray[Any] | None = None,
    threads: int | None = None,
    out: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Scores over normalized columns; use ``ctxwindow.scoring.score``."""

def select_columns(
    scores: npt.NDArray[np.float64],
    tokens: npt.NDArray[np.int64] | None = None,
    pinned: npt.NDArray[np.uint8] | None = None,
    content_type: npt.NDArray[np.uint8] | None = None,
    *,
    target_free_tokens: int | None = None,
    ratio: float | None = None,
    min_keep: int = 0,
) -> npt.NDArray[np.int64]:
    """Eviction indices over normalized columns; use ``ctxwindow.scoring.select_evictions``."""

def order_keys(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.uint64]:
    """Order-preserving 64-bit keys of float64 scores (-0.0 and 0.0 one key)."""

def key_histogram(
    keys: npt.NDArray[np.uint64],
    mask: npt.NDArray[np.uint8] | None,
    tokens: npt.NDArray[np.int64] | None,
    level: int,
    prefix: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | None]:
    """Counts (and token sums) of the keys under ``prefix`` by their next 16 bits."""

@final
class Bm25Index:
    """An append-only Okapi BM25 index of short texts (recall's lexical index)."""

    def __new__(cls) -> Bm25Index: ...
    def add(self, text: str) -> int: ...
    def truncate(self, documents: int) -> None: ...
    def search(self, query: str, limit: int) -> list[tuple[int, float, float]]:
        """``(document, score, coverage)`` of the best documents, best first (ties: newer
        first); coverage: the idf-weighted share of the query's distinct terms it contains."""
    @staticmethod
    def terms(text: str, stem: bool | None = None) -> list[str]:
        """The index terms of ``text``: lowercased words without function words and single
        letters, plurals stemmed unless ``stem=False`` (None: stemmed)."""
    def __len__(self) -> int: ...
