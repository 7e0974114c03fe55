"""Batch retention scoring and eviction selection over columns.

Score millions of stored context or memory items in one call: the columns are numpy arrays (or
lists, pandas Series, pyarrow arrays, or the columns of a pandas DataFrame / pyarrow Table passed
as ``data``), read without a copy when they are contiguous and of the native dtype (int64 for
turns and counts, uint8 for ``content_type``, bool for ``pinned``, float32/float64 for
``priority`` and embeddings; a bool column is read as its bytes, any non-zero byte true, so a
uint8 array viewed as bool is well defined). The kernel makes one fused pass per item in Rust,
spread over the cores with the GIL released; results do not depend on the number of threads.

Arrays written during a call: the columns are read in place, without a lock, while the GIL is
released, so another thread may write them meanwhile (numpy itself releases the GIL while it
copies). That is a data race, which the Rust and C memory models leave undefined; what the code
ensures (every read is a plain aligned load of a type valid for any bit pattern,
every index is bounds-checked) is that the call does not crash: each item's score is computed
from the value it read, old or new, and a value made invalid during the call is either
reported (a negative count, a non-finite embedding) or clamped (a content type code above 5 scores
as 5). Which items see the new values is unspecified; score a copy if the arrays may change.

>>> import numpy as np
>>> from ctxwindow.scoring import score, select_evictions
>>> scores = score("retention", current_turn=10,
...                last_access_turn=np.array([10, 2, 9]), access_count=np.array([5, 0, 1]))
>>> select_evictions(scores, ratio=0.33).tolist()
[1]

Policies (higher score = keep; pinned items and system prompts score ``+inf``):

- ``retention``: ``recency_weight * exp(-age / max(max_age_turns, 1)) + frequency_weight *
  min(ln(access_count + 1) / ln 5, 1)``, ``age = max(current_turn - last_access_turn, 0)``
  [recency_weight 0.7, frequency_weight 0.3, max_age_turns 30].
- ``fifo``: ``exp(-(current_turn - created_turn) / half_life)`` [half_life 10].
- ``lru``: ``exp(-(current_turn - last_access_turn) / half_life)`` [half_life 5]; items never
  referenced (``reference_count == 0``, when that column is given) score ``unreferenced_score``
  [0.3].
- ``priority``: weighted sum [recency 0.30, semantic 0.25, source 0.20, reuse 0.15, explicit
  0.10] of recency ``exp(-age / recency_turns)`` [15], semantic ``max(cosine(embedding,
  task_embedding), 0)`` (``no_embedding_semantic`` [0.5] without embeddings), source prestige by
  content type [user 1.0, tool_definition 0.9, memory 0.7, assistant 0.5, tool_result 0.3, system
  1.0] (``unknown_source`` [0.5] without that column), reuse ``min(reference_count /
  reuse_saturation, 1)`` [5], explicit 1 if pinned, else the ``priority`` column clamped to [0, 1],
  else 0.
- ``type_ttl``: ``max(1 - age / ttl[type], 0)`` with ``age = max(current_turn - created_turn,
  0)`` [ttl: tool_result 8, memory_injection 20, assistant_response 30, others 50].
- ``hybrid``: weighted sum [fifo 0.15, lru 0.15, priority 0.40, type_ttl 0.30] of the four, each
  with its own parameters under ``params["fifo"]`` etc.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

import ctxwindow._native as _native
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "ContentType",
    "POLICIES",
    "score",
    "select_evictions",
    "should_evict",
    "summarize_for_eviction",
    "format_eviction_summary",
]

POLICIES = ("retention", "fifo", "lru", "priority", "type_ttl", "hybrid")


class ContentType(IntEnum):
    """Codes of the ``content_type`` column."""

    SYSTEM_PROMPT = 0
    TOOL_DEFINITION = 1
    USER_MESSAGE = 2
    ASSISTANT_RESPONSE = 3
    TOOL_RESULT = 4
    MEMORY_INJECTION = 5


_TYPE_ALIASES = {
    "system_prompt": 0, "system": 0,
    "tool_definition": 1,
    "user_message": 2, "user": 2,
    "assistant_response": 3, "assistant": 3,
    "tool_result": 4,
    "memory_injection": 5, "memory": 5,
}
_PRIORITY_TERMS = ("recency", "semantic", "source", "reuse", "explicit")
_HYBRID_TERMS = ("fifo", "lru", "priority", "type_ttl")
_DEFAULT_PRESTIGE = [1.0, 0.9, 1.0, 0.5, 0.3, 0.7]
_DEFAULT_TTL = [50.0, 50.0, 50.0, 30.0, 8.0, 20.0]
_SCALAR_KEYS = {
    "retention": ("max_age_turns", "recency_weight", "frequency_weight"),
    "fifo": ("half_life",),
    "lru": ("half_life", "unreferenced_score"),
    "priority": ("recency_turns", "unknown_source", "reuse_saturation", "no_embedding_semantic"),
    "type_ttl": (),
}
_TABLE_KEYS = {"priority": ("weights", "source_prestige"), "type_ttl": ("ttl",)}

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


# --- params -------------------------------------------------------------------------------


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"parameter {where} must be a number, not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidArgumentError(f"parameter {where} must be finite, got {number}")
    return number


def _type_code(key: object, where: str) -> int:
    if isinstance(key, str) and key in _TYPE_ALIASES:
        return _TYPE_ALIASES[key]
    if isinstance(key, int) and not isinstance(key, bool) and 0 <= key <= 5:
        return int(key)
    raise InvalidArgumentError(
        f"{where} keys must be content types ({', '.join(t.name.lower() for t in ContentType)}"
        f" or codes 0-5), got {key!r}"
    )


def _by_type(value: object, defaults: list[float], where: str) -> list[float]:
    """Per-type values from a mapping (type name or code -> number; "others" sets the rest) or a
    sequence of six numbers."""
    if isinstance(value, Mapping):
        table = list(defaults)
        others = value.get("others")
        if others is not None:
            table = [_number(others, f"{where}.others")] * 6
        for key, item in value.items():
            if key != "others":
                table[_type_code(key, where)] = _number(item, f"{where}[{key!r}]")
        return table
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 6:
        return [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise InvalidTypeError(f"parameter {where} must map content types to numbers")


def _weights(value: object, terms: tuple[str, ...], defaults: list[float], where: str) -> list[float]:
    if isinstance(value, Mapping):
        unknown = set(value) - set(terms)
        if unknown:
            raise InvalidArgumentError(
                f"unknown {where} {sorted(map(str, unknown))}; known: {', '.join(terms)}"
            )
        return [_number(value.get(t, d), f"{where}[{t!r}]") for t, d in zip(terms, defaults)]
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == len(terms):
        return [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise InvalidTypeError(f"parameter {where} must map {', '.join(terms)} to numbers")


def _policy_params(policy: str, params: Mapping[str, Any], where: str) -> dict[str, Any]:
    allowed = _SCALAR_KEYS[policy] + _TABLE_KEYS.get(policy, ())
    unknown = set(params) - set(allowed)
    if unknown:
        raise InvalidArgumentError(
            f"unknown {where}parameters {sorted(map(str, unknown))} for policy {policy!r}; "
            f"known: {', '.join(allowed) or 'none'}"
        )
    out: dict[str, Any] = {k: _number(params[k], where + k) for k in _SCALAR_KEYS[policy] if k in params}
    if policy == "priority":
        if "weights" in params:
            out["weights"] = _weights(params["weights"], _PRIORITY_TERMS,
                                      [0.30, 0.25, 0.20, 0.15, 0.10], where + "weights")
        if "source_prestige" in params:
            out["source_prestige"] = _by_type(params["source_prestige"], _DEFAULT_PRESTIGE,
                                              where + "source_prestige")
    if policy == "type_ttl" and "ttl" in params:
        out["ttl"] = _by_type(params["ttl"], _DEFAULT_TTL, where + "ttl")
    return out


def _canonical_params(policy: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise InvalidTypeError(f"params must be a dict, not {type(params).__name__}")
    if policy != "hybrid":
        return _policy_params(policy, params, "")
    unknown = set(params) - {"weights", *_HYBRID_TERMS}
    if unknown:
        raise InvalidArgumentError(
            f"unknown parameters {sorted(map(str, unknown))} for policy 'hybrid'; "
            f"known: weights, {', '.join(_HYBRID_TERMS)}"
        )
    out: dict[str, Any] = {}
    if "weights" in params:
        out["weights"] = _weights(params["weights"], _HYBRID_TERMS, [0.15, 0.15, 0.40, 0.30], "weights")
    for term in _HYBRID_TERMS:
        if term in params:
            sub = params[term]
            if not isinstance(sub, Mapping):
                raise InvalidTypeError(f"parameter {term} of policy 'hybrid' must be a dict")
            out[term] = _policy_params(term, sub, f"{term}.")
    return out


# --- columns ------------------------------------------------------------------------------


def _from_data(data: Any, name: str) -> Any:
    if data is None:
        return None
    if isinstance(data, Mapping):
        return data.get(name)
    columns = getattr(data, "columns", None)  # pandas DataFrame
    if columns is not None and name in list(columns):
        return data[name]
    names = getattr(data, "column_names", None)  # pyarrow Table
    if names is not None and name in names:
        return data.column(name)
    return None


def _asarray(value: Any, name: str) -> npt.NDArray[Any]:
    """``np.asarray(value)``, or the typed error naming the column when numpy cannot read it
    (a ragged list, mixed rows)."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise InvalidTypeError(f"{name} must be an array of numbers, not {type(value).__name__} "
                               f"numpy cannot read: {error}") from None


def _array(value: Any, name: str) -> npt.NDArray[Any]:
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):
        try:
            value = value.to_numpy()
        except TypeError:
            value = value.to_numpy(zero_copy_only=False)
    array = _asarray(value, f"column {name}")
    if array.ndim != 1:
        raise InvalidArgumentError(f"column {name} must be 1-d, got shape {array.shape}")
    return array


def _int_column(value: Any, name: str) -> IntArray | None:
    if value is None:
        return None
    array = _array(value, name)
    if array.size == 0:
        return np.empty(0, dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise InvalidTypeError(
            f"column {name} must have an integer dtype (int64 is read without a copy), "
            f"got {array.dtype}"
        )
    if array.dtype == np.uint64 and array.max() > np.iinfo(np.int64).max:
        raise InvalidArgumentError(f"column {name} has values above 2**63 - 1")
    return np.ascontiguousarray(array, dtype=np.int64)


def _content_type_column(value: Any) -> npt.NDArray[np.uint8] | None:
    if value is None:
        return None
    array = _array(value, "content_type")
    if array.size == 0:
        return np.empty(0, dtype=np.uint8)
    if array.dtype.kind not in "iu":
        raise InvalidTypeError(
            f"column content_type must have an integer dtype (uint8 codes 0-5 are read without "
            f"a copy), got {array.dtype}"
        )
    if array.dtype != np.uint8:
        bad = np.flatnonzero((array < 0) | (array > 5))
        if bad.size:
            raise InvalidArgumentError(
                f"column content_type must hold codes 0..=5, got {array[bad[0]]} at index {bad[0]}"
            )
    return np.ascontiguousarray(array, dtype=np.uint8)


def _bool_column(value: Any, name: str) -> npt.NDArray[np.uint8] | None:
    """A bool column as the bytes the native code reads (any non-zero byte is true): a bool array
    is viewed as uint8 without a copy, so a bool array whose bytes are not 0/1 (a uint8 array
    viewed as bool) is read as defined bytes rather than as invalid bools."""
    if value is None:
        return None
    array = _array(value, name)
    if array.size == 0:
        return np.empty(0, dtype=np.uint8)
    if array.dtype.kind == "b":
        return np.ascontiguousarray(array).view(np.uint8)
    if array.dtype.kind in "iu" and bool(np.isin(array, (0, 1)).all()):
        return np.ascontiguousarray(array, dtype=np.uint8)
    raise InvalidTypeError(f"column {name} must have a bool dtype (or 0/1 integers), got {array.dtype}")


def _float_array(value: Any, name: str, ndim: int) -> npt.NDArray[Any] | None:
    if value is None:
        return None
    array = value if isinstance(value, np.ndarray) else _asarray(
        value.to_numpy() if hasattr(value, "to_numpy") else value, name
    )
    if array.size == 0 and ndim == 1:
        return np.empty(0, dtype=np.float64)
    if array.ndim != ndim:
        raise InvalidArgumentError(f"{name} must be {ndim}-d, got shape {array.shape}")
    if array.dtype.kind in "iu":
        array = array.astype(np.float64)
    elif array.dtype not in (np.float32, np.float64):
        raise InvalidTypeError(f"{name} must have a float32 or float64 dtype, got {array.dtype}")
    # Finiteness is checked natively (for embeddings, in the same pass that scores them).
    return np.ascontiguousarray(array)


def _threads(threads: int | None) -> int | None:
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise InvalidTypeError(f"threads must be an int, not {type(threads).__name__}")
    if threads < 1:
        raise InvalidArgumentError(f"threads must be >= 1, got {threads}")
    return threads


# --- public API ---------------------------------------------------------------------------


def score(
    policy: str,
    *,
    current_turn: int,
    tokens: Any = None,
    created_turn: Any = None,
    last_access_turn: Any = None,
    access_count: Any = None,
    content_type: Any = None,
    priority: Any = None,
    pinned: Any = None,
    reference_count: Any = None,
    embedding: Any = None,
    task_embedding: Any = None,
    params: Mapping[str, Any] | None = None,
    data: Any = None,
    threads: int | None = None,
    out: FloatArray | None = None,
) -> FloatArray:
    """Scores of every item under ``policy`` (float64, higher = keep; see the module doc for the
    formulas and defaults).

    Columns not given are looked up by name in ``data`` (a dict, pandas DataFrame or pyarrow
    Table). ``threads`` caps the threads used (default: all cores for large inputs); results are
    bitwise identical whatever it is. ``out``, a writable C-contiguous float64 array of one value
    per item, receives the scores (and is returned) instead of a new array: a batch job scoring
    again and again reuses one buffer. ``params`` overrides defaults, e.g. ``{"max_age_turns":
    60}`` for retention, ``{"half_life": 20}`` for fifo, ``{"weights": {"priority": 0.5, ...},
    "fifo": {"half_life": 20}}`` for hybrid, ``{"ttl": {"tool_result": 4}}`` for type_ttl.

    Raises ``InvalidArgumentError`` for an unknown policy, columns of different lengths, a column
    the policy needs but missing, negative tokens or counts, content types outside 0-5, NaN or
    infinite floats, an embedding whose width differs from the task embedding; and
    ``InvalidTypeError`` for a column of the wrong dtype (the message names the column and the
    dtype expected). Zero items give an empty array.
    """
    if not isinstance(policy, str):
        raise InvalidTypeError(f"policy must be a str, not {type(policy).__name__}")
    if policy not in POLICIES:
        raise InvalidArgumentError(f"unknown policy {policy!r}; known policies: {', '.join(POLICIES)}")
    if isinstance(current_turn, bool) or not isinstance(current_turn, numbers.Integral):
        raise InvalidTypeError(f"current_turn must be an int, not {type(current_turn).__name__}")
    canonical = _canonical_params(policy, params)

    def pick(value: Any, name: str) -> Any:
        return value if value is not None else _from_data(data, name)

    embedding_array = _float_array(pick(embedding, "embedding"), "embedding", 2)
    task_array = _float_array(task_embedding, "task_embedding", 1)
    if embedding_array is not None and task_array is not None and embedding_array.shape[1] != task_array.shape[0]:
        raise InvalidArgumentError(
            f"embedding has dimension {embedding_array.shape[1]} but task_embedding has "
            f"{task_array.shape[0]}"
        )
    return _native.score_columns(
        policy,
        int(current_turn),
        canonical,
        tokens=_int_column(pick(tokens, "tokens"), "tokens"),
        created_turn=_int_column(pick(created_turn, "created_turn"), "created_turn"),
        last_access_turn=_int_column(pick(last_access_turn, "last_access_turn"), "last_access_turn"),
        access_count=_int_column(pick(access_count, "access_count"), "access_count"),
        content_type=_content_type_column(pick(content_type, "content_type")),
        priority=_float_array(pick(priority, "priority"), "column priority", 1),
        pinned=_bool_column(pick(pinned, "pinned"), "pinned"),
        reference_count=_int_column(pick(reference_count, "reference_count"), "reference_count"),
        embedding=embedding_array,
        task_embedding=task_array,
        threads=_threads(threads),
        out=_out_array(out),
    )


def _out_array(out: Any) -> FloatArray | None:
    if out is None:
        return None
    if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.ndim != 1:
        raise InvalidTypeError("out must be a 1-d float64 numpy array")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise InvalidArgumentError("out must be C-contiguous and writable")
    return out


def select_evictions(
    scores: Any,
    tokens: Any = None,
    *,
    pinned: Any = None,
    content_type: Any = None,
    target_free_tokens: int | None = None,
    ratio: float | None = None,
    min_keep: int = 0,
) -> IntArray:
    """Indices (int64) of the items to evict, in eviction order: lowest score first, ties by
    original index. Pinned items, system prompts (content type 0) and items scored ``+inf`` are
    never selected.

    Give exactly one stop rule:

    - ``target_free_tokens``: select until the freed ``tokens`` reach the target, or every
      evictable item is selected;
    - ``ratio``: ``evict_count = min(ceil(n * ratio), max(n - min_keep, 0))`` over the ranks of
      all items; an item that may not be evicted but falls inside those ranks lowers the count.

    At most ``n - min_keep`` items are selected in either mode. Zero items give an empty array.
    """
    score_array = _array(scores, "scores")
    if score_array.size and score_array.dtype.kind not in "fiu":
        raise InvalidTypeError(f"scores must have a float dtype (float64 is read without a copy), got {score_array.dtype}")
    score_array = np.ascontiguousarray(score_array, dtype=np.float64)
    if (target_free_tokens is None) == (ratio is None):
        raise InvalidArgumentError("give exactly one of target_free_tokens and ratio")
    if target_free_tokens is not None:
        if isinstance(target_free_tokens, bool) or not isinstance(target_free_tokens, numbers.Integral):
            raise InvalidTypeError(
                f"target_free_tokens must be an int, not {type(target_free_tokens).__name__}"
            )
        if target_free_tokens < 0:
            raise InvalidArgumentError(f"target_free_tokens must be >= 0, got {target_free_tokens}")
        if tokens is None:
            raise InvalidArgumentError("target_free_tokens needs the tokens column")
    if ratio is not None:
        if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real):
            raise InvalidTypeError(f"ratio must be a number, not {type(ratio).__name__}")
        if not 0.0 <= float(ratio) <= 1.0:
            raise InvalidArgumentError(f"ratio must be in [0, 1], got {ratio}")
    if isinstance(min_keep, bool) or not isinstance(min_keep, numbers.Integral):
        raise InvalidTypeError(f"min_keep must be an int, not {type(min_keep).__name__}")
    if min_keep < 0:
        raise InvalidArgumentError(f"min_keep must be >= 0, got {min_keep}")
    return _native.select_columns(
        score_array,
        _int_column(tokens, "tokens"),
        _bool_column(pinned, "pinned"),
        _content_type_column(content_type),
        target_free_tokens=None if target_free_tokens is None else int(target_free_tokens),
        ratio=None if ratio is None else float(ratio),
        min_keep=int(min_keep),
    )


def should_evict(total_tokens: int, budget_ceiling: int, warning_threshold: float) -> bool:
    """Whether usage has reached the warning threshold of the ceiling: False when
    ``budget_ceiling == 0``, else ``total_tokens / budget_ceiling >= warning_threshold``."""
    if budget_ceiling == 0:
        return False
    return total_tokens / budget_ceiling >= warning_threshold


def _line_count(content: str) -> int:
    """Lines as a line iterator sees them: a final newline does not start another line."""
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def summarize_for_eviction(content: str) -> str:
    """A one-line stand-in for evicted content:
    ``"[evicted: {lines} lines, {chars} chars] {first line}"``, the first line cut to 77
    characters + ``"..."`` when longer than 80 (cut between characters, never inside one)."""
    first = content.split("\n", 1)[0].removesuffix("\r")
    if len(first) > 80:
        first = first[:77] + "..."
    return f"[evicted: {_line_count(content)} lines, {len(content)} chars] {first}"


def format_eviction_summary(evicted: Sequence[tuple[str, str, int]]) -> str:
    """A compaction notice: a ``"[compact: N items evicted]"`` header, one ``"  {id} — {summary}"``
    line per item and ``"  ({sum} tokens freed)"``; ``""`` when nothing was evicted."""
    if not evicted:
        return ""
    lines = [f"[compact: {len(evicted)} items evicted]"]
    lines += [f"  {item_id} — {summary}" for item_id, summary, _ in evicted]
    lines.append(f"  ({sum(tokens for _, _, tokens in evicted)} tokens freed)")
    return "\n".join(lines)
