"""ctxwindow.dask on a real local cluster (two worker processes): scores and selections equal bit
for bit to ctxwindow.scoring on the same data collected locally, for every policy, both stop
rules, ties, pinned items, empty and one-item partitions and Hypothesis-drawn stores; the same
typed errors; the ``ctxwindow score`` command end to end."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask.dataframe as dd
from dask.delayed import delayed
import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pytest
from distributed import Client, LocalCluster
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import InvalidArgumentError, InvalidTypeError, scoring
from ctxwindow import dask as cdask
from ctxwindow.cli import main

NOW = 100


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    # Port 0: any free port. With dashboard_address=None the scheduler's HTTP server still takes
    # 8787 when it is free and warns (an error here) when another cluster holds it.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


def items(n: int, seed: int = 0, turns: int = 100) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "tokens": rng.integers(0, 60, n),
        "created_turn": rng.integers(0, turns, n),
        "last_access_turn": rng.integers(0, turns, n),
        "access_count": rng.integers(0, 6, n),
        "content_type": rng.integers(0, 6, n).astype(np.uint8),
        "priority": rng.integers(0, 5, n) / 4,
        "pinned": rng.random(n) < 0.1,
        "reference_count": rng.integers(0, 3, n),
    })


def partitioned(frame: pd.DataFrame, sizes: list[int]) -> Any:
    """``frame`` cut into partitions of exactly these sizes (zeros give empty partitions)."""
    assert sum(sizes) == len(frame)
    cuts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    parts = [frame.iloc[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    return dd.from_delayed([delayed(p) for p in parts], meta=frame.iloc[:0], verify_meta=False)


def local_mask(scores: np.ndarray, frame: pd.DataFrame, **kw: Any) -> np.ndarray:
    chosen = scoring.select_evictions(scores, frame["tokens"] if "tokens" in frame else None, **kw)
    mask = np.zeros(len(frame), dtype=bool)
    mask[chosen] = True
    return mask


def check_selection(ddf: Any, scores: Any, frame: pd.DataFrame, local_scores: np.ndarray,
                    with_flags: bool = True, **stop: Any) -> None:
    """Both ways to the boundary: sorting a small boundary bin on the client, and refining the
    histograms down to one key then breaking its ties per partition."""
    flags: dict[str, Any] = {"pinned": "pinned", "content_type": "content_type"} if with_flags else {}
    cap = cdask._CANDIDATES
    try:
        cdask._CANDIDATES = 0
        refined = cdask.select_evictions(ddf, scores, **flags, **stop).compute()
    finally:
        cdask._CANDIDATES = cap
    got = cdask.select_evictions(ddf, scores, **flags, **stop).compute()
    assert refined.equals(got)
    local_flags = {k: frame[v] for k, v in flags.items()}
    expected = local_mask(local_scores, frame, **local_flags, **stop)
    assert got.dtype == np.bool_ and got.name == "evict"
    assert got.index.equals(frame.index)
    assert np.array_equal(got.to_numpy(), expected), (stop, int(got.sum()), int(expected.sum()))


SIZES = [0, 1, 700, 0, 1, 1, 900, 400, 0]
STOPS: list[dict[str, Any]] = [
    {"ratio": 0.1}, {"ratio": 0.3}, {"ratio": 0.5, "min_keep": 1900}, {"ratio": 1.0},
    {"ratio": 0.0}, {"target_free_tokens": 5_000}, {"target_free_tokens": 30_000},
    {"target_free_tokens": 1}, {"target_free_tokens": 10**12},
    {"target_free_tokens": 20_000, "min_keep": 1500},
]


@pytest.mark.parametrize("policy", scoring.POLICIES)
def test_every_policy_and_stop_rule_equals_local(client: Client, policy: str) -> None:
    frame = items(sum(SIZES), seed=len(policy), turns=12)  # few turns: many tied scores
    ddf = partitioned(frame, SIZES)
    scores = cdask.score(ddf, policy, current_turn=NOW)
    local = scoring.score(policy, current_turn=NOW, data=frame)
    got = scores.compute()
    assert got.dtype == np.float64 and got.name == "score" and got.index.equals(frame.index)
    assert got.to_numpy().tobytes() == local.tobytes()
    assert len(np.unique(local)) < len(local) - 100  # ties are exercised
    for stop in STOPS:
        check_selection(ddf, scores, frame, local, **stop)
    check_selection(ddf, scores, frame, local, with_flags=False, ratio=0.3)


def test_params_and_column_names(client: Client) -> None:
    frame = items(500, seed=3)
    renamed = frame.rename(columns={"tokens": "n_tokens", "last_access_turn": "seen"})
    params = {"weights": {"priority": 0.5, "fifo": 0.1, "lru": 0.1, "type_ttl": 0.3},
              "fifo": {"half_life": 20}}
    ddf = dd.from_pandas(renamed, npartitions=3)
    got = cdask.score(ddf, "hybrid", current_turn=NOW, params=params,
                      columns={"tokens": "n_tokens", "last_access_turn": "seen"}).compute()
    assert got.to_numpy().tobytes() == scoring.score("hybrid", current_turn=NOW, params=params, data=frame).tobytes()


def test_ties_signed_zeros_and_infinities(client: Client) -> None:
    """Scores given directly: all equal, -0.0 next to 0.0, +inf (never evicted), -inf."""
    n = 1200
    rng = np.random.default_rng(5)
    values = rng.choice(np.array([-np.inf, -1.0, -0.0, 0.0, 0.25, np.inf]), n)
    for column in (values, np.full(n, 0.5)):
        frame = items(n, seed=6).assign(s=column)
        ddf = partitioned(frame, [0, 300, 1, 0, 899])
        for stop in STOPS:
            check_selection(ddf, ddf["s"], frame, column, **stop)


def test_one_item_and_empty_store(client: Client) -> None:
    one = items(1, seed=7)
    ddf = partitioned(one, [0, 1, 0])
    local = scoring.score("retention", current_turn=NOW, data=one)
    scores = cdask.score(ddf, "retention", current_turn=NOW)
    for stop in STOPS:
        check_selection(ddf, scores, one, local, **stop)
    empty = items(0)
    ddf = partitioned(empty, [0, 0])
    assert len(cdask.score(ddf, "fifo", current_turn=NOW).compute()) == 0
    assert not cdask.select_evictions(ddf, ddf["priority"], ratio=0.5).compute().any()


@settings(max_examples=12, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 25), min_size=1, max_size=6),
    values=st.lists(st.sampled_from([-np.inf, -2.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf]), min_size=150, max_size=150),
    stop=st.one_of(
        st.builds(lambda r, k: {"ratio": r, "min_keep": k}, st.floats(0, 1), st.integers(0, 40)),
        st.builds(lambda t, k: {"target_free_tokens": t, "min_keep": k}, st.integers(0, 3000), st.integers(0, 40)),
    ),
    seed=st.integers(0, 2**16),
)
def test_drawn_stores_equal_local(client: Client, sizes: list[int], values: list[float],
                                  stop: dict[str, Any], seed: int) -> None:
    n = sum(sizes)
    column = np.array(values[:n], dtype=np.float64) if n <= len(values) else np.resize(values, n)
    frame = items(n, seed=seed).assign(s=column)
    ddf = partitioned(frame, sizes)
    check_selection(ddf, ddf["s"], frame, column, **stop)
    check_selection(ddf, ddf["s"], frame, column, with_flags=False, **stop)


# --- the same typed errors ------------------------------------------------------------------


def same_error(remote: Any, local: Any) -> None:
    with pytest.raises(Exception) as expected:
        local()
    with pytest.raises(type(expected.value)) as got:
        remote()
    assert isinstance(got.value, (InvalidArgumentError, InvalidTypeError))
    assert str(got.value) == str(expected.value)


def test_bad_columns_give_the_local_errors(client: Client) -> None:
    frame = items(300, seed=8)
    floats = frame.assign(created_turn=frame["created_turn"].astype(float))
    same_error(lambda: cdask.score(dd.from_pandas(floats, npartitions=2), "fifo", current_turn=NOW),
               lambda: scoring.score("fifo", current_turn=NOW, data=floats))
    missing = frame.drop(columns=["last_access_turn"])
    same_error(lambda: cdask.score(dd.from_pandas(missing, npartitions=2), "retention", current_turn=NOW),
               lambda: scoring.score("retention", current_turn=NOW, data=missing))
    texts = frame.assign(pinned=["yes"] * len(frame))
    ddf = dd.from_pandas(texts, npartitions=2)
    same_error(lambda: cdask.select_evictions(ddf, ddf["priority"], pinned="pinned", ratio=0.2),
               lambda: scoring.select_evictions(texts["priority"], pinned=texts["pinned"], ratio=0.2))
    ddf = dd.from_pandas(frame, npartitions=2)
    same_error(lambda: cdask.score(ddf, "nope", current_turn=NOW),
               lambda: scoring.score("nope", current_turn=NOW, data=frame))
    same_error(lambda: cdask.select_evictions(ddf, ddf["priority"], ratio=0.2, target_free_tokens=3),
               lambda: scoring.select_evictions(frame["priority"], frame["tokens"], ratio=0.2, target_free_tokens=3))
    no_tokens = frame.drop(columns=["tokens"])
    nd = dd.from_pandas(no_tokens, npartitions=2)
    same_error(lambda: cdask.select_evictions(nd, nd["priority"], target_free_tokens=3),
               lambda: scoring.select_evictions(no_tokens["priority"], target_free_tokens=3))
    with pytest.raises(InvalidArgumentError, match="'flag' .* is not in the frame"):
        cdask.select_evictions(ddf, ddf["priority"], pinned="flag", ratio=0.2)
    with pytest.raises(InvalidArgumentError, match="unknown columns"):
        cdask.score(ddf, "fifo", current_turn=NOW, columns={"turn": "created_turn"})
    with pytest.raises(InvalidTypeError):
        cdask.score(frame, "fifo", current_turn=NOW)


def test_a_token_total_of_2_63_is_a_typed_error_not_a_wrong_selection(client: Client) -> None:
    frame = pd.DataFrame({"score": [0.5, 0.5, 0.7, 0.9], "tokens": np.array([2**62, 2**62, 2**62, 1], np.int64)})
    ddf = dd.from_delayed([delayed(frame.iloc[:1]), delayed(frame.iloc[1:])], meta=frame.iloc[:0],
                          verify_meta=False)
    with pytest.raises(InvalidArgumentError, match="sum to 2\\^63 - 1 or more"):
        cdask.select_evictions(ddf, ddf["score"], target_free_tokens=2**63 - 1)
    small = frame.assign(tokens=np.array([2**40, 2**40, 2**40, 1], np.int64))
    ddf = dd.from_delayed([delayed(small.iloc[:1]), delayed(small.iloc[1:])], meta=small.iloc[:0],
                          verify_meta=False)
    got = cdask.select_evictions(ddf, ddf["score"], target_free_tokens=2**41).compute()
    assert list(np.flatnonzero(got.to_numpy())) == [0, 1]


def test_bad_values_raise_when_computed(client: Client) -> None:
    frame = items(400, seed=9)
    nan = frame.assign(s=np.where(np.arange(400) == 321, np.nan, 0.5))
    ddf = partitioned(nan, [100, 0, 250, 50])
    same_error(lambda: cdask.select_evictions(ddf, ddf["s"], ratio=0.2),
               lambda: scoring.select_evictions(nan["s"], nan["tokens"], ratio=0.2))
    negative = frame.assign(tokens=np.where(np.arange(400) == 377, -4, frame["tokens"]))
    ddf = partitioned(negative, [100, 0, 250, 50])
    same_error(lambda: cdask.select_evictions(ddf, ddf["priority"], target_free_tokens=50),
               lambda: scoring.select_evictions(negative["priority"], negative["tokens"], target_free_tokens=50))
    wide = frame.assign(content_type=frame["content_type"].astype(np.int64) + 3)
    with pytest.raises(InvalidArgumentError, match="content_type must hold codes"):
        cdask.score(dd.from_pandas(wide, npartitions=2), "type_ttl", current_turn=NOW).compute()


# --- the command ------------------------------------------------------------------------------


def test_command_on_a_cluster(client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = items(3000, seed=10)
    path = tmp_path / "items.parquet"
    frame.to_parquet(path, row_group_size=700)
    local = scoring.score("hybrid", current_turn=NOW, data=frame)
    address = str(client.scheduler_info()["address"])
    for flag, value, stop in (("--select-target-tokens", "20000", {"target_free_tokens": 20000}),
                              ("--select-ratio", "0.3", {"ratio": 0.3})):
        out = tmp_path / f"scores{flag}.parquet"
        code = main(["score", str(path), "--policy", "hybrid", "--current-turn", str(NOW), "--out", str(out),
                     flag, value, "--scheduler", address, "--quiet"])
        assert code == 0
        written = pd.read_parquet(out)
        assert list(written.columns) == [*frame.columns, "score", "evict"]
        pd.testing.assert_frame_equal(written[frame.columns], frame)
        assert written["score"].to_numpy().tobytes() == local.tobytes()
        expected = local_mask(local, frame, pinned=frame["pinned"], content_type=frame["content_type"], **stop)
        assert np.array_equal(written["evict"].to_numpy(), expected)
    out = tmp_path / "plain.parquet"
    assert main(["score", str(path), "--policy", "lru", "--current-turn", str(NOW), "--out", str(out),
                 "--scheduler", address, "--quiet"]) == 0
    written = pd.read_parquet(out)
    assert list(written.columns) == [*frame.columns, "score"]
    assert written["score"].to_numpy().tobytes() == scoring.score("lru", current_turn=NOW, data=frame).tobytes()
    capsys.readouterr()


def test_command_with_its_own_local_cluster_and_exit_2(tmp_path: Path) -> None:
    frame = items(2000, seed=11)
    path = tmp_path / "items.parquet"
    frame.to_parquet(path)
    cli = [sys.executable, "-m", "ctxwindow.cli", "score"]
    out = tmp_path / "out.parquet"
    done = subprocess.run([*cli, str(path), "--current-turn", str(NOW), "--out", str(out), "--select-ratio",
                           "0.25", "--workers", "1"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "2,000 items scored" in done.stderr and "500 to evict" in done.stderr
    assert int(pd.read_parquet(out)["evict"].sum()) == 500
    bad = {"missing.parquet": frame.drop(columns=["created_turn"]),
           "floats.parquet": frame.assign(created_turn=frame["created_turn"].astype(float))}
    messages = {"missing.parquet": "needs the column created_turn",
                "floats.parquet": "column created_turn must have an integer dtype"}
    for name, data in bad.items():
        data.to_parquet(tmp_path / name)
        done = subprocess.run([*cli, str(tmp_path / name), "--current-turn", str(NOW), "--out",
                               str(tmp_path / "x.parquet")], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxwindow: ") and messages[name] in lines[0], done.stderr
    done = subprocess.run([*cli, str(tmp_path / "absent.parquet"), "--current-turn", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
