"""Batch retention scoring and exact eviction selection over a Dask DataFrame (extra
``ctxwindow[dask]``).

:func:`score` runs the native kernel of :func:`ctxwindow.scoring.score` on every partition's
columns (read without a copy when they are numpy-backed and of the native dtype; one thread per
task, the GIL released; no Python object per item) and returns a lazy float64 Series with the
frame's index. :func:`select_evictions` returns a boolean Series, ``True`` for the items that
:func:`ctxwindow.scoring.select_evictions` selects on the same data collected on one machine,
computed without collecting the store: the scores' order-preserving 64-bit keys are persisted on
the workers, per-partition histograms of 16 key bits at a time (summed in a tree on the cluster)
find the histogram bin that holds the global boundary, and once that bin holds at most 2^22 items
they are sorted on the client by (key, global position) to place the boundary exactly; if a bin
that small is never reached, the histograms narrow the boundary down to one key and a pass over
the items at that key breaks ties by global position (the row order of the frame). The eviction
order is by score, then position, so the selected rows sorted that way are the local result.

Passes over the persisted keys (the keys and histograms in native code, one pass each, no
temporaries): one for the partition lengths and input checks and the first histogram, in one
round of tasks; one histogram pass per further 16 bits needed (none at typical sizes, at most
three), one for the boundary bin's items or the ties at the boundary key, and the lazy marking
pass. Memory per worker: 17 bytes per item of its own partitions plus 1 MB per histogram task;
the client holds at most 2^22 candidates. A token target needs the store's tokens to sum below
2^63 - 1 (else a typed error).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import ctxwindow._native as _native
import ctxwindow.scoring as scoring
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError, MissingDependencyError

__all__ = ["SCORE_COLUMNS", "score", "select_evictions"]

#: Our names of the columns :func:`score` reads (``columns`` maps them to the frame's).
SCORE_COLUMNS = (
    "tokens",
    "created_turn",
    "last_access_turn",
    "access_count",
    "content_type",
    "priority",
    "pinned",
    "reference_count",
)

_BITS = 16
_FAN_IN = 8
# A boundary bin of at most this many items is sorted on the client instead of refined further.
_CANDIDATES = 1 << 22
_INT64_MAX = (1 << 63) - 1
# Keys of the ordered float64 bits: below -inf's key or above +inf's key is NaN.
_KEY_NEG_INF = 0x000F_FFFF_FFFF_FFFF
_KEY_POS_INF = 0xFFF0_0000_0000_0000


def _require() -> tuple[Any, Any, Any]:
    try:
        import dask
        import dask.dataframe as dd
        import pandas as pd  # type: ignore[import-untyped]
    except ImportError as error:
        raise MissingDependencyError(
            f"ctxwindow.dask needs dask[dataframe], distributed and pyarrow ({error.name} is missing): "
            "pip install 'ctxwindow[dask]'"
        ) from error
    return dask, dd, pd


def _pandas() -> Any:
    return _require()[2]


def _is_collection(value: Any, kind: str) -> bool:
    return type(value).__name__ == kind and hasattr(value, "npartitions")


# --- score ----------------------------------------------------------------------------------


def _column_map(frame_columns: Sequence[str], columns: Mapping[str, str] | None) -> dict[str, str]:
    if columns is None:
        return {name: name for name in SCORE_COLUMNS if name in frame_columns}
    if not isinstance(columns, Mapping):
        raise InvalidTypeError(f"columns must be a dict, not {type(columns).__name__}")
    unknown = sorted(str(k) for k in columns if k not in SCORE_COLUMNS)
    if unknown:
        raise InvalidArgumentError(f"unknown columns {unknown}; known: {', '.join(SCORE_COLUMNS)}")
    mapping = {name: name for name in SCORE_COLUMNS if name in frame_columns}
    for ours, theirs in columns.items():
        if not isinstance(theirs, str):
            raise InvalidTypeError(f"columns[{ours!r}] must be a column name, not {type(theirs).__name__}")
        if theirs not in frame_columns:
            raise InvalidArgumentError(f"column {theirs!r} (for {ours}) is not in the frame")
        mapping[ours] = theirs
    return mapping


def _aligned(column: Any) -> Any:
    """The column's values, copied only when the transport left them misaligned for their dtype
    (columns deserialized on a worker can start at any byte)."""
    values = column.to_numpy() if hasattr(column, "to_numpy") else np.asarray(column)
    if values.dtype.kind in "iufb" and not values.flags.aligned:
        return np.require(values, requirements=["C", "A"])
    return values


def _score_frame(part: Any, policy: str, current_turn: int, params: Any, mapping: dict[str, str]) -> Any:
    pd = _pandas()

    data = {ours: _aligned(part[theirs]) for ours, theirs in mapping.items()}
    values = scoring.score(policy, current_turn=current_turn, params=params, data=data, threads=1)
    return pd.Series(values, index=part.index, name="score", copy=False)  # no copy of the scores


def score(
    ddf: Any,
    policy: str,
    *,
    current_turn: int,
    params: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
) -> Any:
    """Scores of every row of the Dask DataFrame ``ddf`` under ``policy``: a lazy float64 Series
    named ``score`` with ``ddf``'s index and partitions, equal bit for bit to
    :func:`ctxwindow.scoring.score` on the collected frame.

    The columns are looked up by the names in :data:`SCORE_COLUMNS`; ``columns`` maps our names
    to the frame's (``{"tokens": "n_tokens"}``). Embeddings are not read here (``priority`` uses
    ``no_embedding_semantic``). The policy, parameters, dtypes and columns the policy needs are
    checked now, with the typed errors of the local function; values (negative counts, content
    types outside 0-5) when the partitions are computed.
    """
    _, _, pd = _require()
    if not _is_collection(ddf, "DataFrame"):
        raise InvalidTypeError(f"ddf must be a dask DataFrame, not {type(ddf).__name__}")
    mapping = _column_map(list(ddf.columns), columns)
    sample = ddf._meta_nonempty
    # Same checks and errors as the local call, on a two-row sample of the frame's dtypes.
    scoring.score(policy, current_turn=current_turn, params=params,
                  data={ours: sample[theirs] for ours, theirs in mapping.items()})
    meta = pd.Series(np.empty(0, dtype=np.float64), name="score", index=ddf._meta.index)
    return ddf.map_partitions(_score_frame, policy, int(current_turn), params, mapping, meta=meta,
                              enforce_metadata=False)


# --- select_evictions ---------------------------------------------------------------------


def _keys(values: npt.NDArray[np.float64]) -> npt.NDArray[np.uint64]:
    """Order-preserving integer keys of float64 scores (-0.0 maps to the key of 0.0), the keys
    the local selection orders by, in one native pass."""
    return _native.order_keys(np.require(values, np.float64, ["C", "A"]))


def _prepare(part: Any, scores: Any, tokens: str | None, pinned: str | None, content_type: str | None) -> Any:
    pd = _pandas()

    values = np.ascontiguousarray(scoring._array(scores, "scores"), dtype=np.float64)
    if len(values) != len(part):
        raise InvalidArgumentError(
            f"scores has {len(values)} values in a partition where the frame has {len(part)} rows"
        )
    evictable = values != np.inf
    if pinned is not None:
        column = scoring._bool_column(part[pinned], "pinned")
        assert column is not None
        evictable &= column == 0  # any non-zero byte is pinned
    if content_type is not None:
        codes = scoring._content_type_column(part[content_type])
        assert codes is not None
        evictable &= codes != scoring.ContentType.SYSTEM_PROMPT
    out = {"key": _keys(values), "evictable": evictable}
    if tokens is not None:
        out["tokens"] = scoring._int_column(part[tokens], "tokens")
    return pd.DataFrame(out, index=part.index, copy=False)


def _stats(part: Any) -> tuple[int, int, int, int]:
    """Rows, first NaN score (-1 if none), first negative token count and its value."""
    keys = part["key"].to_numpy()
    nan = np.flatnonzero((keys < np.uint64(_KEY_NEG_INF)) | (keys > np.uint64(_KEY_POS_INF)))
    negative, value = -1, 0
    if "tokens" in part.columns:
        tokens = part["tokens"].to_numpy()
        bad = np.flatnonzero(tokens < 0)
        if bad.size:
            negative, value = int(bad[0]), int(tokens[bad[0]])
    return len(keys), int(nan[0]) if nan.size else -1, negative, value


def _native_array(column: Any, dtype: Any) -> Any:
    """A column as the native code reads it: contiguous and aligned (copied only if not)."""
    return np.require(column.to_numpy(), dtype, ["C", "A"])


def _histogram(part: Any, level: int, prefix: int, by_tokens: bool) -> tuple[Any, Any]:
    """Counts (and token sums) of the keys under ``prefix`` by their next 16 bits (evictable
    items only when selecting by tokens), in one native pass without temporaries."""
    keys = _native_array(part["key"], np.uint64)
    mask = _native_array(part["evictable"], np.bool_).view(np.uint8) if by_tokens else None
    tokens = _native_array(part["tokens"], np.int64) if by_tokens else None
    return _native.key_histogram(keys, mask, tokens, level, prefix)


def _candidates(part: Any, level: int, prefix: int, by_tokens: bool) -> tuple[Any, Any, Any]:
    """The keys under ``prefix``, their positions in the partition and their tokens."""
    keys = part["key"].to_numpy()
    mask = keys >> np.uint64(64 - _BITS * level) == np.uint64(prefix)
    if by_tokens:
        mask &= part["evictable"].to_numpy()
    where = np.flatnonzero(mask)
    return keys[where], where, (part["tokens"].to_numpy()[where] if by_tokens else None)


def _mark_cut(part: Any, key: int, last: int, offsets: list[int],
              partition_info: dict[str, Any] | None = None) -> Any:
    """Evictable items before (key, last) in (key, global position) order, that one included."""
    pd = _pandas()
    keys = part["key"].to_numpy()
    chosen = keys < np.uint64(key)
    offset = offsets[partition_info["number"]] if partition_info is not None else 0
    if offset <= last < offset + len(keys):
        chosen[: last - offset + 1] |= keys[: last - offset + 1] == np.uint64(key)
    elif last >= offset + len(keys):
        chosen |= keys == np.uint64(key)
    return pd.Series(chosen & part["evictable"].to_numpy(), index=part.index, name="evict")


def _add(*parts: tuple[Any, Any]) -> tuple[Any, Any]:
    counts = np.sum([c for c, _ in parts], axis=0)
    if parts[0][1] is None:
        return counts, None
    sums = parts[0][1].copy()
    for _, more in parts[1:]:
        total = sums + more
        total[total < sums] = _INT64_MAX  # saturates: a sum never wraps to a small one
        sums = total
    return counts, sums


def _ties(part: Any, key: int, by_tokens: bool) -> tuple[int, int]:
    """Items at exactly ``key`` (evictable only when selecting by tokens) and their tokens."""
    keys = part["key"].to_numpy()
    mask = keys == np.uint64(key)
    if by_tokens:
        mask &= part["evictable"].to_numpy()
        return int(mask.sum()), int(part["tokens"].to_numpy()[mask].sum())
    return int(mask.sum()), 0


def _mark(part: Any, below: int | None, key: int | None, quotas: list[tuple[int, int]],
          by_tokens: bool, partition_info: dict[str, Any] | None = None) -> Any:
    pd = _pandas()

    keys = part["key"].to_numpy()
    evictable = part["evictable"].to_numpy()
    chosen = evictable.copy() if below is None else evictable & (keys < np.uint64(below))
    if key is not None and partition_info is not None:
        count, budget = quotas[partition_info["number"]]
        tied = keys == np.uint64(key)
        if by_tokens:
            tied &= evictable
        where = np.flatnonzero(tied)[:count]
        if by_tokens and where.size:
            before = np.cumsum(part["tokens"].to_numpy()[where]) - part["tokens"].to_numpy()[where]
            where = where[before < budget]
        chosen[where] = evictable[where]
    return pd.Series(chosen, index=part.index, name="evict")


def _sum_tree(dask: Any, parts: list[Any]) -> Any:
    """The histograms ``parts`` summed in a tree of fan-in ``_FAN_IN`` on the cluster."""
    while len(parts) > 1:
        parts = [dask.delayed(_add)(*parts[i:i + _FAN_IN]) for i in range(0, len(parts), _FAN_IN)]
    return parts[0]


def _compute_sum(dask: Any, parts: list[Any]) -> tuple[Any, Any]:
    (total,) = dask.compute(_sum_tree(dask, parts))
    return total  # type: ignore[no-any-return]


def _first_histogram(part: Any, stats: tuple[int, int, int, int], by_tokens: bool) -> tuple[Any, Any]:
    """The level-0 histogram, computed in the same round as the checks: empty when they failed
    (the caller reports the failure with its global position)."""
    if stats[1] >= 0 or stats[2] >= 0:
        empty = np.zeros(1 << _BITS, dtype=np.int64)
        return empty, (empty if by_tokens else None)
    return _histogram(part, 0, 0, by_tokens)


def _column_name(frame_columns: Sequence[str], value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be a column name, not {type(value).__name__}")
    if value not in frame_columns:
        raise InvalidArgumentError(f"column {value!r} ({name}) is not in the frame")
    return value


def select_evictions(
    ddf: Any,
    scores: Any,
    *,
    tokens: str | None = "tokens",
    pinned: str | None = None,
    content_type: str | None = None,
    target_free_tokens: int | None = None,
    ratio: float | None = None,
    min_keep: int = 0,
) -> Any:
    """The items :func:`ctxwindow.scoring.select_evictions` would evict from the collected frame:
    a lazy boolean Series named ``evict`` with ``ddf``'s index and partitions.

    ``scores`` is a dask Series partitioned like ``ddf`` (as :func:`score` returns). ``tokens``,
    ``pinned`` and ``content_type`` name ``ddf``'s columns (``tokens`` is read when the frame has
    it; the other two only when named). Stop rules as locally: ``target_free_tokens`` (lowest
    score first, ties by row position, until the freed tokens reach the target) or ``ratio`` (the
    ``min(ceil(n * ratio), max(n - min_keep, 0))`` lowest ranks of all rows, then without the
    rows that may not be evicted); pinned rows, system prompts and scores of ``+inf`` are never
    selected; at most ``n - min_keep`` rows are. The global boundary is computed now (a few
    passes over keys persisted on the workers); the returned Series marks the rows lazily.

    Raises the local function's typed errors: ``InvalidArgumentError`` for both or neither stop
    rule, a ratio outside [0, 1], a token target without a tokens column, NaN scores or negative
    tokens (with the row's global position), a column not in the frame, scores partitioned
    differently; ``InvalidTypeError`` for a column or argument of the wrong type.
    """
    dask, dd, _ = _require()
    if not _is_collection(ddf, "DataFrame"):
        raise InvalidTypeError(f"ddf must be a dask DataFrame, not {type(ddf).__name__}")
    if not _is_collection(scores, "Series"):
        raise InvalidTypeError(f"scores must be a dask Series, not {type(scores).__name__}")
    frame_columns = list(ddf.columns)
    if tokens is not None and not isinstance(tokens, str):
        raise InvalidTypeError(f"tokens must be a column name, not {type(tokens).__name__}")
    tokens_name = tokens if tokens in frame_columns else None
    pinned_name = _column_name(frame_columns, pinned, "pinned")
    type_name = _column_name(frame_columns, content_type, "content_type")
    sample = ddf._meta_nonempty
    sample_scores = scores._meta_nonempty
    rows = min(len(sample), len(sample_scores))
    sample, sample_scores = sample.iloc[:rows], sample_scores.iloc[:rows]
    scoring.select_evictions(  # the local checks of arguments and dtypes, on a sample
        sample_scores,
        None if tokens_name is None else sample[tokens_name],
        pinned=None if pinned_name is None else sample[pinned_name],
        content_type=None if type_name is None else sample[type_name],
        target_free_tokens=target_free_tokens, ratio=ratio, min_keep=min_keep,
    )
    if scores.npartitions != ddf.npartitions:
        raise InvalidArgumentError(
            f"scores has {scores.npartitions} partitions but the frame has {ddf.npartitions}"
        )
    by_tokens = target_free_tokens is not None
    pd = _pandas()

    meta = pd.DataFrame(
        {"key": np.empty(0, np.uint64), "evictable": np.empty(0, np.bool_),
         **({"tokens": np.empty(0, np.int64)} if tokens_name else {})},
        index=ddf._meta.index,
    )
    # The whole frame, not ddf[used]: dask lays Parquet out in fewer, larger partitions for a
    # projection of its columns, which would pair one frame partition with several of scores.
    keyed = dd.map_partitions(_prepare, ddf, scores, tokens_name, pinned_name, type_name,
                              meta=meta, align_dataframes=False, enforce_metadata=False).persist()
    parts = keyed.to_delayed()
    # One round for the checks and the first histogram (passes over keys on the workers).
    checks = [dask.delayed(_stats)(p) for p in parts]
    first = _sum_tree(dask, [dask.delayed(_first_histogram)(p, c, by_tokens) for p, c in zip(parts, checks)])
    *stats, first_sum = dask.compute(*checks, first)
    offsets = np.concatenate([[0], np.cumsum([s[0] for s in stats])]).tolist()
    n = int(offsets[-1])
    for at, (_, nan, _, _) in enumerate(stats):
        if nan >= 0:
            raise InvalidArgumentError(f"scores must not be NaN (index {offsets[at] + nan})")
    for at, (_, _, negative, value) in enumerate(stats):
        if negative >= 0:
            raise InvalidArgumentError(
                f"column tokens must be >= 0, got {value} at index {offsets[at] + negative}"
            )
    limit = max(n - int(min_keep), 0)
    none = [(0, 0)] * len(parts)

    def marked(below: int | None, key: int | None, quotas: list[tuple[int, int]]) -> Any:
        series_meta = pd.Series(np.empty(0, np.bool_), name="evict", index=ddf._meta.index)
        return keyed.map_partitions(_mark, below, key, quotas, by_tokens, meta=series_meta,
                                    enforce_metadata=False)

    if by_tokens:
        assert target_free_tokens is not None
        target = int(target_free_tokens)
        sums = first_sum[1]
        if int(sums.max(initial=0)) == _INT64_MAX or sum(int(x) for x in sums) >= _INT64_MAX:
            raise InvalidArgumentError(
                "the tokens of the store sum to 2^63 - 1 or more; selection by a token target on "
                "Dask needs a smaller total (select on a part of the store)")
        if target == 0 or limit == 0:
            return marked(0, None, none)
        count_before, tokens_before = 0, 0
    else:
        assert ratio is not None
        wanted = min(math.ceil(n * float(ratio)), limit)
        if wanted == 0:
            return marked(0, None, none)
    prefix = 0
    for level in range(64 // _BITS):
        counts, sums = first_sum if level == 0 else _compute_sum(
            dask, [dask.delayed(_histogram)(p, level, prefix, by_tokens) for p in parts])
        cum_counts = np.cumsum(counts)
        shift = 64 - _BITS * (level + 1)
        if by_tokens:
            cum_tokens = np.cumsum(sums)
            hit = cum_counts >= min(limit - count_before, _INT64_MAX)
            hit |= cum_tokens >= min(target - tokens_before, _INT64_MAX)
            if not hit.any():  # every evictable item is selected (only possible at level 0)
                return marked(None, None, none)
            b = int(np.argmax(hit))
            if b:
                count_before += int(cum_counts[b - 1])
                tokens_before += int(cum_tokens[b - 1])
        else:
            b = int(np.searchsorted(cum_counts, wanted, side="left"))
            if b:
                wanted -= int(cum_counts[b - 1])
            if wanted == int(counts[b]):  # the boundary is the bin's end: no ties to break
                end = ((prefix << _BITS | b) + 1) << shift
                return marked(None if end >= 1 << 64 else end, None, none)
        prefix = prefix << _BITS | b
        if level + 1 < 64 // _BITS and int(counts[b]) <= _CANDIDATES:
            break
    else:
        key = prefix
        ties = dask.compute(*[dask.delayed(_ties)(p, key, by_tokens) for p in parts])
        quotas = []
        for tied, tied_tokens in ties:
            if by_tokens:
                quotas.append((max(min(limit - count_before, tied), 0),
                               max(min(target - tokens_before, _INT64_MAX), 0)))
                count_before += tied
                tokens_before += tied_tokens
            else:
                quotas.append((max(min(wanted, tied), 0), 0))
                wanted -= tied
        return marked(key, key, quotas)
    # Few items left in the boundary bin: sort them by (key, global position) here.
    level += 1
    found = dask.compute(*[dask.delayed(_candidates)(p, level, prefix, by_tokens) for p in parts])
    keys = np.concatenate([np.empty(0, np.uint64), *(k for k, _, _ in found)])
    positions = np.concatenate([np.empty(0, np.int64), *(w + offsets[i] for i, (_, w, _) in enumerate(found))])
    order = np.lexsort((positions, keys))
    if by_tokens:
        tokens_in = np.concatenate([np.empty(0, np.int64), *(t for _, _, t in found)])[order]
        before = np.cumsum(tokens_in) - tokens_in
        taken = int(((before < min(target - tokens_before, _INT64_MAX))
                     & (np.arange(len(order)) < min(limit - count_before, _INT64_MAX))).sum())
    else:
        taken = wanted
    if taken == 0:
        return marked(prefix << (64 - _BITS * level), None, none)
    last = order[taken - 1]
    series_meta = pd.Series(np.empty(0, np.bool_), name="evict", index=ddf._meta.index)
    return keyed.map_partitions(_mark_cut, int(keys[last]), int(positions[last]), offsets,
                                meta=series_meta, enforce_metadata=False)


# --- a batch job: Parquet in, Parquet out ------------------------------------------------------


def _attach(part: Any, scores: Any, evict: Any = None) -> Any:
    out = part.assign(score=scores.to_numpy())
    if evict is not None:
        out["evict"] = evict.to_numpy()
    return out


def _write_part(part: Any, path: str, number: int, width: int) -> int:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    table = pa.Table.from_pandas(part, preserve_index=False)
    pq.write_table(table, f"{path}/part.{number:0{width}d}.parquet")
    return len(part)


def score_parquet(
    items: str,
    out: str,
    *,
    policy: str,
    current_turn: int,
    params: Mapping[str, Any] | None = None,
    target_free_tokens: int | None = None,
    ratio: float | None = None,
    min_keep: int = 0,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Any = None,
) -> dict[str, int]:
    """Score the items of the Parquet file or dataset ``items`` and write them with a float64
    ``score`` column (and, when a stop rule is given, a bool ``evict`` column) as the Parquet
    dataset ``out`` (a directory of one file per partition). The ``pinned`` and ``content_type``
    columns are used by the selection when the items have them.

    Runs on the Dask scheduler at ``scheduler`` (an address such as ``tcp://host:8786``) or, without
    one, on a local cluster of ``workers`` processes (default: one per core). ``progress``, if
    given, is called as ``progress(stage, done, total)`` as partitions finish. Returns the counts
    ``{"items": ..., "evicted": ..., "partitions": ...}``.
    """
    import os
    import time

    dask, dd, _ = _require()
    try:
        from distributed import Client, LocalCluster, wait
    except ImportError as error:
        raise MissingDependencyError(
            "ctxwindow score needs distributed: pip install 'ctxwindow[dask]'"
        ) from error
    import logging

    def report(stage: str, futures: list[Any]) -> None:
        while True:
            done = sum(f.done() for f in futures)
            if progress is not None:
                progress(stage, done, len(futures))
            if done == len(futures):
                break
            time.sleep(0.1)
        wait(futures)

    ddf = dd.read_parquet(items)
    scores = score(ddf, policy, current_turn=current_turn, params=params)
    cluster = None
    if scheduler is None:
        # The scheduler's HTTP server on any free port (None would still take 8787, or warn).
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                               processes=True, dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    try:
        with Client(cluster if cluster is not None else scheduler) as client:
            scores = scores.persist()
            report("scoring", list(client.futures_of(scores)))
            frame = ddf
            selecting = target_free_tokens is not None or ratio is not None
            if selecting:
                if progress is not None:
                    progress("selecting", 0, 1)
                evict = select_evictions(
                    ddf, scores,
                    pinned="pinned" if "pinned" in ddf.columns else None,
                    content_type="content_type" if "content_type" in ddf.columns else None,
                    target_free_tokens=target_free_tokens, ratio=ratio, min_keep=min_keep,
                )
                if progress is not None:
                    progress("selecting", 1, 1)
                frame = dd.map_partitions(_attach, ddf, scores, evict, align_dataframes=False,
                                          enforce_metadata=False,
                                          meta=ddf._meta.assign(score=np.float64(0), evict=False))
            else:
                frame = dd.map_partitions(_attach, ddf, scores, align_dataframes=False,
                                          enforce_metadata=False,
                                          meta=ddf._meta.assign(score=np.float64(0)))
            os.makedirs(out, exist_ok=True)
            parts = frame.to_delayed()
            width = len(str(max(len(parts) - 1, 0)))
            writes = client.compute([dask.delayed(_write_part)(p, out, i, width) for i, p in enumerate(parts)])
            report("writing", writes)
            rows = sum(f.result() for f in writes)
            evicted = 0
            if selecting:
                evicted = int(evict.sum().compute())
    finally:
        if cluster is not None:
            cluster.close()
    return {"items": rows, "evicted": evicted, "partitions": len(parts)}
