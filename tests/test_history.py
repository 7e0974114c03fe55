"""TokenHistory: a stateful Hypothesis test against a pure-Python reference model, plus unit
tests, bad input (typed error, object unchanged) and sharing between threads."""

from __future__ import annotations

import gc
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from ctxwindow import (
    CtxWindowError,
    HistoryIndexError,
    HistorySnapshot,
    InvalidArgumentError,
    InvalidTypeError,
    SnapshotError,
    TokenHistory,
)


@dataclass
class Item:
    """A payload with an identity; the history must give back these very objects."""

    serial: int


Entry = tuple[Item, int, bool]


def drop_groups(entries: list[Entry], overhead: int, target: int) -> tuple[list[Entry], list[Entry]]:
    """Reference eviction: drop whole groups from the front while total + overhead > target."""
    kept = list(entries)
    evicted: list[Entry] = []
    while kept and sum(t for _, t, _ in kept) + overhead > target:
        end = 1
        while end < len(kept) and not kept[end][2]:
            end += 1
        evicted.extend(kept[:end])
        del kept[:end]
    return evicted, kept


def reference_evict(
    entries: list[Entry], max_tokens: int, overhead: int, low_watermark: int | None
) -> tuple[list[Entry], list[Entry]]:
    if sum(t for _, t, _ in entries) + overhead <= max_tokens:
        return [], list(entries)
    target = max_tokens if low_watermark is None else low_watermark
    return drop_groups(entries, overhead, target)


@dataclass
class ModelSnapshot:
    entries: list[Entry]
    last_serial: int
    discarded_at_creation: int


@dataclass
class Model:
    entries: list[Entry] = field(default_factory=list)
    serial: int = 0
    # Serials pushed on the current branch (evicted ones included), oldest first.
    lineage: list[int] = field(default_factory=list)
    # Serials discarded by rollbacks, in the order they were discarded.
    discarded: list[int] = field(default_factory=list)

    def restorable(self, snapshot: ModelSnapshot) -> bool:
        """A snapshot is restorable unless a later rollback discarded an entry pushed before it."""
        later = self.discarded[snapshot.discarded_at_creation :]
        return all(serial > snapshot.last_serial for serial in later)


tokens_strategy = st.integers(min_value=0, max_value=60)
budget_strategy = st.integers(min_value=0, max_value=400)


class HistoryMachine(RuleBasedStateMachine):
    snapshots = Bundle("snapshots")

    def __init__(self) -> None:
        super().__init__()
        self.history = TokenHistory()
        self.model = Model()
        self.live_snapshots = 0

    def model_items(self) -> list[Item]:
        return [item for item, _, _ in self.model.entries]

    @rule(tokens=tokens_strategy, starts_group=st.booleans())
    def push(self, tokens: int, starts_group: bool) -> None:
        self.model.serial += 1
        item = Item(self.model.serial)
        self.history.push(item, tokens, starts_group)
        self.model.entries.append((item, tokens, starts_group))
        self.model.lineage.append(item.serial)

    @rule(
        max_tokens=budget_strategy,
        overhead=st.integers(min_value=0, max_value=200),
        watermark_fraction=st.one_of(st.none(), st.floats(min_value=0, max_value=1)),
    )
    def evict(self, max_tokens: int, overhead: int, watermark_fraction: float | None) -> None:
        low_watermark = None if watermark_fraction is None else int(max_tokens * watermark_fraction)
        before = list(self.model.entries)
        evicted = self.history.evict(max_tokens, overhead, low_watermark)
        want_evicted, want_kept = reference_evict(before, max_tokens, overhead, low_watermark)
        # The very objects, oldest first; evicted + kept == what was there, in order.
        assert [id(x) for x in evicted] == [id(item) for item, _, _ in want_evicted]
        self.model.entries = want_kept
        assert evicted + list(self.history) == [item for item, _, _ in before]
        target = max_tokens if low_watermark is None else low_watermark
        if evicted:
            # Fits the target unless everything went; the cut is at a group start.
            assert len(self.history) == 0 or self.history.total_tokens + overhead <= target
            if len(self.history):
                assert self.history.entry(0)[2] is True
        else:
            assert self.history.total_tokens + overhead <= max_tokens or len(self.history) == 0

    @rule(target=snapshots)
    def snapshot(self) -> tuple[HistorySnapshot, ModelSnapshot]:
        snap = self.history.snapshot()
        assert len(snap) == len(self.model.entries)
        assert snap.total_tokens == sum(t for _, t, _ in self.model.entries)
        return snap, ModelSnapshot(
            list(self.model.entries), self.model.serial, len(self.model.discarded)
        )

    @rule(pair=snapshots)
    def rollback(self, pair: tuple[HistorySnapshot, ModelSnapshot]) -> None:
        snap, model_snap = pair
        if self.model.restorable(model_snap):
            # Entries pushed after the snapshot (evicted since or not) are discarded for good.
            last = model_snap.last_serial
            self.model.discarded.extend(s for s in self.model.lineage if s > last)
            self.model.lineage = [s for s in self.model.lineage if s <= last]
            self.history.rollback(snap)
            self.model.entries = list(model_snap.entries)
        else:
            before = self.history.entries()
            with pytest.raises(SnapshotError, match="can no longer be restored"):
                self.history.rollback(snap)
            assert self.history.entries() == before

    @rule(pair=consumes(snapshots))
    def drop_snapshot(self, pair: tuple[HistorySnapshot, ModelSnapshot]) -> None:
        del pair
        gc.collect()

    @rule()
    def foreign_snapshot_is_rejected(self) -> None:
        other = TokenHistory()
        before = self.history.entries()
        with pytest.raises(SnapshotError, match="another TokenHistory"):
            self.history.rollback(other.snapshot())
        assert self.history.entries() == before

    @rule()
    def clear(self) -> None:
        self.history.clear()
        self.model.entries = []

    @precondition(lambda self: len(self.model.entries) > 0)
    @rule(data=st.data())
    def index(self, data: st.DataObject) -> None:
        n = len(self.model.entries)
        i = data.draw(st.integers(min_value=-n, max_value=n - 1))
        item, tokens, starts_group = self.model.entries[i]
        assert self.history[i] is item
        assert self.history.entry(i) == (item, tokens, starts_group)

    @invariant()
    def matches_model(self) -> None:
        note(f"model: {[(i.serial, t, g) for i, t, g in self.model.entries]}")
        assert len(self.history) == len(self.model.entries)
        assert self.history.total_tokens == sum(t for _, t, _ in self.model.entries)
        assert [id(x) for x in self.history] == [id(i) for i in self.model_items()]
        assert self.history.token_counts() == [t for _, t, _ in self.model.entries]


TestHistoryMachine = HistoryMachine.TestCase


def test_evicts_whole_groups() -> None:
    history = TokenHistory()
    user, call, result, user2 = (
        {"role": "user"}, {"role": "assistant"}, {"role": "tool"}, {"role": "user"},
    )
    history.push(user, 5)
    history.push(call, 3)
    history.push(result, 30, starts_group=False)
    history.push(user2, 5)
    assert history.evict(40) == [user]
    assert history.evict(40, overhead=10) == [call, result]
    assert list(history) == [user2]
    assert history.total_tokens == 5


def test_low_watermark_and_overhead() -> None:
    history = TokenHistory()
    for i in range(10):
        history.push(i, 10)
    assert history.evict(100) == []
    assert history.evict(99, low_watermark=50) == [0, 1, 2, 3, 4]
    assert history.evict(10, overhead=11) == [5, 6, 7, 8, 9]
    assert len(history) == 0 and history.total_tokens == 0


def test_rollback_restores_evicted_entries_and_is_cheap_to_hold() -> None:
    history = TokenHistory()
    for i in range(5):
        history.push(i, 10)
    snap = history.snapshot()
    assert history.evict(20) == [0, 1, 2]
    history.push("new", 1)
    assert history.kept_for_snapshots == 3
    history.rollback(snap)
    assert list(history) == [0, 1, 2, 3, 4]
    del snap
    gc.collect()
    history.evict(0)
    assert history.kept_for_snapshots == 0


def test_rollback_keeps_the_same_objects() -> None:
    history = TokenHistory()
    payload = object()
    history.push(payload, 1)
    snap = history.snapshot()
    history.clear()
    history.rollback(snap)
    assert history[0] is payload


@pytest.mark.parametrize(
    ("tokens", "error", "message"),
    [
        (-1, InvalidArgumentError, "tokens must be >= 0, got -1"),
        (2**64, InvalidArgumentError, "tokens must be < 2\\*\\*64"),
        (1.0, InvalidTypeError, "tokens must be an int, not float"),
        (None, InvalidTypeError, "tokens must be an int, not NoneType"),
        (True, InvalidTypeError, "tokens must be an int, not bool"),
        ("3", InvalidTypeError, "tokens must be an int, not str"),
    ],
)
def test_bad_tokens_are_typed_errors_and_change_nothing(
    tokens: Any, error: type[Exception], message: str
) -> None:
    history = TokenHistory()
    history.push("kept", 7)
    with pytest.raises(error, match=message) as info:
        history.push("bad", tokens)
    assert isinstance(info.value, CtxWindowError)
    assert list(history) == ["kept"] and history.total_tokens == 7


def test_numpy_integers_are_accepted() -> None:
    np = pytest.importorskip("numpy")
    history = TokenHistory()
    history.push("x", np.int64(3))
    assert history.evict(np.uint32(2)) == ["x"]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda h: h.evict(-1), InvalidArgumentError, "max_tokens must be >= 0"),
        (lambda h: h.evict(10, -5), InvalidArgumentError, "overhead must be >= 0"),
        (lambda h: h.evict(10, 0, 11), InvalidArgumentError, r"low_watermark \(11\) must not exceed max_tokens \(10\)"),
        (lambda h: h.evict(10.5), InvalidTypeError, "max_tokens must be an int"),
        (lambda h: h.evict(10, 0, -1), InvalidArgumentError, "low_watermark must be >= 0"),
        (lambda h: h.rollback("snapshot"), InvalidTypeError, "rollback expects a snapshot"),
        (lambda h: h.rollback(TokenHistory().snapshot()), SnapshotError, "another TokenHistory"),
        (lambda h: h[5], HistoryIndexError, "index 5 out of range"),
        (lambda h: h[-6], HistoryIndexError, "index -6 out of range"),
        (lambda h: h["0"], InvalidTypeError, "history index must be an int"),
        (lambda h: h.push("x", 1, starts_group=1), InvalidTypeError, "starts_group must be a bool"),
    ],
)
def test_bad_arguments_leave_the_history_unchanged(
    call: Any, error: type[Exception], message: str
) -> None:
    history = TokenHistory()
    for i in range(5):
        history.push(i, 10, starts_group=i % 2 == 0)
    before = history.entries()
    with pytest.raises(error, match=message):
        call(history)
    assert history.entries() == before
    assert history.total_tokens == 50


def test_index_errors_are_index_errors() -> None:
    with pytest.raises(IndexError):
        TokenHistory()[0]


@given(st.lists(st.tuples(tokens_strategy, st.booleans()), max_size=50), budget_strategy)
def test_eviction_never_splits_a_group(pushes: list[tuple[int, bool]], budget: int) -> None:
    assume(pushes)
    history = TokenHistory()
    for serial, (tokens, starts_group) in enumerate(pushes):
        history.push((serial, starts_group), tokens, starts_group)
    evicted = history.evict(budget)
    if evicted and len(history):
        first_kept = history[0]
        assert first_kept[1] is True


def test_shared_between_threads() -> None:
    history = TokenHistory()
    per_thread = 2_000
    errors: list[BaseException] = []
    start = threading.Barrier(4)  # all four push at once, not one after another

    def worker(offset: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                history.push(offset + i, 1)
                if i % 100 == 0:
                    history.evict(10_000)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(k * per_thread,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(history) == 4 * per_thread
    assert history.total_tokens == 4 * per_thread


def test_finalizers_run_outside_the_lock() -> None:
    # An evicted payload whose finalizer touches the same history must not deadlock.
    history = TokenHistory()
    seen: list[int] = []

    class Touching:
        def __del__(self) -> None:
            seen.append(len(history))

    history.push(Touching(), 5)
    history.push("b", 5)
    history.evict(5)
    gc.collect()
    assert seen == [1]
    snap = history.snapshot()
    history.push(Touching(), 1)
    history.rollback(snap)
    gc.collect()
    assert seen == [1, 1]
    del snap  # otherwise the cleared entries are kept for it
    history.push(Touching(), 1)
    history.clear()
    gc.collect()
    assert seen == [1, 1, 0]
