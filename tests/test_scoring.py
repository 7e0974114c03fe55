"""Batch scoring and selection: a pure-Python reference of every policy, properties with
Hypothesis, the semantics of sqz's evictor, and bad input."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ctxwindow import InvalidArgumentError, InvalidTypeError
from ctxwindow.scoring import (
    POLICIES,
    format_eviction_summary,
    score,
    select_evictions,
    should_evict,
    summarize_for_eviction,
)

PRESTIGE = [1.0, 0.9, 1.0, 0.5, 0.3, 0.7]
TTL = [50.0, 50.0, 50.0, 30.0, 8.0, 20.0]


# --- the reference, one item at a time ---------------------------------------------------


def ref_retention(c: dict[str, Any], i: int, now: int, p: dict[str, Any]) -> float:
    age = max(now - int(c["last_access_turn"][i]), 0)
    scale = max(float(p.get("max_age_turns", 30.0)), 1.0)
    access = int(c["access_count"][i])
    recency_weight = float(p.get("recency_weight", 0.7))
    frequency_weight = float(p.get("frequency_weight", 0.3))
    return recency_weight * math.exp(-age / scale) + frequency_weight * min(
        math.log(access + 1) / math.log(5), 1.0
    )


def ref_fifo(c: dict[str, Any], i: int, now: int, p: dict[str, Any]) -> float:
    return math.exp(-(now - int(c["created_turn"][i])) / float(p.get("half_life", 10.0)))


def ref_lru(c: dict[str, Any], i: int, now: int, p: dict[str, Any]) -> float:
    if c.get("reference_count") is not None and int(c["reference_count"][i]) == 0:
        return float(p.get("unreferenced_score", 0.3))
    return math.exp(-(now - int(c["last_access_turn"][i])) / p.get("half_life", 5.0))


def ref_priority(c: dict[str, Any], i: int, now: int, p: dict[str, Any]) -> float:
    age = max(now - int(c["last_access_turn"][i]), 0)
    recency = math.exp(-age / 15.0)
    if c.get("embedding") is not None:
        e = [float(x) for x in c["embedding"][i]]
        t = [float(x) for x in c["task_embedding"]]
        dot = sum(a * b for a, b in zip(e, t))
        norms = math.sqrt(sum(a * a for a in e)) * math.sqrt(sum(b * b for b in t))
        semantic = max(dot / norms, 0.0) if norms else 0.0
    else:
        semantic = 0.5
    source = PRESTIGE[int(c["content_type"][i])] if c.get("content_type") is not None else 0.5
    reuse = min(int(c["reference_count"][i]) / 5, 1.0) if c.get("reference_count") is not None else 0.0
    if c.get("pinned") is not None and bool(c["pinned"][i]):
        explicit = 1.0
    elif c.get("priority") is not None:
        explicit = min(max(float(c["priority"][i]), 0.0), 1.0)
    else:
        explicit = 0.0
    return 0.30 * recency + 0.25 * semantic + 0.20 * source + 0.15 * reuse + 0.10 * explicit


def ref_type_ttl(c: dict[str, Any], i: int, now: int, p: dict[str, Any]) -> float:
    age = max(now - int(c["created_turn"][i]), 0)
    return max(1.0 - age / TTL[int(c["content_type"][i])], 0.0)


def ref_hybrid(c: dict[str, Any], i: int, now: int, p: dict[str, Any]) -> float:
    return (0.15 * ref_fifo(c, i, now, {}) + 0.15 * ref_lru(c, i, now, {})
            + 0.40 * ref_priority(c, i, now, {}) + 0.30 * ref_type_ttl(c, i, now, {}))


REFERENCE = {"retention": ref_retention, "fifo": ref_fifo, "lru": ref_lru,
             "priority": ref_priority, "type_ttl": ref_type_ttl, "hybrid": ref_hybrid}


def reference_scores(policy: str, c: dict[str, Any], now: int, p: dict[str, Any] | None = None) -> list[float]:
    out = []
    for i in range(len(c["created_turn"])):
        pinned = c.get("pinned") is not None and bool(c["pinned"][i])
        system = c.get("content_type") is not None and int(c["content_type"][i]) == 0
        out.append(math.inf if pinned or system else REFERENCE[policy](c, i, now, p or {}))
    return out


def assert_close(got: np.ndarray, want: list[float]) -> None:
    assert got.dtype == np.float64
    assert got.shape == (len(want),)
    for g, w in zip(got.tolist(), want):
        if math.isinf(w):
            assert g == w
        else:
            assert abs(g - w) <= 1e-12 * max(abs(w), 1e-300) or g == w, (g, w)


@st.composite
def columns(draw: st.DrawFn, with_embedding: bool = False) -> dict[str, Any]:
    n = draw(st.integers(min_value=0, max_value=40))
    turns = hnp.arrays(np.int64, n, elements=st.integers(-50, 2000))
    counts = hnp.arrays(np.int64, n, elements=st.integers(0, 20))
    c: dict[str, Any] = {
        "created_turn": draw(turns),
        "last_access_turn": draw(turns),
        "access_count": draw(counts),
        "content_type": draw(hnp.arrays(np.uint8, n, elements=st.integers(0, 5))),
        "tokens": draw(hnp.arrays(np.int64, n, elements=st.integers(0, 1000))),
    }
    if draw(st.booleans()):
        c["pinned"] = draw(hnp.arrays(np.bool_, n))
    if draw(st.booleans()):
        c["reference_count"] = draw(counts)
    if draw(st.booleans()):
        c["priority"] = draw(hnp.arrays(np.float64, n, elements=st.floats(-2, 2)))
    if with_embedding and draw(st.booleans()):
        d = draw(st.integers(1, 20))
        dtype = draw(st.sampled_from([np.float32, np.float64]))
        values = st.floats(-10, 10, width=32 if dtype == np.float32 else 64)
        c["embedding"] = draw(hnp.arrays(dtype, (n, d), elements=values))
        c["task_embedding"] = draw(hnp.arrays(dtype, d, elements=values))
    return c


@pytest.mark.parametrize("policy", POLICIES)
@given(c=columns(with_embedding=True), now=st.integers(0, 2100))
def test_native_equals_reference(policy: str, c: dict[str, Any], now: int) -> None:
    got = score(policy, current_turn=now, **c)
    assert_close(got, reference_scores(policy, c, now))


@given(c=columns(), now=st.integers(0, 2100))
def test_params_are_applied(c: dict[str, Any], now: int) -> None:
    params = {"max_age_turns": 7, "recency_weight": 0.5, "frequency_weight": 0.5}
    assert_close(score("retention", current_turn=now, params=params, **c),
                 reference_scores("retention", c, now, params))
    assert_close(score("fifo", current_turn=now, params={"half_life": 3}, **c),
                 reference_scores("fifo", c, now, {"half_life": 3}))


def test_params_reshape_the_score() -> None:
    c: dict[str, Any] = {"created_turn": np.array([0, 0]), "last_access_turn": np.array([0, 0]),
         "content_type": np.array([4, 3], dtype=np.uint8)}
    base = score("type_ttl", current_turn=4, **c)
    assert base.tolist() == [0.5, 1 - 4 / 30]
    tuned = score("type_ttl", current_turn=4, params={"ttl": {"tool_result": 16}}, **c)
    assert tuned.tolist() == [0.75, 1 - 4 / 30]
    only_priority = score("hybrid", current_turn=4, params={"weights": {"fifo": 0, "lru": 0,
                          "priority": 1, "type_ttl": 0}}, **c)
    assert_close(only_priority, [ref_priority(c, i, 4, {}) for i in range(2)])


@given(c=columns(with_embedding=True), now=st.integers(0, 2100), threads=st.integers(1, 4))
def test_threads_do_not_change_a_bit(c: dict[str, Any], now: int, threads: int) -> None:
    one = score("hybrid", current_turn=now, threads=1, **c)
    many = score("hybrid", current_turn=now, threads=threads, **c)
    assert one.tobytes() == many.tobytes()


def test_threads_on_large_inputs() -> None:
    rng = np.random.default_rng(7)
    n = 200_000
    c: dict[str, Any] = {"created_turn": rng.integers(0, 3000, n), "last_access_turn": rng.integers(0, 3000, n),
         "content_type": rng.integers(0, 6, n).astype(np.uint8),
         "access_count": rng.integers(0, 9, n), "reference_count": rng.integers(0, 9, n),
         "embedding": rng.standard_normal((n, 8), dtype=np.float32),
         "task_embedding": rng.standard_normal(8, dtype=np.float32)}
    results = [score("hybrid", current_turn=3000, threads=t, **c).tobytes() for t in (1, 2, 3)]
    results.append(score("hybrid", current_turn=3000, **c).tobytes())
    assert len(set(results)) == 1


@given(c=columns(), now=st.integers(0, 2100), i=st.integers(0, 39), j=st.integers(0, 39))
def test_older_never_scores_higher_under_fifo(c: dict[str, Any], now: int, i: int, j: int) -> None:
    n = len(c["created_turn"])
    if n == 0:
        return
    i, j = i % n, j % n
    s = score("fifo", current_turn=now, created_turn=c["created_turn"])
    if c["created_turn"][i] < c["created_turn"][j]:
        assert s[i] <= s[j]


@given(c=columns(), now=st.integers(0, 2100))
def test_more_accesses_never_score_lower_under_retention(c: dict[str, Any], now: int) -> None:
    before = score("retention", current_turn=now, **c)
    bumped = dict(c, access_count=c["access_count"] + 1)
    after = score("retention", current_turn=now, **bumped)
    assert (after >= before).all()


def test_pandas_and_lists_and_non_contiguous() -> None:
    last = np.arange(20, dtype=np.int64)[::2]  # non-contiguous view
    access = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    got = score("retention", current_turn=20, last_access_turn=last, access_count=access)
    c = {"last_access_turn": last.tolist(), "access_count": access,
         "created_turn": [0] * 10}
    assert_close(got, reference_scores("retention", c, 20))
    got32 = score("retention", current_turn=20,
                  data={"last_access_turn": last.astype(np.int32), "access_count": access})
    assert got32.tobytes() == got.tobytes()
    import pandas  # type: ignore[import-untyped]
    import pyarrow  # type: ignore[import-untyped]

    frame = pandas.DataFrame({"last_access_turn": last, "access_count": access})
    assert score("retention", current_turn=20, data=frame).tobytes() == got.tobytes()
    assert score("retention", current_turn=20, last_access_turn=frame["last_access_turn"],
                 access_count=frame["access_count"]).tobytes() == got.tobytes()
    table = pyarrow.table({"last_access_turn": last, "access_count": access})
    assert score("retention", current_turn=20, data=table).tobytes() == got.tobytes()
    chunked = pyarrow.chunked_array([last[:4], last[4:]])
    assert score("retention", current_turn=20, last_access_turn=chunked,
                 access_count=table.column("access_count")).tobytes() == got.tobytes()


def test_zero_items_give_empty_results() -> None:
    empty = score("retention", current_turn=3, last_access_turn=[], access_count=[])
    assert empty.shape == (0,) and empty.dtype == np.float64
    assert select_evictions(empty, ratio=0.5).shape == (0,)
    assert select_evictions(empty, [], target_free_tokens=10).dtype == np.int64


# --- selection --------------------------------------------------------------------------


def reference_selection(scores: list[float], tokens: list[int] | None, pinned: list[bool] | None,
                        types: list[int] | None, target: int | None, ratio: float | None,
                        min_keep: int) -> list[int]:
    n = len(scores)
    order = sorted(range(n), key=lambda i: (scores[i], i))

    def evictable(i: int) -> bool:
        return (scores[i] != math.inf and not (pinned and pinned[i])
                and not (types and types[i] == 0))

    limit = max(n - min_keep, 0)
    if ratio is not None:
        count = min(math.ceil(n * ratio), limit)
        return [i for i in order[:count] if evictable(i)]
    assert tokens is not None and target is not None
    chosen: list[int] = []
    freed = 0
    for i in order:
        if freed >= target or len(chosen) == limit:
            break
        if evictable(i):
            chosen.append(i)
            freed += tokens[i]
    return chosen


scores_strategy = st.lists(
    st.one_of(st.floats(-5, 5, allow_nan=False), st.sampled_from([0.0, -0.0, 1.0, math.inf])),
    max_size=60,
)


@given(data=st.data(), scores=scores_strategy, ratio=st.floats(0, 1), min_keep=st.integers(0, 70))
def test_ratio_selection(data: st.DataObject, scores: list[float], ratio: float, min_keep: int) -> None:
    n = len(scores)
    pinned = data.draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=n, max_size=n)))
    types = data.draw(st.one_of(st.none(), st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    got = select_evictions(np.array(scores, dtype=np.float64), pinned=pinned,
                           content_type=types, ratio=ratio, min_keep=min_keep).tolist()
    assert got == reference_selection(scores, None, pinned, types, None, ratio, min_keep)
    assert len(set(got)) == len(got)
    for i in got:
        assert not (pinned and pinned[i]) and not (types and types[i] == 0)
    kept = n - len(got)
    assert len(got) + kept == n and kept >= min(min_keep, n)


@given(data=st.data(), scores=scores_strategy, target=st.integers(0, 5000), min_keep=st.integers(0, 10))
def test_token_target_selection(data: st.DataObject, scores: list[float], target: int, min_keep: int) -> None:
    n = len(scores)
    tokens = data.draw(st.lists(st.integers(0, 300), min_size=n, max_size=n))
    pinned = data.draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=n, max_size=n)))
    got = select_evictions(scores, tokens, pinned=pinned, target_free_tokens=target,
                           min_keep=min_keep).tolist()
    assert got == reference_selection(scores, tokens, pinned, None, target, None, min_keep)
    evictable = [i for i in range(n) if scores[i] != math.inf and not (pinned and pinned[i])]
    freed = sum(tokens[i] for i in got)
    assert freed >= target or len(got) == min(len(evictable), max(n - min_keep, 0))


def test_large_selection_matches_argsort() -> None:
    rng = np.random.default_rng(3)
    scores = rng.random(300_000)
    scores[::7] = 0.5  # many ties
    tokens = rng.integers(1, 100, scores.size)
    order = np.lexsort((np.arange(scores.size), scores))
    got = select_evictions(scores, tokens, target_free_tokens=1_000_000)
    cut = int(np.searchsorted(np.cumsum(tokens[order]), 1_000_000)) + 1
    assert got.tolist() == order[:cut].tolist()
    got = select_evictions(scores, ratio=0.25)
    assert got.tolist() == order[: math.ceil(scores.size * 0.25)].tolist()


def test_sqz_semantics() -> None:
    # retention + ratio, ties by index, pinned inside the ranks lowers the count,
    # min_keep counts pinned items.
    last = np.array([5, 5, 1, 9, 1])
    access = np.array([0, 0, 0, 3, 0])
    pinned = np.array([False, False, True, False, False])
    s = score("retention", current_turn=10, last_access_turn=last, access_count=access, pinned=pinned)
    assert s[2] == math.inf
    assert select_evictions(s, pinned=pinned, ratio=0.4).tolist() == [4, 0]
    assert select_evictions(s, pinned=pinned, ratio=1.0, min_keep=3).tolist() == [4, 0]
    assert select_evictions(s, pinned=pinned, ratio=1.0, min_keep=5).tolist() == []
    assert should_evict(80, 100, 0.8) is True
    assert should_evict(79, 100, 0.8) is False
    assert should_evict(10**6, 0, 0.1) is False


def test_summaries() -> None:
    assert summarize_for_eviction("one line") == "[evicted: 1 lines, 8 chars] one line"
    assert summarize_for_eviction("") == "[evicted: 0 lines, 0 chars] "
    assert summarize_for_eviction("a\r\nb\n") == "[evicted: 2 lines, 5 chars] a"
    long = "é" * 100
    summary = summarize_for_eviction(long + "\nrest")
    assert summary == f"[evicted: 2 lines, 105 chars] {'é' * 77}..."
    exactly = "x" * 80
    assert summarize_for_eviction(exactly).endswith(exactly)
    assert format_eviction_summary([]) == ""
    assert format_eviction_summary([("m1", "first", 10), ("m2", "second", 5)]) == (
        "[compact: 2 items evicted]\n  m1 — first\n  m2 — second\n  (15 tokens freed)"
    )


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"last_access_turn": [1, 2], "access_count": [1]}, InvalidArgumentError, "access_count has 1 values"),
        ({"last_access_turn": [1.5], "access_count": [1]}, InvalidTypeError, "column last_access_turn must have an integer dtype"),
        ({"last_access_turn": ["a"], "access_count": [1]}, InvalidTypeError, "last_access_turn"),
        ({"last_access_turn": [1], "access_count": [-1]}, InvalidArgumentError, "access_count must be >= 0"),
        ({"last_access_turn": [1], "access_count": [1], "tokens": [-5]}, InvalidArgumentError, "tokens must be >= 0"),
        ({"last_access_turn": [1], "access_count": [1], "content_type": [9]}, InvalidArgumentError, "codes 0..=5"),
        ({"last_access_turn": [1], "access_count": [1], "pinned": [2]}, InvalidTypeError, "column pinned must have a bool dtype"),
        ({"last_access_turn": [1], "access_count": [1], "priority": [math.nan]}, InvalidArgumentError, "priority must be finite"),
        ({"last_access_turn": [1], "access_count": [1], "priority": [math.inf]}, InvalidArgumentError, "priority must be finite"),
        ({"last_access_turn": [1]}, InvalidArgumentError, "needs the column access_count"),
        ({"last_access_turn": [1], "access_count": [1], "params": {"max_age": 3}}, InvalidArgumentError, "unknown parameters"),
        ({"last_access_turn": [1], "access_count": [1], "params": {"max_age_turns": "3"}}, InvalidTypeError, "must be a number"),
        ({"last_access_turn": [1], "access_count": [1], "threads": 0}, InvalidArgumentError, "threads must be >= 1"),
    ],
)
def test_bad_score_input(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        score("retention", current_turn=3, **kwargs)


def test_bad_policy_and_embeddings() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown policy 'lfu'"):
        score("lfu", current_turn=1, created_turn=[1])
    with pytest.raises(InvalidArgumentError, match="half_life must be a finite number > 0"):
        score("fifo", current_turn=1, created_turn=[1], params={"half_life": 0})
    c: dict[str, Any] = {"last_access_turn": [1, 2], "content_type": [2, 3]}
    with pytest.raises(InvalidArgumentError, match="dimension 3 but task_embedding has 4"):
        score("priority", current_turn=1, embedding=np.ones((2, 3)), task_embedding=np.ones(4), **c)
    with pytest.raises(InvalidArgumentError, match="embedding must be 2 x 3"):
        score("priority", current_turn=1, embedding=np.ones((3, 3)), task_embedding=np.ones(3), **c)
    with pytest.raises(InvalidArgumentError, match="embedding must be finite"):
        bad = np.ones((2, 3))
        bad[1, 2] = np.nan
        score("priority", current_turn=1, embedding=bad, task_embedding=np.ones(3), **c)
    with pytest.raises(InvalidArgumentError, match="given together"):
        score("priority", current_turn=1, embedding=np.ones((2, 3)), **c)
    with pytest.raises(InvalidTypeError, match="float32 or float64"):
        score("priority", current_turn=1, embedding=np.ones((2, 3), dtype=np.complex64),
              task_embedding=np.ones(3), **c)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (([0.1, 0.2],), {}, InvalidArgumentError, "exactly one of"),
        (([0.1, 0.2], [1, 1]), {"ratio": 0.5, "target_free_tokens": 3}, InvalidArgumentError, "exactly one of"),
        (([0.1, 0.2],), {"ratio": 1.5}, InvalidArgumentError, r"ratio must be in \[0, 1\]"),
        (([0.1, 0.2],), {"ratio": -0.1}, InvalidArgumentError, r"ratio must be in \[0, 1\]"),
        (([0.1, 0.2],), {"target_free_tokens": 3}, InvalidArgumentError, "needs the tokens column"),
        (([0.1, math.nan],), {"ratio": 0.5}, InvalidArgumentError, "NaN"),
        (([0.1, 0.2], [1]), {"target_free_tokens": 3}, InvalidArgumentError, "tokens has 1 values"),
        (([0.1, 0.2], [1, -1]), {"target_free_tokens": 3}, InvalidArgumentError, "tokens must be >= 0"),
        (([0.1, 0.2],), {"ratio": 0.5, "min_keep": -1}, InvalidArgumentError, "min_keep must be >= 0"),
        ((["a", "b"],), {"ratio": 0.5}, InvalidTypeError, "float dtype"),
    ],
)
def test_bad_selection_input(args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        select_evictions(*args, **kwargs)


def test_out_buffer_is_filled_and_returned() -> None:
    c: dict[str, Any] = {"last_access_turn": np.array([1, 5, 9]), "access_count": np.array([0, 2, 7])}
    fresh = score("retention", current_turn=9, **c)
    buffer = np.full(3, -1.0)
    returned = score("retention", current_turn=9, out=buffer, **c)
    assert returned is buffer
    assert buffer.tobytes() == fresh.tobytes()
    with pytest.raises(InvalidArgumentError, match="out holds 2 values but there are 3 items"):
        score("retention", current_turn=9, out=np.empty(2), **c)
    with pytest.raises(InvalidTypeError, match="float64"):
        score("retention", current_turn=9, out=np.empty(3, dtype=np.float32), **c)
    with pytest.raises(InvalidArgumentError, match="contiguous"):
        score("retention", current_turn=9, out=np.empty(6)[::2], **c)


def test_non_finite_embedding_row_is_reported() -> None:
    c: dict[str, Any] = {"last_access_turn": np.arange(4), "content_type": np.full(4, 2, dtype=np.uint8)}
    embedding = np.ones((4, 9), dtype=np.float32)
    embedding[2, 7] = np.inf
    with pytest.raises(InvalidArgumentError, match="embedding must be finite, got inf at row 2, column 7"):
        score("hybrid", current_turn=4, created_turn=np.zeros(4, dtype=np.int64),
              embedding=embedding, task_embedding=np.ones(9, dtype=np.float32), **c)


# --- the boundary: bool bytes and arrays written during a call ------------------------------


@given(raw=hnp.arrays(np.uint8, st.integers(1, 64)))
def test_pinned_bytes_viewed_as_bool_are_any_non_zero(raw: np.ndarray[Any, Any]) -> None:
    # A uint8 array viewed as bool holds bytes other than 0/1; they are read as bytes (non-zero is
    # pinned), never as invalid bools.
    n = raw.size
    created = np.zeros(n, dtype=np.int64)
    scores = score("fifo", current_turn=3, created_turn=created, pinned=raw.view(np.bool_))
    assert (np.isinf(scores) == (raw != 0)).all()
    chosen = select_evictions(np.zeros(n), pinned=raw.view(np.bool_), ratio=1.0)
    assert set(chosen.tolist()) == set(np.flatnonzero(raw == 0).tolist())


def test_arrays_written_during_a_call_give_old_or_new_values() -> None:
    """Scoring reads the caller's arrays without a copy, with the GIL released. Another thread
    that writes them meanwhile (numpy copies release the GIL too) makes the call see, per item,
    either the old or the new value: each score is one of the two, and nothing crashes. A value
    made invalid during the call is reported (a negative count) or clamped (a content type)."""
    n = 200_000
    rng = np.random.default_rng(7)
    old = rng.integers(0, 100, n).astype(np.int64)
    new = old + 37
    counts = rng.integers(0, 10, n).astype(np.int64)
    live = old.copy()
    want_old = score("retention", current_turn=120, last_access_turn=old, access_count=counts)
    want_new = score("retention", current_turn=120, last_access_turn=new, access_count=counts)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            live[:] = new
            live[:] = old

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(30):
            got = score("retention", current_turn=120, last_access_turn=live, access_count=counts)
            assert ((got == want_old) | (got == want_new)).all()
    finally:
        stop.set()
        thread.join()

    # Invalid values written during the call: an error naming the column, or scores.
    types = np.full(n, 2, dtype=np.uint8)
    bad_counts = counts.copy()
    stop.clear()

    def vandal() -> None:
        while not stop.is_set():
            types[:] = 200
            bad_counts[:] = -1
            types[:] = 2
            bad_counts[:] = counts

    thread = threading.Thread(target=vandal)
    thread.start()
    try:
        for _ in range(30):
            try:
                got = score("hybrid", current_turn=120, created_turn=old, last_access_turn=old,
                            content_type=types, access_count=bad_counts)
            except InvalidArgumentError as error:
                assert "content_type" in str(error) or "access_count" in str(error)
            else:
                assert got.shape == (n,) and not np.isnan(got).any()
    finally:
        stop.set()
        thread.join()
