"""The PostgreSQL store (extra ``postgres``): :class:`PostgresCheckpointStore` (the skeleton of
:mod:`ctxwindow.checkpoint.sql` over :class:`PostgresDialect`), its schema and migrations, and
:class:`PostgresArchive`. psycopg is imported when a store is opened, not with this module, so
the package imports without it; opening a store without it raises
:class:`~ctxwindow.errors.MissingDependencyError` naming the extra.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ctxwindow.archive import Message, archive_text
from ctxwindow.errors import (
    CheckpointCommitUnknownError,
    CheckpointCorruptError,
    CheckpointStoreError,
    InvalidArgumentError,
    InvalidTypeError,
    MissingDependencyError,
)

from .sql import ArchivedMessage, SessionArchive, SQLStore
from .store import check_keep

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

    _Connection = Connection[tuple[Any, ...]]

__all__ = ["PG_SCHEMA_VERSION", "PG_SEARCH_CHARS", "PostgresArchive", "PostgresCheckpointStore", "PostgresDialect"]

#: Migrations of the PostgreSQL schema: entry ``n`` takes a database from version ``n`` to
#: ``n + 1``; the version is recorded in the table ``ctxwindow_schema``. Documents (checkpoints,
#: archived messages) are stored as UTF-8 JSON in ``bytea``, so strings holding NUL characters
#: (which ``text`` and ``jsonb`` refuse) and damaged documents are stored as they are.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 0 -> 1
        "CREATE TABLE ctxwindow_checkpoints (session_id text NOT NULL, version bigint NOT NULL, "
        "saved_at double precision NOT NULL, data bytea NOT NULL, PRIMARY KEY (session_id, version))",
        "CREATE TABLE ctxwindow_corrupt_checkpoints (session_id text NOT NULL, version bigint NOT NULL, "
        "saved_at double precision, data bytea, reason text NOT NULL, found_at double precision NOT NULL, "
        "PRIMARY KEY (session_id, version))",
        "CREATE TABLE ctxwindow_archive (retrieval_id text PRIMARY KEY, session_id text NOT NULL, "
        "position bigint NOT NULL, group_id text NOT NULL, message bytea NOT NULL, "
        "archived_at double precision NOT NULL, search tsvector NOT NULL)",
        "CREATE INDEX ctxwindow_archive_by_session ON ctxwindow_archive (session_id, position)",
        "CREATE INDEX ctxwindow_archive_by_group ON ctxwindow_archive (session_id, group_id, position)",
        "CREATE INDEX ctxwindow_archive_search ON ctxwindow_archive USING gin (search)",
    ),
)
PG_SCHEMA_VERSION = len(_MIGRATIONS)
#: The advisory lock key held while the schema is created or migrated.
_SCHEMA_LOCK = 0x6374_7877_0001
#: At most this many characters of a message's words are indexed (a tsvector holds < 1 MB).
PG_SEARCH_CHARS = 100_000
_TABLES = {"checkpoints": "ctxwindow_checkpoints", "corrupt": "ctxwindow_corrupt_checkpoints",
           "archive": "ctxwindow_archive", "bytewise": ' COLLATE "C"'}


def _postgres_modules() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as error:
        raise MissingDependencyError(
            f"PostgresCheckpointStore needs psycopg 3 and psycopg_pool ({error}): "
            "pip install 'ctxwindow[postgres]'") from None
    return psycopg, psycopg_pool


def _search_text(message: Message) -> str:
    """The words of a message's searchable text, separated by spaces (no NUL, no punctuation):
    the same words FTS5 indexes in the SQLite store."""
    return " ".join(re.findall(r"\w+", archive_text(message)))[:PG_SEARCH_CHARS]


def _tsquery(phrases: Sequence[str], joiner: str) -> str:
    """SQL for a tsquery of the phrases (one parameter each), joined with ``&&`` or ``||``."""
    return f" {joiner} ".join(["phraseto_tsquery('simple', %s)"] * len(phrases))


def _migrate(connection: _Connection) -> None:
    """Creates or migrates the schema to :data:`PG_SCHEMA_VERSION` under an advisory lock;
    :class:`CheckpointCorruptError` for a newer one (nothing changed)."""
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
    connection.execute("CREATE TABLE IF NOT EXISTS ctxwindow_schema (version integer NOT NULL)")
    row = connection.execute("SELECT MAX(version) FROM ctxwindow_schema").fetchone()
    version = int(row[0]) if row and row[0] is not None else 0
    if version > PG_SCHEMA_VERSION:
        raise CheckpointCorruptError(
            f"the database has ctxwindow schema version {version}, newer than this ctxwindow ({PG_SCHEMA_VERSION})")
    if version == PG_SCHEMA_VERSION:
        return
    for steps in _MIGRATIONS[version:]:
        for step in steps:
            connection.execute(step.encode())
    connection.execute("DELETE FROM ctxwindow_schema")
    connection.execute("INSERT INTO ctxwindow_schema VALUES (%s)", (PG_SCHEMA_VERSION,))


class PostgresDialect:
    """PostgreSQL under :class:`~ctxwindow.checkpoint.sql.SQLStore`: pooled connections, every
    operation one transaction whose server failures become typed errors, writers of a session
    serialized by an advisory lock (``ctxwindow.checkpoints:SESSION``,
    ``ctxwindow.archive:SESSION``), ``REPEATABLE READ`` snapshots, documents as ``bytea``, and
    the archive's words in a ``tsvector`` with a GIN index ranked by ``ts_rank``."""

    set_aside_note = "moved to table ctxwindow_corrupt_checkpoints"

    def __init__(self, pool: ConnectionPool[Any], psycopg: Any, pool_timeout: type[Exception],
                 timeout: float) -> None:
        self.pool = pool
        self.timeout = timeout
        self._psycopg = psycopg
        self._pool_timeout = pool_timeout
        self._statements: dict[str, bytes] = {}

    def sql(self, template: str) -> bytes:
        """``template`` with PostgreSQL's table names and ``%s`` placeholders."""
        statement = self._statements.get(template)
        if statement is None:
            statement = self._statements[template] = template.format(**_TABLES).replace("?", "%s").encode()
        return statement

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_Connection]:
        """One transaction on a pooled connection, then COMMIT. A server failure before COMMIT is
        a :class:`CheckpointStoreError` (the server rolled back); a connection lost once COMMIT
        was sent is a :class:`CheckpointCommitUnknownError`: never retried."""
        psycopg = self._psycopg
        committing = False
        try:
            with self.pool.connection() as connection:
                yield connection
                committing = True
                connection.commit()
        except self._pool_timeout as error:
            raise CheckpointStoreError(
                f"no connection to PostgreSQL within {self.timeout:g} s ({error}); nothing was written") from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as error:
            if committing:
                raise CheckpointCommitUnknownError(
                    f"the connection to PostgreSQL was lost after COMMIT was sent ({error}): the transaction "
                    "may or may not have been written; load the session to see which version it holds") from None
            raise CheckpointStoreError(
                f"PostgreSQL failed before the transaction committed ({error}); nothing was written") from None
        except psycopg.Error as error:
            raise CheckpointStoreError(f"PostgreSQL refused the transaction ({error}); nothing was written") from None

    def read(self) -> contextlib.AbstractContextManager[_Connection]:
        """A :meth:`transaction` (reads need no lock)."""
        return self.transaction()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[_Connection]:
        """A ``REPEATABLE READ`` :meth:`transaction`."""
        with self.transaction() as connection:
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield connection

    @contextlib.contextmanager
    def write(self, kind: str, session_id: str) -> Iterator[_Connection]:
        """A :meth:`transaction` holding the advisory lock of the session's ``kind`` until it ends."""
        with self.transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                               (f"ctxwindow.{kind}:{session_id}",))
            yield connection

    def commit(self, connection: _Connection) -> None:
        """COMMIT now."""
        connection.commit()

    def to_column(self, document: str) -> object:
        """Documents are stored as UTF-8 in ``bytea``."""
        return document.encode()

    def from_column(self, value: Any) -> Any:
        """The ``bytea`` value as bytes."""
        return bytes(value)

    def insert_messages(self, connection: _Connection, rows: Sequence[ArchivedMessage]) -> None:
        """The rows, each with the ``tsvector`` of its words (:data:`PG_SEARCH_CHARS` at most)."""
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO ctxwindow_archive (retrieval_id, session_id, position, group_id, message, "
                "archived_at, search) VALUES (%s, %s, %s, %s, %s, %s, to_tsvector('simple', %s))",
                [(row.row_id, row.session_id, row.position, row.group_id, row.document, row.archived_at,
                  _search_text(row.message)) for row in rows])

    def matching_groups(self, connection: _Connection, session_id: str, phrases: Sequence[str],
                        limit: int) -> list[str]:
        """Groups with any phrase, best ``ts_rank`` first, newest first on ties."""
        return [str(row[0]) for row in connection.execute(
            f"SELECT group_id FROM ctxwindow_archive, (SELECT {_tsquery(phrases, '||')} AS q) AS query "
            "WHERE session_id = %s AND search @@ q GROUP BY group_id "
            "ORDER BY MAX(ts_rank(search, q)) DESC, MAX(position) DESC LIMIT %s".encode(),
            (*phrases, session_id, limit))]

    def matching_messages(self, connection: _Connection, session_id: str, phrases: Sequence[str],
                          limit: int) -> list[tuple[str, Any]]:
        """Messages with every phrase, best ``ts_rank`` first, newest first on ties."""
        return [(str(row_id), message) for row_id, message in connection.execute(
            f"SELECT retrieval_id, message FROM ctxwindow_archive, (SELECT {_tsquery(phrases, '&&')} AS q) AS query "
            "WHERE session_id = %s AND search @@ q ORDER BY ts_rank(search, q) DESC, position DESC "
            "LIMIT %s".encode(), (*phrases, session_id, limit))]


class PostgresCheckpointStore(SQLStore["_Connection"]):
    """Checkpoints of many sessions, and the archive of evicted messages, in PostgreSQL: the
    contract of :class:`~ctxwindow.checkpoint.SQLiteCheckpointStore` for many agents on many
    machines sharing one database. Needs the ``postgres`` extra (psycopg 3 and psycopg_pool).

    ``dsn_or_pool`` is a connection string (``"postgresql://user@host/db"``, or
    ``"host=/run/postgresql dbname=agents"``), for which the store opens its own pool (of at most
    ``max_connections`` connections, each checked before use so that connections broken by a
    server restart are replaced; :meth:`close` closes it), or a ``psycopg_pool.ConnectionPool``
    you own (give it ``check=ConnectionPool.check_connection``). The tables are named
    ``ctxwindow_*`` and live in the connection's ``search_path``.

    - ``save``: the version check and the insert are one transaction, serialized per session by
      an advisory lock, so concurrent writers on any number of machines never lose an update; a
      stale save raises :class:`StaleCheckpointError` and writes nothing. The ``keep`` newest
      good versions are kept. A corrupt row is moved to ``ctxwindow_corrupt_checkpoints`` and
      reported in ``warnings``, as in the SQLite store.
    - Failures of the server are :class:`~ctxwindow.errors.CheckpointStoreError` (nothing was
      written). A save is never retried once COMMIT was sent: a connection lost then raises
      :class:`~ctxwindow.errors.CheckpointCommitUnknownError` (the save may or may not be
      stored; load to see).
    - The archive: ``archive``/``get``/``search``/``archiver`` as in the SQLite store, and
      ``session_archive(session)`` as a :class:`~ctxwindow.archive.MessageArchive`. Search is a
      ``tsvector`` (configuration ``simple``: no stemming, any language) with a GIN index,
      ranked by ``ts_rank``; the first :data:`PG_SEARCH_CHARS` characters of each message's
      words are indexed.
    - The schema version is recorded in ``ctxwindow_schema``; opening creates or migrates the
      schema in one transaction under an advisory lock, so processes opening a new database at
      once do not collide, and refuses a schema newer than this ctxwindow.
    """

    def __init__(self, dsn_or_pool: str | ConnectionPool[Any], keep: int = 20, timeout: float = 30.0,
                 max_connections: int = 10) -> None:
        psycopg, psycopg_pool = _postgres_modules()
        check_keep(keep)  # before the pool is opened
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise InvalidArgumentError(f"max_connections must be an int >= 1, got {max_connections!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidArgumentError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.timeout = float(timeout)
        if isinstance(dsn_or_pool, psycopg_pool.ConnectionPool):
            self.pool: ConnectionPool[Any] = dsn_or_pool
            self._owns_pool = False
        elif isinstance(dsn_or_pool, str):
            try:
                psycopg.conninfo.conninfo_to_dict(dsn_or_pool)
            except psycopg.ProgrammingError as error:
                raise InvalidArgumentError(f"not a PostgreSQL connection string: {error}") from None
            self.pool = psycopg_pool.ConnectionPool(
                dsn_or_pool, min_size=1, max_size=max_connections, open=True, timeout=self.timeout,
                check=psycopg_pool.ConnectionPool.check_connection, name="ctxwindow-checkpoints")
            self._owns_pool = True
        else:
            raise InvalidTypeError(
                f"dsn_or_pool must be a connection string or a psycopg_pool.ConnectionPool, "
                f"got {type(dsn_or_pool).__name__}")
        dialect = PostgresDialect(self.pool, psycopg, psycopg_pool.PoolTimeout, self.timeout)
        super().__init__(dialect, keep)
        try:
            with dialect.transaction() as connection:
                _migrate(connection)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Closes the pool the store opened (a pool given to it stays open)."""
        if self._owns_pool:
            self.pool.close()

    def __enter__(self) -> PostgresCheckpointStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def session_archive(self, session_id: str) -> PostgresArchive:
        """The archive of one session as a :class:`~ctxwindow.archive.MessageArchive`: give it
        to a window (``ContextWindow(..., archive=store.session_archive("s"))``) and the
        retrieval ids of its placeholders resolve from this database, from any machine."""
        return PostgresArchive(self, session_id)


class PostgresArchive(SessionArchive):
    """One session's part of a :class:`PostgresCheckpointStore`'s archive, implementing
    :class:`~ctxwindow.archive.MessageArchive` (groups named by
    :func:`ctxwindow.archive.retrieval_id`, stored once per session). Search finds groups
    containing any query word (a word with inner punctuation, such as ``eu-west-1``, as a
    phrase), best ``ts_rank`` first, newest first on ties."""

    store: PostgresCheckpointStore

    def __init__(self, store: PostgresCheckpointStore, session_id: str) -> None:
        super().__init__(store, session_id)
