"""The SQLite store: corrupt rows, the schema version and its migrations, concurrent first
opens, the archive's indexes, bad input."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxwindow import CheckpointCorruptError, InvalidArgumentError
from ctxwindow.archive import retrieval_id
from ctxwindow.checkpoint import SQL_SCHEMA_VERSION, PostgresCheckpointStore, SQLiteCheckpointStore, TaskCheckpoint

from ..window_checks import call, result
from .stores import make_store


def test_corrupt_sqlite_rows_fall_back(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    checkpoint = TaskCheckpoint(goal="good")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    with contextlib.closing(sqlite3.connect(tmp_path / "c.db")) as connection, connection:
        connection.execute("UPDATE checkpoints SET data = '{\"trunc' WHERE version = 2")
    loaded = store.load("s")
    assert loaded is not None and loaded.version == 1 and store.warnings


# --- schema, migration, concurrent first opens -------------------------------------------------

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
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts at once
    for index in range(count):
        SQLiteCheckpointStore(f"{folder}/db{index}.db").save(TaskCheckpoint(goal="g"), name)
""")


def test_concurrent_first_opens_do_not_collide(tmp_path: Path) -> None:
    processes = [subprocess.Popen([sys.executable, "-c", OPENER, str(tmp_path), "10", f"p{i}"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(6)]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    errors = [p.communicate("go\n", timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * 6, errors
    for index in range(10):
        path = tmp_path / f"db{index}.db"
        assert user_version(path) == SQL_SCHEMA_VERSION
        assert SQLiteCheckpointStore(path).sessions() == [f"p{i}" for i in range(6)]


# --- the archive's lookups by session use an index ----------------------------------------------


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
    assert not (tmp_path / "checkpoints.db").exists()
