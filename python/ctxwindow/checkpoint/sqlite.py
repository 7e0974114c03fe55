"""The SQLite store: :class:`SQLiteCheckpointStore` (the skeleton of :mod:`ctxwindow.checkpoint.sql`
over :class:`SQLiteDialect`), its schema and migrations, and :class:`SQLiteArchive`.

>>> import os, tempfile
>>> from ctxwindow.checkpoint import TaskCheckpoint
>>> with tempfile.TemporaryDirectory() as folder:
...     store = SQLiteCheckpointStore(os.path.join(folder, "checkpoints.db"))
...     version = store.save(TaskCheckpoint(goal="Migrate auth to OAuth"), "s1")
...     rid = store.session_archive("s1").put([{"role": "user", "content": "deploy to eu-west-1"}])
...     print(version, store.sessions(), store.session_archive("s1").search("eu-west-1")[0][0] == rid)
1 ['s1'] True
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ctxwindow.archive import archive_text, retrieval_id
from ctxwindow.errors import CheckpointCorruptError

from .sql import ArchivedMessage, SessionArchive, SQLStore

__all__ = ["SQL_SCHEMA_VERSION", "SQLiteArchive", "SQLiteCheckpointStore", "SQLiteDialect"]


def _name_version_1_groups(connection: sqlite3.Connection) -> None:
    """Version 1 archived each message alone under ``SESSION:N``; name each such group by its
    content (:func:`ctxwindow.archive.retrieval_id`) like every group archived since. The
    ``SESSION:N`` ids keep resolving through :meth:`SQLiteCheckpointStore.get`."""
    rows = connection.execute("SELECT retrieval_id, message FROM archive").fetchall()
    for row_id, message in rows:
        with contextlib.suppress(ValueError, TypeError, RecursionError):  # unreadable: keeps its row id
            connection.execute("UPDATE archive SET group_id = ? WHERE retrieval_id = ?",
                               (retrieval_id([json.loads(message)]), row_id))


#: Migrations of the SQLite schema: entry ``n`` takes a database from version ``n`` to ``n + 1``.
#: The version lives in ``PRAGMA user_version`` (version 1 kept it in a ``schema_version`` table).
_MIGRATIONS: tuple[tuple[str | Callable[[sqlite3.Connection], None], ...], ...] = (
    (  # 0 -> 1; IF NOT EXISTS: version 1 created its tables one autocommit statement at a time
        "CREATE TABLE IF NOT EXISTS checkpoints (session_id TEXT NOT NULL, version INTEGER NOT NULL, "
        "saved_at REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (session_id, version))",
        "CREATE TABLE IF NOT EXISTS archive (retrieval_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
        "position INTEGER NOT NULL, message TEXT NOT NULL, archived_at REAL NOT NULL)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS archive_text USING fts5(text, retrieval_id UNINDEXED, "
        "session_id UNINDEXED)",
    ),
    (  # 1 -> 2: corrupt versions set aside, archive groups, indexes by session, user_version
        "CREATE TABLE corrupt_checkpoints (session_id TEXT NOT NULL, version INTEGER NOT NULL, "
        "saved_at, data, reason TEXT NOT NULL, found_at REAL NOT NULL, PRIMARY KEY (session_id, version))",
        "ALTER TABLE archive ADD COLUMN group_id TEXT",
        "UPDATE archive SET group_id = retrieval_id",
        _name_version_1_groups,
        "CREATE INDEX archive_by_session ON archive (session_id, position)",
        "CREATE INDEX archive_by_group ON archive (session_id, group_id, position)",
        "DROP TABLE IF EXISTS schema_version",
    ),
)
SQL_SCHEMA_VERSION = len(_MIGRATIONS)
_TABLES = {"checkpoints": "checkpoints", "corrupt": "corrupt_checkpoints", "archive": "archive", "bytewise": ""}


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection, begin: str) -> Iterator[None]:
    """``begin`` ... COMMIT, or ROLLBACK when the body raises (unless it committed already)."""
    connection.execute(begin)
    try:
        yield
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _schema_version(connection: sqlite3.Connection) -> int:
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if version == 0 and connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone():
        version = int(connection.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0])
    return version


def _migrate(connection: sqlite3.Connection, path: str) -> None:
    """Creates or migrates the schema to :data:`SQL_SCHEMA_VERSION`;
    :class:`CheckpointCorruptError` for a newer one (nothing changed)."""
    def check(version: int) -> int:
        if version > SQL_SCHEMA_VERSION:
            raise CheckpointCorruptError(
                f"{path} has schema version {version}, newer than this ctxwindow ({SQL_SCHEMA_VERSION})")
        return version

    if check(_schema_version(connection)) == SQL_SCHEMA_VERSION:
        return
    if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        connection.execute("PRAGMA journal_mode=WAL")  # persistent; not allowed in a transaction
    with _transaction(connection, "BEGIN IMMEDIATE"):
        # Read again under the write lock: another process may have migrated meanwhile.
        for steps in _MIGRATIONS[check(_schema_version(connection)):]:
            for step in steps:
                if isinstance(step, str):
                    connection.execute(step)
                else:
                    step(connection)
        connection.execute(f"PRAGMA user_version = {SQL_SCHEMA_VERSION}")


class SQLiteDialect:
    """SQLite under :class:`~ctxwindow.checkpoint.sql.SQLStore`: a connection per operation
    (``connect``), ``BEGIN IMMEDIATE`` for writers (one writer per database at a time, across
    processes), a deferred ``BEGIN`` for snapshots, documents as ``TEXT``, and the archive's
    words in the FTS5 table ``archive_text`` ranked by BM25."""

    set_aside_note = "moved to table corrupt_checkpoints"

    def __init__(self, connect: Callable[[], AbstractContextManager[sqlite3.Connection]]) -> None:
        self._connect = connect
        self._statements: dict[str, str] = {}

    def sql(self, template: str) -> str:
        """``template`` with SQLite's table names (placeholders are ``?`` already)."""
        statement = self._statements.get(template)
        if statement is None:
            statement = self._statements[template] = template.format(**_TABLES)
        return statement

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit mode."""
        with self._connect() as connection:
            yield connection

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A connection in a deferred transaction (its first read fixes the snapshot)."""
        with self._connect() as connection, _transaction(connection, "BEGIN"):
            yield connection

    @contextlib.contextmanager
    def write(self, kind: str, session_id: str) -> Iterator[sqlite3.Connection]:
        """A connection holding the database's write lock (``BEGIN IMMEDIATE``)."""
        with self._connect() as connection, _transaction(connection, "BEGIN IMMEDIATE"):
            yield connection

    def commit(self, connection: sqlite3.Connection) -> None:
        """COMMIT now."""
        connection.execute("COMMIT")

    def to_column(self, document: str) -> object:
        """Documents are stored as TEXT."""
        return document

    def from_column(self, value: Any) -> Any:
        """As stored (a damaged row may hold any type)."""
        return value

    def insert_messages(self, connection: sqlite3.Connection, rows: Sequence[ArchivedMessage]) -> None:
        """One row in ``archive`` and one in the FTS5 table ``archive_text`` per message."""
        for row in rows:
            connection.execute(
                "INSERT INTO archive (retrieval_id, session_id, position, message, archived_at, group_id) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (row.row_id, row.session_id, row.position, row.document, row.archived_at, row.group_id))
            connection.execute("INSERT INTO archive_text VALUES (?, ?, ?)",
                               (archive_text(row.message), row.row_id, row.session_id))

    def matching_groups(self, connection: sqlite3.Connection, session_id: str, phrases: Sequence[str],
                        limit: int) -> list[str]:
        """Groups with any phrase, best BM25 rank first, newest first on ties."""
        return [row[0] for row in connection.execute(
            "SELECT a.group_id FROM archive_text t JOIN archive a ON a.retrieval_id = t.retrieval_id "
            "WHERE archive_text MATCH ? AND a.session_id = ? GROUP BY a.group_id "
            "ORDER BY MIN(t.rank), MAX(a.position) DESC LIMIT ?", (_match_expression(phrases, " OR "), session_id,
                                                                     limit))]

    def matching_messages(self, connection: sqlite3.Connection, session_id: str, phrases: Sequence[str],
                          limit: int) -> list[tuple[str, Any]]:
        """Messages with every phrase, best BM25 rank first."""
        rows: list[tuple[str, Any]] = connection.execute(
            "SELECT a.retrieval_id, a.message FROM archive_text t JOIN archive a "
            "ON a.retrieval_id = t.retrieval_id WHERE archive_text MATCH ? AND a.session_id = ? "
            "ORDER BY t.rank LIMIT ?", (_match_expression(phrases, " "), session_id, limit)).fetchall()
        return rows


def _match_expression(phrases: Sequence[str], joiner: str) -> str:
    """An FTS5 expression of the phrases (each quoted; they hold only letters, digits and
    spaces), joined with ``joiner``."""
    return joiner.join(f'"{phrase}"' for phrase in phrases)


class SQLiteCheckpointStore(SQLStore[sqlite3.Connection]):
    """Checkpoints of many sessions in one SQLite file (WAL), with the same versioning rules
    (the version check and the write are one transaction, so concurrent writers in threads or
    processes never lose an update; a corrupt row is moved to ``corrupt_checkpoints``), and the
    archive of evicted messages with full-text search (FTS5), indexed by session.

    The schema version is ``PRAGMA user_version``; opening migrates an older database (also one
    of version 1, which kept it in a ``schema_version`` table) in one ``BEGIN IMMEDIATE``
    transaction, so processes opening a new file at once do not collide."""

    def __init__(self, path: str | os.PathLike[str], keep: int = 20, timeout: float = 30.0) -> None:
        super().__init__(SQLiteDialect(self._connect), keep)
        self.path = str(path)
        self.timeout = timeout
        try:
            with self._connect() as connection:
                _migrate(connection, self.path)
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as error:  # "file is not a database" and the like
            raise CheckpointCorruptError(f"{self.path} is not a checkpoint database: {error}") from None

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            connection.execute("PRAGMA synchronous=FULL")
            yield connection
        finally:
            connection.close()

    def session_archive(self, session_id: str) -> SQLiteArchive:
        """The archive of one session as a :class:`~ctxwindow.archive.MessageArchive`: give it
        to a window (``ContextWindow(..., archive=store.session_archive("s"))``) and the
        retrieval ids of its placeholders resolve from this database, also after a restart."""
        return SQLiteArchive(self, session_id)


class SQLiteArchive(SessionArchive):
    """One session's part of a :class:`SQLiteCheckpointStore`'s archive, implementing
    :class:`~ctxwindow.archive.MessageArchive`: a group is named by
    :func:`ctxwindow.archive.retrieval_id` (as in every archive, so a placeholder's id resolves
    in whichever archive holds the group) and stored once per session. Search finds groups
    containing any query word (a word with inner punctuation, such as ``eu-west-1``, as a
    phrase), best BM25 rank first."""

    store: SQLiteCheckpointStore

    def __init__(self, store: SQLiteCheckpointStore, session_id: str) -> None:
        super().__init__(store, session_id)
