"""Helpers of the checkpoint tests: opening each kind of store, reaching behind a store's back
(damaging a version, reading its rows), and the SIGKILL trials (also run by
``benches/bench_checkpoint.py``)."""

from __future__ import annotations

import contextlib
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from ctxwindow.checkpoint import (
    FileCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
    Subtask,
    TaskCheckpoint,
)

from ..pg_server import PostgresServer

Store = FileCheckpointStore | SQLiteCheckpointStore | PostgresCheckpointStore
DatabaseStore = SQLiteCheckpointStore | PostgresCheckpointStore
KINDS = ["file", "sqlite", "postgres"]

texts = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
checkpoints = st.builds(
    TaskCheckpoint,
    goal=texts.filter(str.strip),
    window_id=st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True),
    success_criteria=st.lists(texts, max_size=3),
    constraints=st.lists(texts, max_size=3),
    subtasks=st.lists(st.builds(Subtask, title=texts, status=st.sampled_from(["planned", "in_progress", "done"]),
                                notes=texts), max_size=4),
    decisions=st.lists(texts, max_size=3),
    open_issues=st.lists(texts, max_size=3),
    learnings=st.lists(texts, max_size=3),
    summary=texts,
)


def make_store(kind: str, folder: Path, keep: int, server: PostgresServer | None = None,
               dsn: str | None = None) -> Store:
    """A store of ``kind``; for PostgreSQL on ``dsn`` or else a new schema of ``server``."""
    if kind == "file":
        return FileCheckpointStore(folder / "checkpoints", keep=keep)
    if kind == "sqlite":
        return SQLiteCheckpointStore(folder / "checkpoints.db", keep=keep)
    assert server is not None or dsn is not None
    return PostgresCheckpointStore(dsn or server.new_schema(), keep=keep, timeout=20)  # type: ignore[union-attr]


def open_kind(kind: str, location: str | Path, keep: int = 3) -> Store:
    """A store of ``kind`` at ``location`` (a folder, a file or a PostgreSQL connection string)."""
    if kind == "file":
        return FileCheckpointStore(location, keep=keep)
    if kind == "sqlite":
        return SQLiteCheckpointStore(location, keep=keep)
    return PostgresCheckpointStore(str(location), keep=keep)


def close(store: Store) -> None:
    if isinstance(store, PostgresCheckpointStore):
        store.close()


def server_for(request: pytest.FixtureRequest, kind: str) -> PostgresServer | None:
    server: PostgresServer | None = request.getfixturevalue("postgres_server") if kind == "postgres" else None
    return server


def pg_execute(dsn: str, statement: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
    """Runs one statement on its own connection (autocommit); its rows."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement.encode(), parameters or None)
        return cursor.fetchall() if cursor.description else []


# --- behind the store's back -------------------------------------------------------------------

DAMAGES = [b'{"schema": "ctxwindow.checkpoint/1", "goal": "tru', b"", b"\x00\xff\xfe garbage \x89PNG",
           b'{"schema": "something/else", "goal": "x"}', b"[1, 2, 3]"]


def damage_version(store: Store, session: str, version: int, damage: bytes) -> None:
    """Overwrites a stored version behind the store's back (a disk error, a bad copy, a person)."""
    if isinstance(store, FileCheckpointStore):
        (store.directory / session / f"v{version:08d}.json").write_bytes(damage)
        return
    if isinstance(store, PostgresCheckpointStore):
        with store.pool.connection() as connection:
            cursor = connection.execute(
                "UPDATE ctxwindow_checkpoints SET data = %s WHERE session_id = %s AND version = %s",
                (damage, session, version))
            assert cursor.rowcount == 1
        return
    with contextlib.closing(sqlite3.connect(store.path, isolation_level=None)) as connection:
        changed = connection.execute("UPDATE checkpoints SET data = ? WHERE session_id = ? AND version = ?",
                                     (damage, session, version)).rowcount
    assert changed == 1


def stored_documents(store: Store, session: str) -> dict[int, bytes]:
    """The version documents the store reads (not those set aside), by version."""
    if isinstance(store, FileCheckpointStore):
        return {int(path.name[1:9]): path.read_bytes() for path in (store.directory / session).glob("v*.json")}
    if isinstance(store, PostgresCheckpointStore):
        with store.pool.connection() as connection:
            return {version: bytes(data) for version, data in connection.execute(
                "SELECT version, data FROM ctxwindow_checkpoints WHERE session_id = %s", (session,))}
    with contextlib.closing(sqlite3.connect(store.path)) as connection:
        rows = connection.execute("SELECT version, data FROM checkpoints WHERE session_id = ?", (session,))
        return {version: data if isinstance(data, bytes) else data.encode() for version, data in rows}


def set_aside_versions(store: Store, session: str) -> list[int]:
    """The versions the store set aside as corrupt, ascending."""
    if isinstance(store, FileCheckpointStore):
        return sorted(int(path.name[1:9]) for path in (store.directory / session).glob("v*.json.corrupt"))
    if isinstance(store, PostgresCheckpointStore):
        with store.pool.connection() as connection:
            return [row[0] for row in connection.execute(
                "SELECT version FROM ctxwindow_corrupt_checkpoints WHERE session_id = %s ORDER BY version",
                (session,))]
    with contextlib.closing(sqlite3.connect(store.path)) as connection:
        return [row[0] for row in connection.execute(
            "SELECT version FROM corrupt_checkpoints WHERE session_id = ? ORDER BY version", (session,))]


def archive_rows(store: DatabaseStore) -> list[Any]:
    """Every row of the archive table."""
    if isinstance(store, PostgresCheckpointStore):
        with store.pool.connection() as connection:
            return list(connection.execute("SELECT * FROM ctxwindow_archive ORDER BY retrieval_id").fetchall())
    with contextlib.closing(sqlite3.connect(store.path)) as connection:
        return connection.execute("SELECT * FROM archive ORDER BY retrieval_id").fetchall()


# --- SIGKILL trials ----------------------------------------------------------------------------

CRASHER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import FileCheckpointStore, PostgresCheckpointStore, SQLiteCheckpointStore, TaskCheckpoint
    kind, path = sys.argv[1], sys.argv[2]
    store = {"file": FileCheckpointStore, "sqlite": SQLiteCheckpointStore,
             "postgres": PostgresCheckpointStore}[kind](path, keep=3)
    checkpoint = store.load("s") or TaskCheckpoint(goal="survive")
    while True:
        checkpoint.learnings.append("x" * 200)
        store.save(checkpoint, "s")
        print(checkpoint.version, flush=True)
""")

#: The kill lands this long at most after the acknowledgement the trial waits for: a few saves,
#: so that kills fall uniformly over every phase of a save (the transaction, its COMMIT, fsync).
KILL_WINDOW = 0.05


def kill_trials(kind: str, path: str | Path, trials: int, seed: int) -> tuple[int, int]:
    """Kills a writer (SIGKILL) at random moments while it saves in a loop, mostly in the middle
    of a save's transaction; returns (bad loads, trials). A load is bad when it fails, is older
    than the last version the writer acknowledged, or is not a complete version. ``path`` is a
    folder, a file or a PostgreSQL connection string."""
    rng = random.Random(seed)
    bad = 0
    for _ in range(trials):
        writer = subprocess.Popen([sys.executable, "-c", CRASHER, kind, str(path)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert writer.stdout is not None and writer.stderr is not None
        acknowledged = [int(writer.stdout.readline())]  # blocks until the first save is acknowledged
        # The moment of the kill is the experiment: a random point in the writer's next saves.
        # The writer must still be saving then; a writer that exits by itself fails the trial.
        with contextlib.suppress(subprocess.TimeoutExpired):
            writer.wait(timeout=rng.uniform(0.0, KILL_WINDOW))
            raise AssertionError(f"the writer exited by itself ({writer.returncode}): {writer.stderr.read()}")
        writer.send_signal(signal.SIGKILL)
        acknowledged += [int(line) for line in writer.stdout.read().split()]
        writer.stdout.close()
        writer.stderr.close()
        writer.wait()
        store = open_kind(kind, path)
        loaded = store.load("s")
        close(store)
        if loaded is None or loaded.version < acknowledged[-1] or len(loaded.learnings) != loaded.version:
            bad += 1
    return bad, trials


@pytest.fixture(params=["sqlite", "postgres"])
def open_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], DatabaseStore]]:
    """Opens stores (each call a new one, as after a restart) on one SQLite file or one
    PostgreSQL schema: the stores with an archive."""
    server = server_for(request, request.param)
    dsn = server.new_schema() if server else None
    opened: list[DatabaseStore] = []

    def open_store() -> DatabaseStore:
        store = make_store(request.param, tmp_path, 20, dsn=dsn)
        assert not isinstance(store, FileCheckpointStore)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        close(store)
