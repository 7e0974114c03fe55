"""The PostgreSQL store: schema version, concurrent first opens, the search index, pools, bad
arguments, a missing driver, and server faults (restarts in the middle of a save and of its
COMMIT, and at random moments of a run of saves)."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ctxwindow import (
    CheckpointCommitUnknownError,
    CheckpointCorruptError,
    CheckpointStoreError,
    InvalidArgumentError,
    InvalidTypeError,
)
from ctxwindow.checkpoint import PG_SCHEMA_VERSION, PostgresCheckpointStore, TaskCheckpoint

from ..pg_server import PostgresServer
from .stores import pg_execute


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


def test_postgres_sessions_are_in_byte_order(pg_dsn: str) -> None:
    with PostgresCheckpointStore(pg_dsn) as store:
        for session in ("b", "a", "B", "_", "a.b", "A"):
            store.save(TaskCheckpoint(goal="g"), session)
        assert store.sessions() == sorted(["b", "a", "B", "_", "a.b", "A"])


PG_OPENER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import PostgresCheckpointStore, TaskCheckpoint
    name, dsns = sys.argv[1], sys.argv[2:]
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts at once
    for dsn in dsns:
        with PostgresCheckpointStore(dsn) as store:
            store.save(TaskCheckpoint(goal="g"), name)
""")


def test_postgres_concurrent_first_opens_do_not_collide(postgres_server: PostgresServer) -> None:
    dsns = [postgres_server.new_schema() for _ in range(4)]
    processes = [subprocess.Popen([sys.executable, "-c", PG_OPENER, f"p{i}", *dsns], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(6)]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    errors = [p.communicate("go\n", timeout=120)[1] for p in processes]
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
    with pytest.raises(InvalidArgumentError, match="timeout"):
        PostgresCheckpointStore("host=/nonexistent", timeout=float("nan"))
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


# --- server faults ---------------------------------------------------------------------------


class SignallingConnection:
    """A pooled connection that sets ``event`` just before it sends a statement containing
    ``marker`` (or, for the marker ``COMMIT``, before it commits); otherwise the connection it
    wraps."""

    def __init__(self, connection: Any, marker: str, event: threading.Event) -> None:
        self._connection = connection
        self._marker = marker
        self._event = event

    def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
        if self._marker in (query.decode() if isinstance(query, bytes) else str(query)):
            self._event.set()
        return self._connection.execute(query, params, **options)

    def commit(self) -> None:
        if self._marker == "COMMIT":
            self._event.set()
        self._connection.commit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def signal_before(store: PostgresCheckpointStore, marker: str, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set when the store is about to send ``marker`` to the server."""
    event = threading.Event()
    connection: Callable[..., Any] = store.pool.connection

    @contextlib.contextmanager
    def signalling(*args: Any, **kwargs: Any) -> Iterator[SignallingConnection]:
        with connection(*args, **kwargs) as pooled:
            yield SignallingConnection(pooled, marker, event)

    monkeypatch.setattr(store.pool, "connection", signalling)
    return event


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
        postgres_server: PostgresServer, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    with PostgresCheckpointStore(pg_dsn, timeout=20) as store:
        checkpoint = TaskCheckpoint(goal="g")
        store.save(checkpoint, "s")
        checkpoint.learnings.append("lost")
        locking = signal_before(store, "pg_advisory_xact_lock", monkeypatch)
        with psycopg.connect(pg_dsn, autocommit=True) as blocker:  # holds the session's lock: the save waits
            blocker.execute("SELECT pg_advisory_lock(hashtextextended('ctxwindow.checkpoints:s', 0))")
            thread, outcome = save_in_thread(store, checkpoint)
            assert locking.wait(timeout=20), "the save never asked for the session's lock"
            postgres_server.restart()
        thread.join(timeout=60)
        assert len(outcome) == 1 and isinstance(outcome[0], CheckpointStoreError), outcome
        assert not isinstance(outcome[0], CheckpointCommitUnknownError) and "nothing was written" in str(outcome[0])
        assert checkpoint.version == 1
        loaded = store.load("s")  # the pool replaced its broken connections
        assert loaded is not None and loaded.version == 1 and loaded.learnings == []
        assert store.save(checkpoint, "s") == 2


def test_postgres_connection_lost_during_commit_is_an_unknown_outcome_never_retried(
        postgres_server: PostgresServer, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with PostgresCheckpointStore(pg_dsn, timeout=20) as store:
        checkpoint = TaskCheckpoint(goal="g")
        store.save(checkpoint, "s")
        # A deferred trigger makes COMMIT itself take long: the restart lands while COMMIT is in flight.
        pg_execute(pg_dsn, "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
                           "$$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$")
        pg_execute(pg_dsn, "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON ctxwindow_checkpoints "
                           "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()")
        checkpoint.learnings.append("in flight")
        committing = signal_before(store, "COMMIT", monkeypatch)
        thread, outcome = save_in_thread(store, checkpoint)
        assert committing.wait(timeout=20), "the save never committed"
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
    """Saves in a loop while the server restarts at moments picked by the writer's progress (a
    random number of saves after the previous restart): every failure is a typed error, and
    each load holds a complete version no older than the last acknowledged one."""
    rng = random.Random(3)
    store = PostgresCheckpointStore(pg_dsn, timeout=20)
    progress = threading.Condition()  # notified on every acknowledged save and finished restart
    acknowledged = [0]
    restarts = [0]
    errors: list[CheckpointStoreError] = []
    bad: list[str] = []
    stop = threading.Event()

    def notify(change: Callable[[], None]) -> None:
        with progress:
            change()
            progress.notify_all()

    def load() -> TaskCheckpoint:
        while True:
            with progress:
                finished = restarts[0]
            try:
                return store.load("s") or TaskCheckpoint(goal="survive restarts")
            except CheckpointStoreError:
                with progress:  # the server is restarting: wait until that restart is over
                    progress.wait_for(lambda: restarts[0] > finished or stop.is_set(), timeout=60)

    def writer() -> None:
        try:
            checkpoint = load()
            while not stop.is_set():
                checkpoint.learnings.append("x" * 50)
                try:
                    version = store.save(checkpoint, "s")
                    notify(lambda: acknowledged.append(version))
                except CheckpointStoreError as error:
                    errors.append(error)
                    checkpoint = load()
                    if checkpoint.version < acknowledged[-1] or len(checkpoint.learnings) != checkpoint.version:
                        bad.append(f"after {error!r}: version {checkpoint.version}, acknowledged {acknowledged[-1]}")
        finally:
            notify(lambda: None)  # wakes the test thread if the writer died

    def saves_after(count: int) -> None:
        """Waits until the writer acknowledged ``count`` more saves."""
        with progress:
            target = len(acknowledged) + count
            assert progress.wait_for(lambda: len(acknowledged) >= target or not thread.is_alive(), timeout=60)
        assert thread.is_alive(), "the writer stopped"

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(6):
            saves_after(rng.randint(3, 8))  # saving again after the last restart
            postgres_server.restart()
            notify(lambda: restarts.__setitem__(0, restarts[0] + 1))
        saves_after(3)
    finally:
        stop.set()
        notify(lambda: None)
        thread.join(timeout=60)
    final = store.load("s")
    store.close()
    assert not bad, bad
    assert errors, "no save met a restart"
    print(f"{len(acknowledged) - 1} saves acknowledged, {len(errors)} failed:", sorted({type(e).__name__ for e in errors}))
    assert final is not None and final.version >= acknowledged[-1] and len(final.learnings) == final.version
    assert len(acknowledged) > 10
