"""Checkpoints: round trips, stale rejection, concurrent writers (threads and processes), crash
safety under SIGKILL, corrupt files, the resume prompt, and window checkpoint / resume.

One suite over the file, SQLite and PostgreSQL stores (the ``store`` fixture; the PostgreSQL
server is a throwaway cluster started once per run, see ``tests/pg_server.py``, each test in its
own schema). The file store has no archive and no schema, so the archive and schema tests run
over SQLite and PostgreSQL only; PostgreSQL adds server faults (restarts in the middle of a save
and of its COMMIT)."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwindow import (
    CheckpointCommitUnknownError,
    CheckpointCorruptError,
    CheckpointStoreError,
    ContextWindow,
    InvalidArgumentError,
    InvalidTypeError,
    StaleCheckpointError,
    Tokenizer,
)
from ctxwindow.archive import Archive, MessageArchive, retrieval_id
from ctxwindow.checkpoint import (
    PG_SCHEMA_VERSION,
    SQL_SCHEMA_VERSION,
    FileCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
    Subtask,
    TaskCheckpoint,
    bootstrap_prompt,
)
from ctxwindow.strategies import Summarize

from .pg_server import PostgresServer
from .test_window import call, check_valid, result

Store = FileCheckpointStore | SQLiteCheckpointStore | PostgresCheckpointStore
DatabaseStore = SQLiteCheckpointStore | PostgresCheckpointStore
KINDS = ["file", "sqlite", "postgres"]


def make_store(kind: str, folder: Path, keep: int, server: PostgresServer | None = None,
               dsn: str | None = None) -> Store:
    """A store of ``kind``; for PostgreSQL on ``dsn`` or else a new schema of ``server``."""
    if kind == "file":
        return FileCheckpointStore(folder / "checkpoints", keep=keep)
    if kind == "sqlite":
        return SQLiteCheckpointStore(folder / "checkpoints.db", keep=keep)
    assert server is not None or dsn is not None
    return PostgresCheckpointStore(dsn or server.new_schema(), keep=keep, timeout=20)  # type: ignore[union-attr]


def close(store: Store) -> None:
    if isinstance(store, PostgresCheckpointStore):
        store.close()


def server_for(request: pytest.FixtureRequest, kind: str) -> PostgresServer | None:
    server: PostgresServer | None = request.getfixturevalue("postgres_server") if kind == "postgres" else None
    return server


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = make_store(request.param, tmp_path, 3, server_for(request, request.param))
    yield opened
    close(opened)


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
    if isinstance(store, FileCheckpointStore):
        assert sorted(p.name for p in (store.directory / "s").glob("v*.json")) == [
            "v00000004.json", "v00000005.json", "v00000006.json"]
        assert (store.directory / "s" / "progress.md").read_text().startswith("# g")


def test_concurrent_writers_in_threads_lose_no_update(store: Store) -> None:
    store.save(TaskCheckpoint(goal="count"), "s")
    saved: list[int] = []

    def writer(name: str) -> None:
        for _ in range(10):
            while True:
                checkpoint = store.load("s")
                assert checkpoint is not None
                checkpoint.learnings.append(name)
                try:
                    saved.append(store.save(checkpoint, "s"))
                    break
                except StaleCheckpointError:
                    continue

    threads = [threading.Thread(target=writer, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = store.load("s")
    assert final is not None and final.version == 41 and len(final.learnings) == 40
    assert sorted(saved) == list(range(2, 42))


WRITER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import PostgresCheckpointStore, SQLiteCheckpointStore, StaleCheckpointError
    kind, location = sys.argv[4], sys.argv[1]
    store = SQLiteCheckpointStore(location) if kind == "sqlite" else PostgresCheckpointStore(location)
    for _ in range(int(sys.argv[3])):
        while True:
            checkpoint = store.load("s")
            checkpoint.learnings.append(sys.argv[2])
            try:
                store.save(checkpoint, "s")
                break
            except StaleCheckpointError:
                pass
""")


@pytest.mark.parametrize("kind, processes, saves", [("sqlite", 4, 15), ("postgres", 8, 50)])
def test_concurrent_writers_in_processes_lose_no_update(request: pytest.FixtureRequest, tmp_path: Path, kind: str,
                                                        processes: int, saves: int) -> None:
    """Load-modify-save with retry on StaleCheckpointError from many processes on one session."""
    server = server_for(request, kind)
    location = server.new_schema() if server else str(tmp_path / "shared.db")
    store = open_kind(kind, location, keep=20)
    store.save(TaskCheckpoint(goal="count"), "s")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, location, f"p{i}", str(saves), kind])
               for i in range(processes)]
    assert all(p.wait(timeout=120) == 0 for p in writers)
    final = store.load("s")
    close(store)
    assert final is not None and final.version == processes * saves + 1  # 0 lost updates
    assert sorted(final.learnings) == sorted(f"p{i}" for i in range(processes) for _ in range(saves))


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


def open_kind(kind: str, location: str | Path, keep: int = 3) -> Store:
    if kind == "file":
        return FileCheckpointStore(location, keep=keep)
    if kind == "sqlite":
        return SQLiteCheckpointStore(location, keep=keep)
    return PostgresCheckpointStore(str(location), keep=keep)


def kill_trials(kind: str, path: str | Path, trials: int, seed: int) -> tuple[int, int]:
    """Kills a writer (SIGKILL) at random moments, mostly in the middle of a save's transaction;
    returns (bad loads, trials). ``path`` is a folder, a file or a PostgreSQL connection string."""
    rng = random.Random(seed)
    bad = 0
    for _ in range(trials):
        writer = subprocess.Popen([sys.executable, "-c", CRASHER, kind, str(path)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        first = writer.stdout.readline()  # at least one save acknowledged
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(writer.pid, signal.SIGKILL)
        acknowledged = [int(first)] + [int(line) for line in writer.stdout.read().split()]
        writer.stdout.close()
        writer.wait()
        store = open_kind(kind, path)
        loaded = store.load("s")
        close(store)
        if loaded is None or loaded.version < acknowledged[-1] or len(loaded.learnings) != loaded.version:
            bad += 1
    return bad, trials


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_during_saves_never_loses_an_acknowledged_version(request: pytest.FixtureRequest, tmp_path: Path,
                                                                  kind: str) -> None:
    server = server_for(request, kind)
    path = server.new_schema() if server else tmp_path / ("store" if kind == "file" else "store.db")
    bad, trials = kill_trials(kind, path, trials=12, seed=7)
    assert bad == 0, f"{bad} of {trials} loads lost or corrupt"


@pytest.mark.parametrize(
    "damage",
    [b'{"schema": "ctxwindow.checkpoint/1", "goal": "tru', b"", b"\x00\xff\xfe garbage \x89PNG",
     b'{"schema": "something/else", "goal": "x"}', b'{"schema": "ctxwindow.checkpoint/1", "version": 3}',
     b"[1, 2, 3]"],
    ids=["truncated", "empty", "binary", "wrong-schema", "no-goal", "not-an-object"],
)
def test_corrupt_files_fall_back_to_the_last_good_version(tmp_path: Path, damage: bytes) -> None:
    store = FileCheckpointStore(tmp_path, keep=5)
    checkpoint = TaskCheckpoint(goal="good")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    (tmp_path / "s" / "v00000003.json").write_bytes(damage)
    loaded = store.load("s")
    assert loaded is not None and loaded.version == 2 and loaded.goal == "good"
    assert store.warnings and "v00000003.json" in store.warnings[-1]
    for path in (tmp_path / "s").glob("v*.json"):
        path.write_bytes(damage)
    with pytest.raises(CheckpointCorruptError, match="no good checkpoint"):
        store.load("s")


def test_corrupt_sqlite_rows_fall_back(tmp_path: Path) -> None:
    import sqlite3

    store = SQLiteCheckpointStore(tmp_path / "c.db")
    checkpoint = TaskCheckpoint(goal="good")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    with sqlite3.connect(tmp_path / "c.db") as connection:
        connection.execute("UPDATE checkpoints SET data = '{\"trunc' WHERE version = 2")
    loaded = store.load("s")
    assert loaded is not None and loaded.version == 1 and store.warnings


def test_validation() -> None:
    with pytest.raises(InvalidArgumentError, match="needs a goal"):
        TaskCheckpoint(goal="  ")
    with pytest.raises(InvalidArgumentError, match="window_id"):
        TaskCheckpoint(goal="g", window_id="bad id!")
    with pytest.raises(InvalidArgumentError, match="version"):
        TaskCheckpoint(goal="g", version=-1)
    with pytest.raises(InvalidArgumentError, match="status 'maybe'"):
        TaskCheckpoint(goal="g", subtasks=[Subtask("a", "maybe")])
    warnings = TaskCheckpoint(goal="g", subtasks=[Subtask("a", "done"), Subtask("b")]).validate()
    assert warnings and "no current subtask" in warnings[0]
    with pytest.raises(InvalidArgumentError, match="session_id"):
        FileCheckpointStore(Path("/tmp")).load("../etc")


def test_bootstrap_prompt_is_ordered_and_bounded() -> None:
    checkpoint = TaskCheckpoint(
        goal="Migrate auth to OAuth", constraints=["Never push to main without review."],
        subtasks=[Subtask("inventory endpoints", "done"), Subtask("token refresh", "in_progress"),
                  Subtask("rollout", "planned")],
        decisions=["Use PKCE for the mobile client."], open_issues=["Refresh fails on Safari"],
        learnings=["Staging tokens expire after 5 minutes."] * 20, summary="Long story " * 100)
    text = bootstrap_prompt(checkpoint)
    order = ["Goal:", "Constraints (verbatim):", "Current subtask:", "Remaining (not started):", "Last done:",
             "Open issues:", "Decisions:", "Learnings:", "Previous summary:"]
    positions = [text.index(title) for title in order]
    assert positions == sorted(positions)
    assert "- rollout" in text.split("Remaining (not started):")[1].split("Last done:")[0]
    assert "rollout" not in text.split("Last done:")[1].split("Open issues:")[0]
    bounded = bootstrap_prompt(checkpoint, max_tokens=80)
    assert Tokenizer("o200k_base").count(bounded) <= 80
    assert "Migrate auth to OAuth" in bounded and "Never push to main without review." in bounded
    assert "Previous summary" not in bounded


def test_window_checkpoint_and_resume_round_trip(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    evicted: list[Any] = []

    def build() -> ContextWindow:
        return ContextWindow("gpt-4o", max_tokens=1400, preserve_recent=2,
                             strategies=[Summarize(preserve_recent=3)])

    window = build()
    window.set_system("You are a travel agent.")
    window.events.on("on_evict", store.archiver("trip"))
    window.events.on("on_evict", lambda e, u: evicted.extend(e))
    window.write_note("constraints", "Never book basic economy.", "critical")
    window.add({"role": "user", "content": "Find me a flight to Denver (reservation ZFA04Y)."}, pinned=True)
    for i in range(12):
        window.add({"role": "user", "content": f"question {i} " + "details " * 30})
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", f"flight HAT{100 + i} costs {200 + i} USD " * 10))
    window.add(call("pending"))  # a call still waiting for its result
    checkpoint = window.checkpoint("Book a trip", constraints=["Never book basic economy."])
    store.save(checkpoint, "trip")

    resumed = build()
    assert resumed.resume(store, "trip") is not None
    assert resumed.messages() == window.messages()
    assert resumed.usage.total == window.usage.total
    assert resumed.pending_messages() == window.pending_messages()
    resumed.add(result("pending", "done"))
    window.add(result("pending", "done"))
    assert resumed.messages() == window.messages()
    check_valid(resumed, "You are a travel agent.")
    summary = next(m["content"] for m in resumed.messages() if str(m["content"]).startswith("[Conversation Summary]"))
    retrieval_id = summary.rsplit("retrieval id ", 1)[1].rstrip(")")
    assert resumed.retrieve(retrieval_id)
    assert evicted and store.search("trip", "HAT100")
    assert store.get(store.search("trip", "question")[0][0]) is not None
    with pytest.raises(InvalidArgumentError, match="no window state"):
        build().restore(TaskCheckpoint(goal="x"))


def test_save_and_load_latency(tmp_path: Path) -> None:
    # Measured properly by benches/bench_checkpoint.py; here only that both work with fsync.
    store = FileCheckpointStore(tmp_path)
    checkpoint = TaskCheckpoint(goal="g", learnings=["x" * 100] * 20)
    store.save(checkpoint, "s")
    assert json.loads((tmp_path / "s" / "v00000001.json").read_text())["version"] == 1


# --- corrupt versions: set aside, never a reason to refuse saves -----------------------------

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


# --- SQLite schema, migration, concurrent first opens ----------------------------------------

VERSION_1_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS checkpoints (session_id TEXT NOT NULL, version INTEGER NOT NULL, "
    "saved_at REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (session_id, version))",
    "CREATE TABLE IF NOT EXISTS archive (retrieval_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
    "position INTEGER NOT NULL, message TEXT NOT NULL, archived_at REAL NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS archive_text USING fts5(text, retrieval_id UNINDEXED, "
    "session_id UNINDEXED)",
]


def tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def user_version(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        version: int = connection.execute("PRAGMA user_version").fetchone()[0]
        return version


def test_sqlite_schema_version_is_user_version(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    SQLiteCheckpointStore(path)
    assert user_version(path) == SQL_SCHEMA_VERSION == 2
    assert "schema_version" not in tables(path) and "corrupt_checkpoints" in tables(path)
    SQLiteCheckpointStore(path).save(TaskCheckpoint(goal="g"), "s")  # opening again changes nothing
    assert user_version(path) == SQL_SCHEMA_VERSION


def test_sqlite_refuses_a_newer_schema_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    SQLiteCheckpointStore(path).save(TaskCheckpoint(goal="g"), "s")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute(f"PRAGMA user_version = {SQL_SCHEMA_VERSION + 1}")
    content = path.read_bytes()
    with pytest.raises(CheckpointCorruptError, match="newer than this ctxwindow"):
        SQLiteCheckpointStore(path)
    assert path.read_bytes() == content and user_version(path) == SQL_SCHEMA_VERSION + 1


def test_sqlite_migrates_a_version_1_database(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    message = {"role": "tool", "tool_call_id": "c1", "content": "deployed to eu-west-1"}
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        for statement in VERSION_1_SCHEMA:
            connection.execute(statement)
        connection.execute("INSERT INTO schema_version VALUES (1)")
        old = TaskCheckpoint(goal="from version 1", version=1, saved_at=1.0)
        connection.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?)", ("s", 1, 1.0, json.dumps(old.to_dict())))
        connection.execute("INSERT INTO archive VALUES (?, ?, ?, ?, ?)", ("s:1", "s", 1, json.dumps(message), 1.0))
        connection.execute("INSERT INTO archive_text VALUES (?, ?, ?)", (message["content"], "s:1", "s"))
    assert user_version(path) == 0

    store = SQLiteCheckpointStore(path)
    assert user_version(path) == SQL_SCHEMA_VERSION and "schema_version" not in tables(path)
    loaded = store.load("s")
    assert loaded == old
    assert store.save(loaded, "s") == 2
    archive = store.session_archive("s")
    group_id = retrieval_id([message])  # old rows are named by content, like every group since
    assert store.get("s:1") == message and archive.get(group_id) == [message]
    assert archive.search("eu-west-1") == [(group_id, [message])]
    assert store.search("s", "deployed")[0][0] == "s:1"
    assert store.archive("s", [{"role": "user", "content": "next"}]) == ["s:2"]  # numbering continues
    assert SQLiteCheckpointStore(path).load("s") == loaded


def test_sqlite_migrates_a_version_1_database_with_an_empty_version_table(tmp_path: Path) -> None:
    # Version 1 created its tables one autocommit statement at a time: a crash could leave
    # schema_version without its row (and some tables missing).
    path = tmp_path / "half.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        for statement in VERSION_1_SCHEMA[:2]:
            connection.execute(statement)
    store = SQLiteCheckpointStore(path)
    assert store.save(TaskCheckpoint(goal="g"), "s") == 1 and user_version(path) == SQL_SCHEMA_VERSION


OPENER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import SQLiteCheckpointStore, TaskCheckpoint
    folder, count, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    for index in range(count):
        SQLiteCheckpointStore(f"{folder}/db{index}.db").save(TaskCheckpoint(goal="g"), name)
""")


def test_concurrent_first_opens_do_not_collide(tmp_path: Path) -> None:
    processes = [subprocess.Popen([sys.executable, "-c", OPENER, str(tmp_path), "10", f"p{i}"],
                                  stderr=subprocess.PIPE, text=True) for i in range(6)]
    errors = [p.communicate(timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * 6, errors
    for index in range(10):
        path = tmp_path / f"db{index}.db"
        assert user_version(path) == SQL_SCHEMA_VERSION
        assert SQLiteCheckpointStore(path).sessions() == [f"p{i}" for i in range(6)]


# --- the archive: index by session, the MessageArchive protocol -------------------------------


class TracedStore(SQLiteCheckpointStore):
    """Records every SQL statement the store runs (parameters expanded)."""

    def __init__(self, path: Path) -> None:
        self.statements: list[str] = []
        super().__init__(path)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with super()._connect() as connection:
            connection.set_trace_callback(self.statements.append)
            yield connection


def test_archive_session_lookups_use_an_index(tmp_path: Path) -> None:
    store = TracedStore(tmp_path / "a.db")
    for index in range(60):
        store.archive(f"s{index % 3}", [{"role": "user", "content": f"note {index} about eu-west-1"}])
    archive = store.session_archive("s1")
    store.statements.clear()
    group_id = archive.put([call("c1"), result("c1", "ok")])
    assert archive.get(group_id) == [call("c1"), result("c1", "ok")]
    assert archive.search("eu-west-1") and store.search("s1", "note")
    queries = [s for s in store.statements if s.startswith("SELECT") and re.search(r"\barchive\b", s)]
    assert len(queries) >= 4
    plans = {}
    with contextlib.closing(sqlite3.connect(tmp_path / "a.db")) as connection:
        for query in queries:
            plans[query] = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + query)]
    for query, plan in plans.items():
        scans = [step for step in plan if re.match(r"SCAN (archive|a)\b", step)]
        assert not scans, f"{query}: {plan}"
    by_session = [p for q, p in plans.items() if "WHERE session_id" in q]
    assert any("archive_by_session" in step for plan in by_session for step in plan)
    assert any("archive_by_group" in step for plan in by_session for step in plan)


def test_session_archive_is_a_message_archive(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    archive = store.session_archive("s")
    assert isinstance(archive, MessageArchive)
    group = [call("c1"), result("c1", "flight HAT100 costs 200 USD")]
    group_id = archive.put(group)
    assert group_id == retrieval_id(group) == Archive().put(group)  # the same id in every archive
    assert archive.put(group) == group_id and len(store.search("s", "HAT100")) == 1  # stored once
    other = store.session_archive("t").put([{"role": "user", "content": "HAT100 elsewhere"}])
    assert archive.get(group_id) == group and archive.get("ctx-0000000000000000") is None
    assert archive.get(other) is None  # each session archive resolves its own groups
    assert archive.search("HAT100") == [(group_id, group)] and archive.search("nothing") == []
    assert open_database().session_archive("s").get(group_id) == group


def test_placeholder_ids_resolve_from_the_archive_after_a_restart(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    window = ContextWindow("gpt-4o", max_tokens=1400, preserve_recent=2,
                           strategies=[Summarize(preserve_recent=3)], archive=store.session_archive("trip"))
    for i in range(12):
        window.add({"role": "user", "content": f"question {i} " + "details " * 30})
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", f"flight HAT{100 + i} costs {200 + i} USD " * 10))
    ids = [m["content"].split("retrieval id ", 1)[1].split("]")[0].split(")")[0]
           for m in window.messages() if isinstance(m.get("content"), str) and "retrieval id " in m["content"]]
    assert ids
    reopened = open_database().session_archive("trip")
    for group_id in ids:
        originals = window.retrieve(group_id)
        assert originals and reopened.get(group_id) == originals


def archive_rows(store: DatabaseStore) -> list[Any]:
    if isinstance(store, PostgresCheckpointStore):
        with store.pool.connection() as connection:
            return list(connection.execute("SELECT * FROM ctxwindow_archive ORDER BY retrieval_id").fetchall())
    with contextlib.closing(sqlite3.connect(store.path)) as connection:
        return connection.execute("SELECT * FROM archive ORDER BY retrieval_id").fetchall()


def test_archive_bad_input_raises_typed_errors_and_changes_nothing(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    archive = store.session_archive("s")
    archive.put([{"role": "user", "content": "kept"}])

    def rows() -> list[Any]:
        return archive_rows(store)

    before = rows()
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        archive.put([])
    with pytest.raises(InvalidTypeError, match="message dicts"):
        archive.put([{"role": "user", "content": "a"}, "not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError, match="JSON-serializable"):
        archive.put([{"role": "user", "content": "a"}, {"role": "user", "content": object()}])
    with pytest.raises(InvalidTypeError, match="message dicts"):
        store.archive("s", [{"role": "user", "content": "a"}, 42])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="query"):
        archive.search("  ")
    with pytest.raises(InvalidArgumentError, match="limit"):
        archive.search("kept", limit=-1)
    with pytest.raises(InvalidTypeError, match="retrieval id"):
        archive.get(7)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="session_id"):
        store.session_archive("../etc")
    assert rows() == before
    assert archive.search("!!!") == []


def test_sqlite_store_bad_input_raises_typed_errors_and_changes_nothing(tmp_path: Path) -> None:
    garbage = tmp_path / "not.db"
    garbage.write_bytes(b"this is not a database, " * 100)
    with pytest.raises(CheckpointCorruptError, match="not a checkpoint database"):
        SQLiteCheckpointStore(garbage)
    assert garbage.read_bytes() == b"this is not a database, " * 100
    for kind in ("file", "sqlite"):
        with pytest.raises(InvalidArgumentError, match="keep"):
            make_store(kind, tmp_path, keep=0)
    with pytest.raises(InvalidArgumentError, match="keep"):
        PostgresCheckpointStore("host=/nonexistent", keep=0)


# --- the module imports on Windows (no fcntl there) ------------------------------------------

WITHOUT_FCNTL = textwrap.dedent("""
    import errno, sys, types
    sys.modules["fcntl"] = None  # as on Windows: importing it fails
    import ctxwindow.checkpoint as checkpoint
    calls = []

    def locking(descriptor, mode, count):
        calls.append(mode)
        if len(calls) == 1:  # LK_LOCK gives up after 10 tries: the helper tries again
            raise OSError(errno.EDEADLOCK, "Resource deadlock avoided")

    sys.modules["msvcrt"] = types.SimpleNamespace(LK_LOCK=1, LK_UNLCK=0, locking=locking)
    sys.platform = "win32"
    store = checkpoint.FileCheckpointStore(sys.argv[1])
    store.save(checkpoint.TaskCheckpoint(goal="g"), "s")
    assert store.load("s").version == 1
    print(calls)
""")


def test_module_imports_without_fcntl_and_locks_with_msvcrt(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_FCNTL, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 1, 0, 1, 0]"  # save: lock (retried), unlock; load: lock, unlock


# --- the archive's search, the same over SQLite and PostgreSQL -------------------------------


def test_archive_search_matches_words_and_phrases_and_ranks(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    messages = [
        {"role": "user", "content": "the flight HAT100 HAT100 HAT100 to Denver"},
        {"role": "user", "content": "a flight to Denver, then many other words, and HAT100 once among them all"},
        {"role": "tool", "tool_call_id": "c1", "content": "deployed to eu-west-1 today"},
        {"role": "user", "content": "eu and west and 1, apart"},
        {"role": "user", "content": "a NUL \x00 inside, reservation HAT999"},
    ]
    ids = store.archive("s", messages)
    store.archive("t", [{"role": "user", "content": "HAT100 in another session"}])
    assert [rid for rid, _ in store.search("s", "HAT100")] == [ids[0], ids[1]]  # more mentions rank first
    assert [rid for rid, _ in store.search("s", "hat100 denver")] == [ids[0], ids[1]]  # every word, any case
    assert store.search("s", "HAT100 nowhere") == []
    assert store.search("s", "eu-west-1") == [(ids[2], messages[2])]  # a phrase, not three words
    assert store.get(ids[4]) == messages[4]  # NUL kept exactly
    archive = store.session_archive("s")
    found = archive.search("nowhere HAT999 eu-west-1")  # any word
    assert sorted(group[0]["content"] for _, group in found) == sorted([messages[2]["content"], messages[4]["content"]])
    assert archive.search("HAT100", limit=1) == [(retrieval_id([messages[0]]), [messages[0]])]
    assert store.session_archive("t").search("Denver") == []


# --- PostgreSQL: schema, pool, server faults ------------------------------------------------


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> str:
    return postgres_server.new_schema()


def pg_execute(dsn: str, statement: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement.encode(), parameters or None)
        return cursor.fetchall() if cursor.description else []


def test_postgres_schema_version_is_recorded_and_a_newer_one_refused(pg_dsn: str) -> None:
    with PostgresCheckpointStore(pg_dsn) as store:
        store.save(TaskCheckpoint(goal="g"), "s")
    assert pg_execute(pg_dsn, "SELECT version FROM ctxwindow_schema") == [(PG_SCHEMA_VERSION,)] == [(1,)]
    with PostgresCheckpointStore(pg_dsn) as store:  # opening again changes nothing
        assert store.load("s") is not None and store.sessions() == ["s"]
    assert pg_execute(pg_dsn, "SELECT version FROM ctxwindow_schema") == [(PG_SCHEMA_VERSION,)]
    pg_execute(pg_dsn, "UPDATE ctxwindow_schema SET version = %s", (PG_SCHEMA_VERSION + 1,))
    with pytest.raises(CheckpointCorruptError, match="newer than this ctxwindow"):
        PostgresCheckpointStore(pg_dsn)
    assert pg_execute(pg_dsn, "SELECT COUNT(*) FROM ctxwindow_checkpoints") == [(1,)]


PG_OPENER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import PostgresCheckpointStore, TaskCheckpoint
    name, dsns = sys.argv[1], sys.argv[2:]
    for dsn in dsns:
        with PostgresCheckpointStore(dsn) as store:
            store.save(TaskCheckpoint(goal="g"), name)
""")


def test_postgres_concurrent_first_opens_do_not_collide(postgres_server: PostgresServer) -> None:
    dsns = [postgres_server.new_schema() for _ in range(4)]
    processes = [subprocess.Popen([sys.executable, "-c", PG_OPENER, f"p{i}", *dsns], stderr=subprocess.PIPE,
                                  text=True) for i in range(6)]
    errors = [p.communicate(timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * 6, errors
    for dsn in dsns:
        assert pg_execute(dsn, "SELECT version FROM ctxwindow_schema") == [(PG_SCHEMA_VERSION,)]
        with PostgresCheckpointStore(dsn) as store:
            assert store.sessions() == [f"p{i}" for i in range(6)]


def test_postgres_search_uses_the_gin_index(pg_dsn: str) -> None:
    with PostgresCheckpointStore(pg_dsn) as store:
        store.archive("s", [{"role": "user", "content": f"note {i} about eu-west-1"} for i in range(50)])
        with store.pool.connection() as connection:
            connection.execute("SET enable_seqscan = off")
            plan = "\n".join(row[0] for row in connection.execute(
                "EXPLAIN SELECT retrieval_id FROM ctxwindow_archive "
                "WHERE search @@ phraseto_tsquery('simple', 'eu west 1')"))
    assert "ctxwindow_archive_search" in plan, plan


def test_postgres_store_takes_a_pool_it_does_not_close(pg_dsn: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_dsn, min_size=1, max_size=2, open=True, check=ConnectionPool.check_connection) as pool:
        with PostgresCheckpointStore(pool) as store:
            assert store.save(TaskCheckpoint(goal="g"), "s") == 1
        assert not pool.closed
        with PostgresCheckpointStore(pool) as store:
            loaded = store.load("s")
            assert loaded is not None and loaded.version == 1


def test_postgres_bad_arguments_raise_typed_errors() -> None:
    with pytest.raises(InvalidTypeError, match="connection string or a psycopg_pool.ConnectionPool"):
        PostgresCheckpointStore(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not a PostgreSQL connection string"):
        PostgresCheckpointStore("host = = =")
    with pytest.raises(InvalidArgumentError, match="max_connections"):
        PostgresCheckpointStore("host=/nonexistent", max_connections=0)
    with pytest.raises(CheckpointStoreError, match="no connection to PostgreSQL within 0.5 s"):
        PostgresCheckpointStore("host=/nonexistent-ctxwindow port=1", timeout=0.5)


WITHOUT_PSYCOPG = textwrap.dedent("""
    import sys
    sys.modules["psycopg"] = None
    from ctxwindow.checkpoint import PostgresCheckpointStore
    from ctxwindow.errors import MissingDependencyError
    try:
        PostgresCheckpointStore("host=/tmp")
    except MissingDependencyError as error:
        print(error)
""")


def test_postgres_store_without_psycopg_names_the_extra() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pip install 'ctxwindow[postgres]'" in done.stdout


def wait_for(dsn: str, condition: str, timeout: float = 20.0) -> None:
    """Waits until a backend other than ours matches ``condition`` in pg_stat_activity."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pg_execute(dsn, f"SELECT 1 FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND {condition}"):
            return
        time.sleep(0.01)
    raise AssertionError(f"no backend with {condition}")


def save_in_thread(store: PostgresCheckpointStore, checkpoint: TaskCheckpoint) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def save() -> None:
        try:
            outcome.append(store.save(checkpoint, "s"))
        except Exception as error:  # noqa: BLE001 - the test inspects it
            outcome.append(error)

    thread = threading.Thread(target=save)
    thread.start()
    return thread, outcome


def test_postgres_connection_lost_in_the_middle_of_a_save_writes_nothing(
        postgres_server: PostgresServer, pg_dsn: str) -> None:
    import psycopg

    with PostgresCheckpointStore(pg_dsn, timeout=20) as store:
        checkpoint = TaskCheckpoint(goal="g")
        store.save(checkpoint, "s")
        checkpoint.learnings.append("lost")
        with psycopg.connect(pg_dsn, autocommit=True) as blocker:  # holds the session's lock: the save waits
            blocker.execute("SELECT pg_advisory_lock(hashtextextended('ctxwindow.checkpoints:s', 0))")
            thread, outcome = save_in_thread(store, checkpoint)
            wait_for(pg_dsn, "wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'")
            postgres_server.restart()
        thread.join(timeout=60)
        assert len(outcome) == 1 and isinstance(outcome[0], CheckpointStoreError), outcome
        assert not isinstance(outcome[0], CheckpointCommitUnknownError) and "nothing was written" in str(outcome[0])
        assert checkpoint.version == 1
        loaded = store.load("s")  # the pool replaced its broken connections
        assert loaded is not None and loaded.version == 1 and loaded.learnings == []
        assert store.save(checkpoint, "s") == 2


def test_postgres_connection_lost_during_commit_is_an_unknown_outcome_never_retried(
        postgres_server: PostgresServer, pg_dsn: str) -> None:
    with PostgresCheckpointStore(pg_dsn, timeout=20) as store:
        checkpoint = TaskCheckpoint(goal="g")
        store.save(checkpoint, "s")
        # A deferred trigger makes COMMIT itself take long: the restart lands while COMMIT is in flight.
        pg_execute(pg_dsn, "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
                           "$$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$")
        pg_execute(pg_dsn, "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON ctxwindow_checkpoints "
                           "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()")
        checkpoint.learnings.append("in flight")
        thread, outcome = save_in_thread(store, checkpoint)
        wait_for(pg_dsn, "state = 'active' AND query = 'COMMIT'")
        postgres_server.restart()
        thread.join(timeout=60)
        assert len(outcome) == 1 and isinstance(outcome[0], CheckpointCommitUnknownError), outcome
        assert "may or may not have been written" in str(outcome[0])
        assert checkpoint.version == 1
        pg_execute(pg_dsn, "DROP TRIGGER slow_commit ON ctxwindow_checkpoints")
        loaded = store.load("s")  # here the restart aborted the COMMIT: nothing was written
        assert loaded is not None and loaded.version == 1 and loaded.learnings == []
        assert pg_execute(pg_dsn, "SELECT version FROM ctxwindow_checkpoints") == [(1,)]
        loaded.learnings.append("again")
        assert store.save(loaded, "s") == 2


def test_postgres_restarts_during_saves_lose_or_half_write_nothing(
        postgres_server: PostgresServer, pg_dsn: str) -> None:
    """Saves in a loop while the server restarts at random moments: every failure is a typed
    error, and each load holds a complete version no older than the last acknowledged one."""
    rng = random.Random(3)
    store = PostgresCheckpointStore(pg_dsn, timeout=20)
    acknowledged = [0]
    errors: list[CheckpointStoreError] = []
    bad: list[str] = []
    stop = threading.Event()

    def load() -> TaskCheckpoint:
        while True:
            try:
                return store.load("s") or TaskCheckpoint(goal="survive restarts")
            except CheckpointStoreError:
                time.sleep(0.05)

    def writer() -> None:
        checkpoint = load()
        while not stop.is_set():
            checkpoint.learnings.append("x" * 50)
            try:
                acknowledged.append(store.save(checkpoint, "s"))
            except CheckpointStoreError as error:
                errors.append(error)
                checkpoint = load()
                if checkpoint.version < acknowledged[-1] or len(checkpoint.learnings) != checkpoint.version:
                    bad.append(f"after {error!r}: version {checkpoint.version}, acknowledged {acknowledged[-1]}")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(6):
            seen = len(acknowledged)
            while len(acknowledged) < seen + 3 and thread.is_alive():  # saving again after the last restart
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.02))
            postgres_server.restart()
    finally:
        time.sleep(0.3)
        stop.set()
        thread.join(timeout=60)
    final = store.load("s")
    store.close()
    assert not bad, bad
    assert errors, "no save met a restart"
    print(f"{len(acknowledged) - 1} saves acknowledged, {len(errors)} failed:", sorted({type(e).__name__ for e in errors}))
    assert final is not None and final.version >= acknowledged[-1] and len(final.learnings) == final.version
    assert len(acknowledged) > 10


@given(before=texts, word=st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True), after=st.lists(texts, max_size=3))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_archive_round_trips_any_text_and_finds_its_words_property(
        open_database: Callable[[], DatabaseStore], before: str, word: str, after: list[str]) -> None:
    """Any text (NUL characters included) comes back exactly; a word it contains finds it."""
    store = open_database()
    session = f"s{uuid.uuid4().hex}"
    group = [{"role": "user", "content": f"{before} {word} {before}"}, *[{"role": "assistant", "content": a}
                                                                        for a in after]]
    archive = store.session_archive(session)
    group_id = archive.put(group)
    assert group_id == retrieval_id(group) and archive.get(group_id) == group
    assert (group_id, group) in archive.search(word)
    row_ids = store.archive(session, group[:1])
    assert store.get(row_ids[0]) == group[0] and store.search(session, word)
    close(store)
