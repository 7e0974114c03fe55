"""The batch kernels at scale, against plain references: retention scores bit for bit against
the formula computed one item at a time (the vector path, its scalar steps for ages outside the
decay table, the non-temporal stores of large outputs), and the radix selection against a full
stable sort (many ties, narrow and wide score ranges, pinned items, both stop rules)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ctxwindow.scoring import score, select_evictions

# Scoring writes with non-temporal stores from this many items on (STREAM_MIN_ITEMS in score.rs).
STREAM_MIN_ITEMS = 1 << 20
# Selection splits its passes over threads from this many items on (PARALLEL_MIN_ITEMS in select.rs).
PARALLEL_MIN_ITEMS = 1 << 18


def retention_definition(now: int, last: int, count: int, guarded: bool) -> float:
    if guarded:
        return math.inf
    age = max(now - last, 0)
    return 0.7 * math.exp(-age / 30.0) + 0.3 * min(math.log(max(count, 0) + 1) / math.log(5), 1.0)


def bits(values: np.ndarray) -> list[int]:
    return values.view(np.uint64).tolist()  # type: ignore[no-any-return]


@given(data=st.data(), n=st.integers(0, 300), now=st.integers(-10**6, 10**6))
def test_retention_is_the_formula_bit_for_bit(data: st.DataObject, n: int, now: int) -> None:
    turns = st.one_of(st.integers(now - 80, now + 5), st.integers(now - 50_000, now),
                      st.sampled_from([-2**63, 2**63 - 1, now, now - 64, now - 63]))
    last = np.array(data.draw(st.lists(turns, min_size=n, max_size=n)), dtype=np.int64)
    access = np.array(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), dtype=np.int64)
    pinned = data.draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=n, max_size=n)))
    types = data.draw(st.one_of(st.none(), st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    offset = data.draw(st.integers(0, 3))  # an output buffer at any alignment
    buffer = np.empty(n + offset)
    out = buffer[offset:]
    got = score("retention", current_turn=now, last_access_turn=last, access_count=access,
                pinned=pinned, content_type=types, out=out)
    want = np.array([retention_definition(now, int(last[i]), int(access[i]),
                                          bool(pinned and pinned[i]) or bool(types and types[i] == 0))
                     for i in range(n)], dtype=np.float64)
    assert bits(got) == bits(want)


def test_streamed_scores_equal_scores_of_parts() -> None:
    # Past STREAM_MIN_ITEMS the output is written with non-temporal stores; parts below it are
    # not. Same bits, and the same as the formula on a sample.
    rng = np.random.default_rng(4)
    n = STREAM_MIN_ITEMS + 7
    last = rng.integers(0, 5000, n)
    last[::97] = -(2**62)  # ages past the decay table
    access = rng.integers(0, 12, n)
    pinned = rng.random(n) < 0.05
    whole = score("retention", current_turn=5000, last_access_turn=last, access_count=access, pinned=pinned)
    step = STREAM_MIN_ITEMS // 3
    parts = np.concatenate([
        score("retention", current_turn=5000, last_access_turn=last[i:i + step],
              access_count=access[i:i + step], pinned=pinned[i:i + step], threads=1)
        for i in range(0, n, step)
    ])
    assert whole.tobytes() == parts.tobytes()
    for i in rng.integers(0, n, 2000).tolist() + list(range(0, n, 97))[:500]:
        want = retention_definition(5000, int(last[i]), int(access[i]), bool(pinned[i]))
        assert whole[i:i + 1].tobytes() == np.float64(want).tobytes(), i


# --- selection ---------------------------------------------------------------------------


def reference(scores: np.ndarray, tokens: np.ndarray | None, pinned: np.ndarray | None,
              ratio: float | None, target: int | None, min_keep: int) -> list[int]:
    n = scores.size
    order = np.lexsort((np.arange(n), scores)).tolist()  # ties (and -0.0 == 0.0) by position
    evictable = ~np.isposinf(scores)
    if pinned is not None:
        evictable &= ~pinned
    limit = max(n - min_keep, 0)
    if ratio is not None:
        return [i for i in order[:min(math.ceil(n * ratio), limit)] if evictable[i]]
    assert tokens is not None and target is not None
    chosen: list[int] = []
    freed = 0
    for i in order:
        if freed >= target or len(chosen) == limit:
            break
        if evictable[i]:
            chosen.append(i)
            freed += int(tokens[i])
    return chosen


# Few distinct values (long runs of ties, one radix bin), a narrow range, any finite float.
score_pools = st.sampled_from([
    st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, math.inf, -math.inf]),
    st.floats(0.5, 0.5000001),
    st.floats(allow_nan=False, allow_infinity=False),
])


@given(data=st.data(), n=st.integers(0, 3000), min_keep=st.integers(0, 100))
def test_radix_selection_equals_a_full_sort(data: st.DataObject, n: int, min_keep: int) -> None:
    scores = data.draw(hnp.arrays(np.float64, n, elements=data.draw(score_pools)))
    tokens = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, 1000)))
    pinned = data.draw(st.one_of(st.none(), hnp.arrays(np.bool_, n)))
    ratio = data.draw(st.sampled_from([0.1, 0.3, 0.5, 1.0]) | st.floats(0, 1))
    total = int(tokens.sum())
    target = data.draw(st.sampled_from([1, total // 10, total // 3, total // 2, total, total + 1]))
    got = select_evictions(scores, pinned=pinned, ratio=ratio, min_keep=min_keep)
    assert got.tolist() == reference(scores, None, pinned, ratio, None, min_keep)
    got = select_evictions(scores, tokens, pinned=pinned, target_free_tokens=target, min_keep=min_keep)
    assert got.tolist() == reference(scores, tokens, pinned, None, target, min_keep)


def test_parallel_selection_equals_a_full_sort() -> None:
    # Large enough for the passes over all items to be split over threads.
    rng = np.random.default_rng(5)
    n = PARALLEL_MIN_ITEMS * 2 + 11
    tokens = rng.integers(0, 300, n)
    pinned = rng.random(n) < 0.1
    for scores in (rng.random(n), np.round(rng.random(n), 2), rng.standard_normal(n) * 1e300):
        scores[::101] = math.inf
        for fraction in (0.1, 0.3, 0.5):
            got = select_evictions(scores, pinned=pinned, ratio=fraction, min_keep=1000)
            assert got.tolist() == reference(scores, None, pinned, fraction, None, 1000)
            target = int(tokens.sum() * fraction)
            got = select_evictions(scores, tokens, pinned=pinned, target_free_tokens=target)
            assert got.tolist() == reference(scores, tokens, pinned, None, target, 0)


# --- the per-partition passes of ctxwindow.dask -------------------------------------------


def keys_reference(values: np.ndarray) -> np.ndarray:
    bits = np.where(values == 0, 0.0, values).view(np.uint64)  # -0.0 is 0.0
    negative = bits >> np.uint64(63) == 1
    return np.where(negative, ~bits, bits | np.uint64(1 << 63))


scores_with_specials = hnp.arrays(
    np.float64, st.integers(0, 300),
    elements=st.one_of(st.floats(allow_nan=True), st.sampled_from([0.0, -0.0, math.inf, -math.inf, 0.3])),
)


@given(scores_with_specials)
def test_order_keys_are_the_ordered_bits(values: np.ndarray) -> None:
    from ctxwindow import _native

    keys = _native.order_keys(values)
    finite = ~np.isnan(values)
    assert np.array_equal(keys[finite], keys_reference(values)[finite])
    # Order-preserving: sorting by key sorts the scores (NaN aside).
    ordered = values[finite][np.argsort(keys[finite], kind="stable")]
    assert all(a <= b for a, b in zip(ordered[:-1], ordered[1:]))


@given(scores_with_specials, st.integers(0, 3), st.integers(0, 2**16 - 1), st.booleans(), st.data())
def test_key_histogram_equals_bincount(values: np.ndarray, level: int, pick: int, by_tokens: bool,
                                       data: st.DataObject) -> None:
    from ctxwindow import _native

    keys = _native.order_keys(values)
    n = len(keys)
    mask = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.bool_)
    tokens = np.asarray(data.draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n)), dtype=np.int64)
    # A prefix that some key has (when there are keys), so the region is not always empty.
    prefix = int(keys[pick % n]) >> (64 - 16 * level) if n and level else 0
    counts, sums = _native.key_histogram(keys, mask.view(np.uint8) if by_tokens else None,
                                         tokens if by_tokens else None, level, prefix)
    inside = np.ones(n, dtype=bool) if level == 0 else keys >> np.uint64(64 - 16 * level) == np.uint64(prefix)
    if by_tokens:
        inside &= mask
    digits = ((keys[inside] >> np.uint64(48 - 16 * level)) & np.uint64(0xFFFF)).astype(np.intp)
    assert np.array_equal(counts, np.bincount(digits, minlength=1 << 16))
    if by_tokens:
        assert sums is not None
        assert np.array_equal(sums, np.bincount(digits, weights=tokens[inside], minlength=1 << 16).astype(np.int64))
    else:
        assert sums is None
