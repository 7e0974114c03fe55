"""The SQL skeleton shared by the SQLite and PostgreSQL stores: checkpoints with optimistic
concurrency (the rule of :mod:`ctxwindow.checkpoint.versioning`), and the archive of evicted
messages with text search. The logic is written once here, in :class:`SQLStore`; a small
:class:`SQLDialect` supplies what differs between databases: connections and transactions, how
writers of a session are serialized, placeholders and table names, how a JSON document is
stored, the text index and its queries, and the schema (in :mod:`ctxwindow.checkpoint.sqlite`
and :mod:`ctxwindow.checkpoint.postgres`).

Statements are written with ``?`` placeholders and ``{table}`` names (``{checkpoints}``,
``{corrupt}``, ``{archive}``); the dialect turns them into its own (:meth:`SQLDialect.sql`).

>>> query_phrases("deploy to eu-west-1 !!", limit=5)
['deploy', 'to', 'eu west 1']
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from ctxwindow.archive import Message, retrieval_id
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError, StaleCheckpointError

from .model import TaskCheckpoint, check_session
from .store import check_keep
from .versioning import loaded, newest_good, next_version, parse, retained_from

__all__ = [
    "ArchivedMessage",
    "Connection",
    "Cursor",
    "SQLDialect",
    "SQLStore",
    "SessionArchive",
    "consecutive_groups",
    "group_documents",
    "query_phrases",
]


class Cursor(Protocol):
    """The part of a DB-API cursor the skeleton reads (sqlite3's and psycopg's)."""

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """The part of a DB-API connection the skeleton uses (sqlite3's and psycopg's)."""

    def execute(self, statement: Any, parameters: Any = ..., /) -> Cursor:
        """Runs one statement with its parameters."""
        ...


ConnectionT = TypeVar("ConnectionT", bound=Connection)


class ArchivedMessage(NamedTuple):
    """One message row of the archive, as the skeleton hands it to
    :meth:`SQLDialect.insert_messages`."""

    row_id: str  #: ``f"{session_id}:{position}"``, what :meth:`SQLStore.get` takes
    session_id: str
    position: int  #: 1, 2, ... in the order the session archived its messages
    group_id: str  #: :func:`ctxwindow.archive.retrieval_id` of the message's group
    document: object  #: the message's JSON, as the dialect stores it (:meth:`SQLDialect.to_column`)
    archived_at: float
    message: Message  #: the message itself, for the text index


class SQLDialect(Protocol[ConnectionT]):
    """What differs between the databases under :class:`SQLStore`.

    The tables: ``{checkpoints}`` (session_id, version, saved_at, data), ``{corrupt}`` (the
    same and reason, found_at; primary key (session_id, version)), ``{archive}``
    (retrieval_id, session_id, position, group_id, message, archived_at) and a text index of
    the archive that only the dialect queries.
    """

    #: Where a corrupt version goes, for the report ("moved to table ...").
    set_aside_note: str

    def sql(self, template: str) -> Any:
        """``template`` (``?`` placeholders, ``{table}`` names and ``{bytewise}``, the
        collation that orders text by bytes) as this database's statement."""
        ...

    def read(self) -> AbstractContextManager[ConnectionT]:
        """A connection for reads, each statement on its own."""
        ...

    def snapshot(self) -> AbstractContextManager[ConnectionT]:
        """A connection in a read transaction that sees one snapshot; committed at the end."""
        ...

    def write(self, kind: str, session_id: str) -> AbstractContextManager[ConnectionT]:
        """A connection in a write transaction, committed at the end (rolled back when the body
        raises before committing), that no other writer of the session's ``kind``
        (``checkpoints`` or ``archive``) runs concurrently with, in any process."""
        ...

    def commit(self, connection: ConnectionT) -> None:
        """Commits the transaction of :meth:`write` early (the body then raises)."""
        ...

    def to_column(self, document: str) -> object:
        """A JSON document as this database stores it."""
        ...

    def from_column(self, value: Any) -> Any:
        """A stored document as ``str`` or ``bytes`` for :func:`json.loads` (a damaged value as
        it is)."""
        ...

    def insert_messages(self, connection: ConnectionT, rows: Sequence[ArchivedMessage]) -> None:
        """Inserts archive rows and indexes their text."""
        ...

    def matching_groups(self, connection: ConnectionT, session_id: str, phrases: Sequence[str],
                        limit: int) -> list[str]:
        """The ids of the session's groups containing any of the phrases, best first."""
        ...

    def matching_messages(self, connection: ConnectionT, session_id: str, phrases: Sequence[str],
                          limit: int) -> list[tuple[str, Any]]:
        """``(row_id, stored message)`` of the session's messages containing every phrase, best
        first."""
        ...


def group_documents(groups: Sequence[Sequence[Message]]) -> list[list[str]]:
    """The JSON text of each message of each group to archive; :class:`InvalidTypeError` when a
    message is not a JSON-serializable dict."""
    documents = []
    for group in groups:
        if not all(isinstance(m, dict) for m in group):
            raise InvalidTypeError("an archive stores message dicts")
        try:
            documents.append([json.dumps(m, ensure_ascii=False) for m in group])
        except (TypeError, ValueError) as error:
            raise InvalidTypeError(f"an archived message must be JSON-serializable: {error}") from None
    return documents


def consecutive_groups(rows: Iterable[tuple[str, Message]]) -> list[tuple[str, list[Message]]]:
    """``(group_id, message)`` rows in position order, gathered into groups."""
    groups: list[tuple[str, list[Message]]] = []
    for group_id, message in rows:
        if groups and groups[-1][0] == group_id:
            groups[-1][1].append(message)
        else:
            groups.append((group_id, [message]))
    return groups


def query_phrases(query: str, limit: int) -> list[str]:
    """The phrases of ``query``: each whitespace-separated word as its letters and digits
    separated by spaces (``eu-west-1`` -> ``eu west 1``); words without any are left out.
    :class:`InvalidArgumentError` for an empty query or a bad limit."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgumentError("query must be a non-empty str")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidArgumentError(f"limit must be an int >= 0, got {limit!r}")
    phrases = [" ".join(re.findall(r"\w+", word)) for word in query.split()]
    return [phrase for phrase in phrases if phrase]


class SQLStore(Generic[ConnectionT]):
    """Checkpoints of many sessions and the archive of their evicted messages in a SQL database,
    over a :class:`SQLDialect`: the logic of :class:`~ctxwindow.checkpoint.SQLiteCheckpointStore`
    and :class:`~ctxwindow.checkpoint.PostgresCheckpointStore`.

    - ``save``: the version check and the insert are one transaction that excludes the
      session's other writers, so concurrent writers never lose an update; a stale save raises
      :class:`StaleCheckpointError` and writes nothing. The ``keep`` newest good versions are
      kept. A corrupt row is moved to the ``{corrupt}`` table and reported in ``warnings``.
    - ``load`` reads one snapshot and takes no write lock unless it found a corrupt row.
    - The archive: ``archive``/``get``/``search``/``archiver`` by message, and
      ``session_archive(session)`` as a :class:`~ctxwindow.archive.MessageArchive` of groups.
    """

    def __init__(self, dialect: SQLDialect[ConnectionT], keep: int) -> None:
        self.keep = check_keep(keep)
        self.warnings: deque[str] = deque(maxlen=100)
        self._dialect = dialect

    # --- checkpoints -----------------------------------------------------------------------

    def _find_newest_good(self, connection: ConnectionT, session_id: str,
                          set_aside: Callable[[int, str], str]) -> TaskCheckpoint | None:
        sql, column = self._dialect.sql, self._dialect.from_column

        def reader(version: int) -> Callable[[], TaskCheckpoint | None]:
            def read() -> TaskCheckpoint | None:
                row = connection.execute(sql("SELECT data FROM {checkpoints} WHERE session_id = ? AND version = ?"),
                                         (session_id, version)).fetchone()
                return None if row is None else parse(column(row[0]), version)
            return read

        versions = [int(row[0]) for row in connection.execute(
            sql("SELECT version FROM {checkpoints} WHERE session_id = ? ORDER BY version DESC"), (session_id,))]
        return newest_good(session_id, ((v, f"version {v}", reader(v)) for v in versions), set_aside,
                           self.warnings)

    def _set_aside(self, connection: ConnectionT, session_id: str, version: int, reason: str) -> str:
        sql = self._dialect.sql
        connection.execute(
            sql("INSERT INTO {corrupt} SELECT session_id, version, saved_at, data, ?, ? FROM {checkpoints} "
                "WHERE session_id = ? AND version = ? ON CONFLICT (session_id, version) DO UPDATE SET "
                "saved_at = excluded.saved_at, data = excluded.data, reason = excluded.reason, "
                "found_at = excluded.found_at"),
            (reason.replace("\x00", "\\0"), time.time(), session_id, version))  # PostgreSQL text holds no NUL
        connection.execute(sql("DELETE FROM {checkpoints} WHERE session_id = ? AND version = ?"),
                           (session_id, version))
        return self._dialect.set_aside_note

    def save(self, checkpoint: TaskCheckpoint, session_id: str = "default") -> int:
        """Stores ``checkpoint`` as its next version (``checkpoint.version + 1`` unless a newer
        number was set aside as corrupt); returns it and updates ``checkpoint``.
        :class:`StaleCheckpointError` (nothing written) when the newest good version is newer
        than the one ``checkpoint`` is based on."""
        checkpoint.validate()
        check_session(session_id)
        sql = self._dialect.sql
        with self._dialect.write("checkpoints", session_id) as connection:
            newest = self._find_newest_good(
                connection, session_id, functools.partial(self._set_aside, connection, session_id))
            highest = connection.execute(
                sql("SELECT COALESCE(MAX(version), 0) FROM (SELECT version FROM {checkpoints} WHERE session_id = ? "
                    "UNION ALL SELECT version FROM {corrupt} WHERE session_id = ?) AS held"),
                (session_id, session_id)).fetchone()[0]
            try:
                version, saved_at, document = next_version(
                    checkpoint, newest.version if newest else 0, int(highest), session_id)
            except StaleCheckpointError:
                self._dialect.commit(connection)  # corrupt rows met stay set aside; this checkpoint is not written
                raise
            connection.execute(sql("INSERT INTO {checkpoints} VALUES (?, ?, ?, ?)"),
                               (session_id, version, saved_at, self._dialect.to_column(document)))
            kept = [int(row[0]) for row in connection.execute(
                sql("SELECT version FROM {checkpoints} WHERE session_id = ? ORDER BY version DESC LIMIT ?"),
                (session_id, self.keep))]
            retained = retained_from(kept, self.keep)
            if retained:
                for table in ("{checkpoints}", "{corrupt}"):
                    connection.execute(sql(f"DELETE FROM {table} WHERE session_id = ? AND version < ?"),
                                       (session_id, retained))
        checkpoint.version, checkpoint.saved_at = version, saved_at
        return version

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session, or None if it never had one. Corrupt
        rows are moved to the table of corrupt checkpoints and reported;
        :class:`CheckpointCorruptError` if no good one is left."""
        check_session(session_id)
        found: list[tuple[int, str]] = []

        def set_aside_later(version: int, reason: str) -> str:
            found.append((version, reason))
            return self._dialect.set_aside_note

        # One snapshot: concurrent saves may prune versions between the statements.
        with self._dialect.snapshot() as connection:
            checkpoint = self._find_newest_good(connection, session_id, set_aside_later)
            set_aside = int(connection.execute(self._dialect.sql("SELECT COUNT(*) FROM {corrupt} WHERE session_id = ?"),
                                               (session_id,)).fetchone()[0])
        if found:  # readers take no write lock unless they found something to set aside
            with self._dialect.write("checkpoints", session_id) as connection:
                for version, reason in found:
                    self._set_aside(connection, session_id, version, reason)
        return loaded(session_id, checkpoint, set_aside + len(found))

    def sessions(self) -> list[str]:
        """The sessions with checkpoints, in byte order."""
        with self._dialect.read() as connection:
            return [str(row[0]) for row in connection.execute(self._dialect.sql(
                "SELECT session_id FROM {checkpoints} GROUP BY session_id ORDER BY session_id{bytewise}"))]

    # --- the archive of evicted messages ---------------------------------------------------

    def _put_groups(self, session_id: str, groups: Sequence[Sequence[Message]]) -> list[tuple[str, str]]:
        """Stores the groups in one transaction; returns for each its retrieval id
        (:func:`ctxwindow.archive.retrieval_id`) and the id of its first message row,
        ``f"{session_id}:{position}"``. A group the session holds already is not stored again."""
        check_session(session_id)
        documents = [[self._dialect.to_column(text) for text in group] for group in group_documents(groups)]
        sql = self._dialect.sql
        ids = []
        with self._dialect.write("archive", session_id) as connection:
            position = int(connection.execute(
                sql("SELECT COALESCE(MAX(position), 0) FROM {archive} WHERE session_id = ?"),
                (session_id,)).fetchone()[0])
            for group, texts in zip(groups, documents):
                group_id = retrieval_id(group)
                stored = connection.execute(
                    sql("SELECT retrieval_id FROM {archive} WHERE session_id = ? AND group_id = ? "
                        "ORDER BY position LIMIT 1"), (session_id, group_id)).fetchone()
                if stored is not None:
                    ids.append((group_id, str(stored[0])))
                    continue
                ids.append((group_id, f"{session_id}:{position + 1}"))
                rows = []
                for message, document in zip(group, texts):
                    position += 1
                    rows.append(ArchivedMessage(f"{session_id}:{position}", session_id, position, group_id, document,
                                                time.time(), message))
                self._dialect.insert_messages(connection, rows)
        return ids

    def _message(self, value: Any) -> Message:
        message: Message = json.loads(self._dialect.from_column(value))
        return message

    def _group(self, connection: ConnectionT, session_id: str, group_id: str) -> list[Message] | None:
        rows = connection.execute(
            self._dialect.sql("SELECT message FROM {archive} WHERE session_id = ? AND group_id = ? ORDER BY position"),
            (session_id, group_id)).fetchall()
        return [self._message(row[0]) for row in rows] or None

    def _get_group(self, session_id: str, group_id: str) -> list[Message] | None:
        if not isinstance(group_id, str):
            raise InvalidTypeError(f"a retrieval id is a str, got {type(group_id).__name__}")
        with self._dialect.read() as connection:
            return self._group(connection, session_id, group_id)

    def _list_groups(self, session_id: str) -> list[tuple[str, list[Message]]]:
        with self._dialect.read() as connection:
            rows = connection.execute(
                self._dialect.sql("SELECT group_id, message FROM {archive} WHERE session_id = ? ORDER BY position"),
                (session_id,)).fetchall()
        return consecutive_groups((str(group_id), self._message(message)) for group_id, message in rows)

    def _search_groups(self, session_id: str, query: str, limit: int) -> list[tuple[str, list[Message]]]:
        phrases = query_phrases(query, limit)
        if not phrases:
            return []
        with self._dialect.read() as connection:
            group_ids = self._dialect.matching_groups(connection, session_id, phrases, limit)
            return [(group_id, self._group(connection, session_id, group_id) or []) for group_id in group_ids]

    def archive(self, session_id: str, messages: Sequence[Message]) -> list[str]:
        """Stores messages (evicted from a window), each as its own group; returns one id per
        message for :meth:`get` (``f"{session_id}:{n}"``; a message the session holds already
        keeps its id)."""
        return [row_id for _, row_id in self._put_groups(session_id, [[message] for message in messages])]

    def get(self, retrieval_id: str) -> Message | None:
        """The archived message with that id (of any session, as returned by :meth:`archive`
        and :meth:`search`), or None. Groups: ``session_archive``."""
        with self._dialect.read() as connection:
            row = connection.execute(self._dialect.sql("SELECT message FROM {archive} WHERE retrieval_id = ?"),
                                     (retrieval_id,)).fetchone()
        return self._message(row[0]) if row else None

    def search(self, session_id: str, query: str, limit: int = 10) -> list[tuple[str, Message]]:
        """Archived messages of the session containing every word of ``query``, best first:
        ``(retrieval_id, message)`` pairs."""
        check_session(session_id)
        phrases = query_phrases(query, limit)
        if not phrases:
            return []
        with self._dialect.read() as connection:
            rows = self._dialect.matching_messages(connection, session_id, phrases, limit)
        return [(str(row_id), self._message(message)) for row_id, message in rows]

    def archiver(self, session_id: str) -> Callable[..., None]:
        """An ``on_evict`` callback that archives every evicted message of a window."""
        check_session(session_id)

        def on_evict(evicted: Sequence[Message], *_: Any) -> None:
            self.archive(session_id, evicted)
        return on_evict


class SessionArchive:
    """One session's part of a :class:`SQLStore`'s archive, implementing
    :class:`~ctxwindow.archive.MessageArchive`: a group is named by
    :func:`ctxwindow.archive.retrieval_id` (as in every archive, so a placeholder's id resolves
    in whichever archive holds the group) and stored once per session."""

    def __init__(self, store: SQLStore[Any], session_id: str) -> None:
        self.store = store
        self.session_id = check_session(session_id)

    def put(self, messages: Sequence[Message]) -> str:
        """Stores the messages as one group (at least one message); returns its retrieval id."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not messages:
            raise InvalidArgumentError("an archive group is a non-empty sequence of message dicts")
        return self.store._put_groups(self.session_id, [messages])[0][0]

    def put_many(self, groups: Sequence[Sequence[Message]]) -> list[str]:
        """Stores groups in one transaction (each a non-empty sequence of messages); returns
        their retrieval ids."""
        if not all(isinstance(g, Sequence) and not isinstance(g, (str, bytes)) and g for g in groups):
            raise InvalidArgumentError("an archive group is a non-empty sequence of message dicts")
        return [rid for rid, _ in self.store._put_groups(self.session_id, groups)] if groups else []

    def get(self, retrieval_id: str) -> list[Message] | None:
        """The group stored under ``retrieval_id`` in this session, or None."""
        return self.store._get_group(self.session_id, retrieval_id)

    def search(self, query: str, limit: int = 10) -> list[tuple[str, list[Message]]]:
        """``(retrieval_id, messages)`` of the groups matching ``query``, best first."""
        return self.store._search_groups(self.session_id, query, limit)

    def groups(self) -> list[tuple[str, list[Message]]]:
        """Every group of this session, ``(retrieval_id, messages)``, oldest stored first."""
        return self.store._list_groups(self.session_id)
