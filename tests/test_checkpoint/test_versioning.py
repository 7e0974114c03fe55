"""The versioning rule over every store: corrupt versions are set aside and reported, never a
reason to refuse saves, and version numbers are never reused."""

from __future__ import annotations

import contextlib
import copy
import logging
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwindow import CheckpointCorruptError, StaleCheckpointError
from ctxwindow.checkpoint import FileCheckpointStore, TaskCheckpoint

from .stores import (
    DAMAGES,
    KINDS,
    Store,
    close,
    damage_version,
    make_store,
    server_for,
    set_aside_versions,
    stored_documents,
)


def test_saves_succeed_after_load_fell_back_from_a_corrupt_newest_version(store: Store) -> None:
    # Regression: both stores refused every save (StaleCheckpointError) once the newest version
    # was corrupt and load had fallen back to the previous one.
    checkpoint = TaskCheckpoint(goal="ship v2")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    damage_version(store, "s", 2, b'{"schema": "ctxwindow.checkpoint/1", "goal": "tru')
    loaded = store.load("s")
    assert loaded is not None and loaded.version == 1
    loaded.decisions.append("after the fallback")
    assert store.save(loaded, "s") == 3  # never 2 again: that number was written once
    again = store.load("s")
    assert again is not None and again.version == 3 and again.decisions == ["after the fallback"]
    assert store.save(again, "s") == 4


def test_a_save_that_meets_a_corrupt_newest_version_sets_it_aside(store: Store) -> None:
    checkpoint = TaskCheckpoint(goal="g")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")  # checkpoint.version == 2
    damage_version(store, "s", 2, b"\x00\xff")
    assert store.save(checkpoint, "s") == 3  # based on 2, newest good is 1: not stale
    assert set_aside_versions(store, "s") == [2] and sorted(stored_documents(store, "s")) == [1, 3]


def test_a_stale_save_that_meets_a_corrupt_version_sets_it_aside_and_writes_nothing(store: Store) -> None:
    checkpoint = TaskCheckpoint(goal="g")
    store.save(checkpoint, "s")
    stale = copy.deepcopy(checkpoint)  # based on version 1
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    damage_version(store, "s", 3, b"")
    with pytest.raises(StaleCheckpointError, match="holds version 2"):
        store.save(stale, "s")
    assert set_aside_versions(store, "s") == [3] and sorted(stored_documents(store, "s")) == [1, 2]
    label = "v00000003.json" if isinstance(store, FileCheckpointStore) else "version 3"
    assert stale.version == 1 and label in store.warnings[-1]


def test_corrupt_newest_version_is_set_aside_reported_and_numbering_stays_monotonic(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint = TaskCheckpoint(goal="g")
    for _ in range(3):
        store.save(checkpoint, "s")
    damage_version(store, "s", 3, b"[1, 2, 3]")
    with caplog.at_level(logging.WARNING, logger="ctxwindow"):
        loaded = store.load("s")
    assert loaded is not None and loaded.version == 2
    label = "v00000003.json" if isinstance(store, FileCheckpointStore) else "version 3"
    reports = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(reports) == 1 and label in reports[0] and "corrupt" in reports[0]
    assert label in store.warnings[-1]
    assert set_aside_versions(store, "s") == [3] and sorted(stored_documents(store, "s")) == [1, 2]
    if isinstance(store, FileCheckpointStore):
        assert (store.directory / "s" / "v00000003.json.corrupt").read_bytes() == b"[1, 2, 3]"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ctxwindow"):
        assert store.load("s") == loaded  # set aside: never read (nor reported) again
    assert not caplog.records
    versions = [store.save(loaded, "s") for _ in range(5)]
    assert versions == [4, 5, 6, 7, 8]
    # keep=3 prunes good versions, and the version set aside once it is older than all kept
    assert sorted(stored_documents(store, "s")) == [6, 7, 8] and set_aside_versions(store, "s") == []


def test_every_version_corrupt_raises_until_a_new_save(store: Store) -> None:
    checkpoint = TaskCheckpoint(goal="g")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    for version in (1, 2):
        damage_version(store, "s", version, b"")
    for _ in range(2):  # also once everything is set aside: never None for a session that had versions
        with pytest.raises(CheckpointCorruptError, match="no good checkpoint"):
            store.load("s")
    assert set_aside_versions(store, "s") == [1, 2]
    fresh = TaskCheckpoint(goal="start over")
    assert store.save(fresh, "s") == 3
    loaded = store.load("s")
    assert loaded is not None and loaded.goal == "start over" and loaded.version == 3


OPERATIONS = st.lists(st.sampled_from(["load", "load_and_save", "save_older", "corrupt_newest"]),
                      min_size=1, max_size=20)


@pytest.mark.parametrize("kind", KINDS)
@given(operations=OPERATIONS, damage=st.sampled_from(DAMAGES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_versioning_with_corrupt_versions_property(request: pytest.FixtureRequest, kind: str, operations: list[str],
                                                   damage: bytes) -> None:
    """Load returns the newest good version; saving the newest good checkpoint succeeds; saving
    an older one raises StaleCheckpointError and writes nothing; versions strictly increase."""
    keep = 3
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as cleanup:
        store = make_store(kind, Path(folder), keep, server_for(request, kind))
        cleanup.callback(close, store)
        good: list[int] = []  # the model: good versions the store holds, ascending
        written: list[int] = []
        held = [TaskCheckpoint(goal="fresh")]  # checkpoints obtained earlier, as they were then
        for operation in operations:
            newest = good[-1] if good else 0
            if operation == "corrupt_newest":
                if good:
                    damage_version(store, "s", good.pop(), damage)
            elif operation == "load" or (operation == "load_and_save" and written and not good):
                if written and not good:
                    with pytest.raises(CheckpointCorruptError):
                        store.load("s")
                else:
                    loaded = store.load("s")
                    assert (loaded.version if loaded else 0) == newest
            elif operation == "load_and_save":
                checkpoint = store.load("s") or TaskCheckpoint(goal="fresh")
                assert checkpoint.version == newest
                checkpoint.learnings.append(operation)
                version = store.save(checkpoint, "s")
                assert version > max(written, default=0) and checkpoint.version == version
                written.append(version)
                good = [*good, version][-keep:]
                held.append(copy.deepcopy(checkpoint))
            else:
                older = [c for c in held if c.version < newest]
                if not older:
                    continue
                stale = copy.deepcopy(older[-1])
                before = {v: d for v, d in stored_documents(store, "s").items() if v in good}
                with pytest.raises(StaleCheckpointError):
                    store.save(stale, "s")
                assert stale == older[-1]
                assert {v: d for v, d in stored_documents(store, "s").items() if v in good} == before
                assert max([*stored_documents(store, "s"), *set_aside_versions(store, "s")],
                           default=0) <= max(written, default=0)
        assert written == sorted(set(written))
