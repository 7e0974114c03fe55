"""The contract every store keeps (file, SQLite, PostgreSQL): round trips, stale saves
rejected, old versions pruned."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings

from ctxwindow import StaleCheckpointError
from ctxwindow.checkpoint import FileCheckpointStore, TaskCheckpoint

from .stores import Store, checkpoints, stored_documents


@given(checkpoint=checkpoints)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_round_trip(store: Store, checkpoint: TaskCheckpoint) -> None:
    session = f"s{uuid.uuid4().hex}"
    version = store.save(checkpoint, session)
    assert version == checkpoint.version == 1 and checkpoint.saved_at is not None
    loaded = store.load(session)
    assert loaded == checkpoint
    assert store.save(loaded, session) == 2


def test_stale_saves_are_rejected_and_write_nothing(store: Store) -> None:
    first = TaskCheckpoint(goal="ship v2")
    store.save(first, "s")
    a, b = store.load("s"), store.load("s")
    assert a is not None and b is not None
    a.decisions.append("use Postgres")
    assert store.save(a, "s") == 2
    b.decisions.append("use MySQL")
    with pytest.raises(StaleCheckpointError, match="holds version 2"):
        store.save(b, "s")
    assert b.version == 1
    latest = store.load("s")
    assert latest is not None and latest.decisions == ["use Postgres"] and latest.version == 2
    assert store.load("never-saved") is None


def test_old_versions_are_pruned(store: Store) -> None:
    checkpoint = TaskCheckpoint(goal="g")
    for _ in range(6):
        store.save(checkpoint, "s")
    assert store.load("s") is not None and checkpoint.version == 6
    assert sorted(stored_documents(store, "s")) == [4, 5, 6]  # keep=3
    if isinstance(store, FileCheckpointStore):
        assert sorted(p.name for p in (store.directory / "s").glob("v*.json")) == [
            "v00000004.json", "v00000005.json", "v00000006.json"]
        assert (store.directory / "s" / "progress.md").read_text().startswith("# g")


def test_bad_session_ids_and_checkpoints_change_nothing(store: Store) -> None:
    checkpoint = TaskCheckpoint(goal="g")
    store.save(checkpoint, "s")
    before = stored_documents(store, "s")
    for session in ("../etc", "", "a b", "x" * 129, 5):
        with pytest.raises(ValueError, match="session_id"):
            store.save(checkpoint, session)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="session_id"):
            store.load(session)  # type: ignore[arg-type]
    checkpoint.goal = " "
    with pytest.raises(ValueError, match="needs a goal"):
        store.save(checkpoint, "s")
    assert stored_documents(store, "s") == before and checkpoint.version == 1
