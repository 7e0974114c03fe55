"""Checkpoints that survive crashes: versioned task state, file, SQLite and PostgreSQL stores, an
archive of evicted messages with full-text search, and the resume prompt.

The versioning rule (one implementation, :func:`_next_version`, shared by the stores):

- A checkpoint carries the version it was loaded at or last saved as (0 when new); saving
  updates the object.
- Staleness is judged against the newest *good* version: if the store holds a good version
  newer than the one the checkpoint is based on, :class:`StaleCheckpointError` and nothing of
  the checkpoint is written.
- A corrupt version (a document that does not parse as a checkpoint of its number) is set aside
  by the first load or save that meets it: the file store renames it ``v00000042.json.corrupt``,
  the SQLite store moves the row to ``corrupt_checkpoints`` (``ctxwindow_corrupt_checkpoints`` in
  PostgreSQL). It is reported (a logged warning,
  also kept in the store's ``warnings``), never read again, and never makes a save stale.
- A number is never reused: the version written is ``max(based on, highest number the session
  ever held, corrupt ones included) + 1``. Normally that is ``checkpoint.version + 1``; when
  version N was corrupt and load fell back to N - 1, the next save writes N + 1.
- ``load`` returns the newest good version, None for a session that never held one, and
  :class:`CheckpointCorruptError` when every version it held is corrupt.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     store = FileCheckpointStore(folder)
...     checkpoint = TaskCheckpoint(goal="Migrate auth to OAuth")
...     print(store.save(checkpoint, "s1"), store.load("s1").goal)
1 Migrate auth to OAuth
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import math
import os
import re
import sqlite3
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ctxwindow._native import Tokenizer
from ctxwindow.archive import archive_text, retrieval_id
from ctxwindow.errors import (
    CheckpointCommitUnknownError,
    CheckpointCorruptError,
    CheckpointStoreError,
    InvalidArgumentError,
    InvalidTypeError,
    MissingDependencyError,
    StaleCheckpointError,
)

__all__ = [
    "SUBTASK_STATUSES",
    "Subtask",
    "TaskCheckpoint",
    "FileCheckpointStore",
    "SQLiteCheckpointStore",
    "SQLiteArchive",
    "PostgresCheckpointStore",
    "PostgresArchive",
    "CheckpointStoreError",
    "CheckpointCommitUnknownError",
    "StaleCheckpointError",
    "CheckpointCorruptError",
    "bootstrap_prompt",
]

logger = logging.getLogger("ctxwindow")

SCHEMA = "ctxwindow.checkpoint/1"
SUBTASK_STATUSES = ("planned", "in_progress", "done")
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
Message = dict[str, Any]


@dataclass
class Subtask:
    """A step of the task."""

    title: str
    status: str = "planned"
    notes: str = ""


@dataclass
class TaskCheckpoint:
    """The state of a task across windows. ``version`` is the stored version this object was
    loaded at or last saved as (0 when new); ``saved_at`` is set by the store (epoch seconds)."""

    goal: str
    window_id: str = "default"
    version: int = 0
    success_criteria: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    subtasks: list[Subtask] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    open_issues: list[str] = field(default_factory=list)
    learnings: list[str] = field(default_factory=list)
    summary: str = ""
    saved_at: float | None = None
    #: A window's state (ContextWindow.checkpoint / resume); opaque to the stores.
    window_state: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.subtasks = [s if isinstance(s, Subtask) else Subtask(**s) for s in self.subtasks]
        self.validate()

    def validate(self) -> list[str]:
        """Raises :class:`InvalidArgumentError` for errors (no goal, invalid ids or versions,
        unknown statuses); returns warnings (remaining work but no current subtask)."""
        if not isinstance(self.goal, str) or not self.goal.strip():
            raise InvalidArgumentError("a checkpoint needs a goal")
        if not isinstance(self.window_id, str) or not _ID.match(self.window_id):
            raise InvalidArgumentError(
                f"window_id must be 1-128 characters of letters, digits and _.:-, got {self.window_id!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise InvalidArgumentError(f"version must be an int >= 0, got {self.version!r}")
        for name in ("success_criteria", "constraints", "decisions", "open_issues", "learnings"):
            values = getattr(self, name)
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise InvalidTypeError(f"{name} must be a list of str")
        for subtask in self.subtasks:
            if subtask.status not in SUBTASK_STATUSES:
                raise InvalidArgumentError(
                    f"subtask {subtask.title!r} has status {subtask.status!r}; known: {', '.join(SUBTASK_STATUSES)}")
        warnings = []
        planned = [s for s in self.subtasks if s.status == "planned"]
        current = [s for s in self.subtasks if s.status == "in_progress"]
        if planned and not current:
            warnings.append("remaining work but no current subtask: the next planned one is not started")
        if len(current) > 1:
            warnings.append(f"{len(current)} subtasks in progress at once")
        return warnings

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskCheckpoint:
        """Parses a stored checkpoint; :class:`CheckpointCorruptError` when it is not one."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise CheckpointCorruptError(f"not a {SCHEMA} document")
        fields = {k: v for k, v in data.items() if k != "schema"}
        try:
            return cls(**fields)
        except (TypeError, CheckpointCorruptError, InvalidArgumentError, InvalidTypeError) as error:
            raise CheckpointCorruptError(f"invalid checkpoint: {error}") from None

    def to_markdown(self) -> str:
        """A progress file for people."""
        marks = {"done": "[x]", "in_progress": "[~]", "planned": "[ ]"}
        lines = [f"# {self.goal}", "", f"version {self.version}, window {self.window_id}"]
        if self.saved_at:
            lines[-1] += time.strftime(", saved %Y-%m-%d %H:%M:%S UTC", time.gmtime(self.saved_at))
        for title, values in (("Success criteria", self.success_criteria), ("Constraints", self.constraints)):
            if values:
                lines += ["", f"## {title}", *[f"- {v}" for v in values]]
        if self.subtasks:
            lines += ["", "## Subtasks", *[f"- {marks[s.status]} {s.title}" + (f": {s.notes}" if s.notes else "")
                                           for s in self.subtasks]]
        for title, values in (("Decisions", self.decisions), ("Open issues", self.open_issues),
                              ("Learnings", self.learnings)):
            if values:
                lines += ["", f"## {title}", *[f"- {v}" for v in values]]
        if self.summary:
            lines += ["", "## Summary", self.summary]
        return "\n".join(lines) + "\n"


def _check_session(session_id: str) -> str:
    if not isinstance(session_id, str) or not _ID.match(session_id):
        raise InvalidArgumentError(
            f"session_id must be 1-128 characters of letters, digits and _.:-, got {session_id!r}")
    return session_id


def _group_documents(groups: Sequence[Sequence[Message]]) -> list[list[str]]:
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


# --- the versioning rule, shared by the stores ---------------------------------------------


def _parse(document: object, version: int) -> TaskCheckpoint:
    """The checkpoint stored as ``version``; :class:`CheckpointCorruptError` for anything else
    (not JSON, invalid UTF-8, another schema, an invalid checkpoint, another version number)."""
    if not isinstance(document, (str, bytes)):  # a damaged SQLite row may hold any type
        raise CheckpointCorruptError(f"holds a {type(document).__name__}, not a JSON document")
    try:
        data = json.loads(document)
    except (ValueError, RecursionError) as error:
        raise CheckpointCorruptError(f"not a JSON document: {error}") from None
    checkpoint = TaskCheckpoint.from_dict(data)
    if checkpoint.version != version:
        raise CheckpointCorruptError(f"holds version {checkpoint.version}")
    return checkpoint


def _report(warnings: deque[str], message: str) -> None:
    logger.warning("ctxwindow: %s", message)
    warnings.append(message)


def _newest_good(session_id: str,
                 candidates: Iterable[tuple[int, str, Callable[[], TaskCheckpoint | None]]],
                 set_aside: Callable[[int, str], str], warnings: deque[str]) -> TaskCheckpoint | None:
    """The first candidate ``(version, label, read)``, newest first, that reads as a good
    checkpoint, or None. Every corrupt candidate before it is set aside (``set_aside(version,
    reason)`` returns where it went) and reported: a logged warning, also kept in ``warnings``.
    ``read`` returns None for a version that vanished (pruned by a concurrent save)."""
    for version, label, read in candidates:
        try:
            checkpoint = read()
        except CheckpointCorruptError as error:
            where = set_aside(version, str(error))
            _report(warnings, f"checkpoint {label} of session {session_id!r} is corrupt ({error}); {where}")
            continue
        if checkpoint is not None:
            return checkpoint
    return None


def _loaded(session_id: str, checkpoint: TaskCheckpoint | None, set_aside: int) -> TaskCheckpoint | None:
    """What ``load`` returns: None only for a session that never held a version."""
    if checkpoint is None and set_aside:
        raise CheckpointCorruptError(
            f"no good checkpoint in session {session_id!r}: its {set_aside} stored version(s) are corrupt "
            "and set aside")
    return checkpoint


def _next_version(checkpoint: TaskCheckpoint, newest_good: int, highest: int,
                  session_id: str) -> tuple[int, float, str]:
    """The versioning rule (see the module docstring): the version to write, its time and its
    JSON document. ``newest_good`` is the session's newest good version (0 for none), ``highest``
    the highest number it ever held, corrupt versions set aside included (0 for none).

    :class:`StaleCheckpointError` when ``newest_good`` is newer than the version the checkpoint
    is based on; otherwise the version is ``max(checkpoint.version, highest) + 1``, so a number
    is never reused, not even one whose document turned out corrupt."""
    if newest_good > checkpoint.version:
        raise StaleCheckpointError(
            f"session {session_id!r} holds version {newest_good}, newer than version "
            f"{checkpoint.version} this checkpoint is based on; load it and retry")
    version, saved_at = max(checkpoint.version, highest) + 1, time.time()
    document = json.dumps({**checkpoint.to_dict(), "version": version, "saved_at": saved_at}, ensure_ascii=False)
    return version, saved_at, document


def _retained_from(good_versions: Sequence[int], keep: int) -> int:
    """The oldest version kept when the stores prune after a save: the ``keep`` newest good
    versions stay, and every version below the oldest of them (good or set aside) goes. Versions
    set aside that are newer stay, so the highest number ever written is never forgotten."""
    return sorted(good_versions)[-keep] if len(good_versions) >= keep else 0


# --- the file store ------------------------------------------------------------------------


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the file ``path`` across processes: ``fcntl.flock`` on POSIX,
    ``msvcrt.locking`` of its first byte on Windows. Imported here, not at module level, so the
    module imports on every platform."""
    with open(path, "a+b") as file:
        if sys.platform == "win32":
            import msvcrt

            file.seek(0)
            while True:
                try:
                    msvcrt.locking(file.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError as error:  # LK_LOCK gives up after 10 tries a second apart
                    if error.errno != errno.EDEADLOCK:
                        raise
            try:
                yield
            finally:
                file.seek(0)
                msvcrt.locking(file.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)


def _fsync_dir(path: Path) -> None:
    if sys.platform == "win32":
        return  # a folder cannot be opened to fsync it on Windows; NTFS journals the rename
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _atomic_write(path: Path, data: bytes) -> None:
    """Temporary file in the same folder, fsync, rename over the target, fsync the folder."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _fsync_dir(path.parent)


_VERSION_FILE = re.compile(r"^v(\d+)\.json(\.corrupt)?$")


def _version_file(version: int) -> str:
    return f"v{version:08d}.json"


class FileCheckpointStore:
    """Checkpoints as files: ``DIRECTORY/SESSION/v00000042.json`` (for machines) and
    ``progress.md`` (for people), written atomically; the last ``keep`` good versions are kept.
    A corrupt or truncated version file is renamed ``v00000042.json.corrupt`` (never read again)
    and reported (a logged warning, also kept in ``warnings``, the last 100); the newest good
    version is loaded instead and the next save succeeds (see the module docstring). Safe across
    threads and processes (a lock file per session)."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 5) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise InvalidArgumentError(f"keep must be an int >= 1, got {keep!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        self.warnings: deque[str] = deque(maxlen=100)
        self._lock = threading.Lock()

    def _session(self, session_id: str) -> Path:
        path = self.directory / _check_session(session_id)
        path.mkdir(exist_ok=True)
        return path

    @contextlib.contextmanager
    def _locked(self, folder: Path) -> Iterator[None]:
        with self._lock, _exclusive_lock(folder / ".lock"):
            yield

    @staticmethod
    def _listing(folder: Path) -> tuple[list[int], list[int]]:
        """The session's stored versions and its versions set aside as corrupt, ascending."""
        stored: list[int] = []
        set_aside: list[int] = []
        for path in folder.iterdir():
            match = _VERSION_FILE.match(path.name)
            if match:
                (set_aside if match[2] else stored).append(int(match[1]))
        return sorted(stored), sorted(set_aside)

    def _find_newest_good(self, folder: Path, session_id: str) -> TaskCheckpoint | None:
        """The newest good version; corrupt newer ones are set aside (call with the lock held)."""
        def reader(version: int) -> Callable[[], TaskCheckpoint | None]:
            def read() -> TaskCheckpoint | None:
                try:
                    document = (folder / _version_file(version)).read_bytes()
                except FileNotFoundError:
                    return None
                return _parse(document, version)
            return read

        def set_aside(version: int, reason: str) -> str:
            name = _version_file(version)
            with contextlib.suppress(FileNotFoundError):
                os.replace(folder / name, folder / f"{name}.corrupt")
            return f"moved aside to {name}.corrupt"

        stored, _ = self._listing(folder)
        candidates = ((v, _version_file(v), reader(v)) for v in reversed(stored))
        return _newest_good(session_id, candidates, set_aside, self.warnings)

    def save(self, checkpoint: TaskCheckpoint, session_id: str = "default") -> int:
        """Stores ``checkpoint`` as its next version (``checkpoint.version + 1`` unless a newer
        number was set aside as corrupt); returns it and updates ``checkpoint``.
        :class:`StaleCheckpointError` (nothing written) when the newest good version is newer
        than the one ``checkpoint`` is based on."""
        checkpoint.validate()
        folder = self._session(session_id)
        with self._locked(folder):
            newest = self._find_newest_good(folder, session_id)
            stored, set_aside = self._listing(folder)
            version, saved_at, document = _next_version(
                checkpoint, newest.version if newest else 0, max(stored + set_aside, default=0), session_id)
            _atomic_write(folder / _version_file(version), document.encode())
            checkpoint.version, checkpoint.saved_at = version, saved_at
            _atomic_write(folder / "progress.md", checkpoint.to_markdown().encode())
            retained = _retained_from([*stored, version], self.keep)
            for old in [_version_file(v) for v in stored if v < retained] + [
                    f"{_version_file(v)}.corrupt" for v in set_aside if v < retained]:
                with contextlib.suppress(FileNotFoundError):
                    (folder / old).unlink()
        return version

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session, or None if it never had one. Corrupt
        versions are set aside and reported; :class:`CheckpointCorruptError` if no good one is
        left."""
        folder = self.directory / _check_session(session_id)
        if not folder.is_dir():
            return None
        with self._locked(folder):
            checkpoint = self._find_newest_good(folder, session_id)
            return _loaded(session_id, checkpoint, len(self._listing(folder)[1]))


# --- the SQLite store ----------------------------------------------------------------------

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
_SET_ASIDE = "moved to table corrupt_checkpoints"


class SQLiteCheckpointStore:
    """Checkpoints of many sessions in one SQLite file (WAL), with the same versioning rules
    (the version check and the write are one transaction, so concurrent writers in threads or
    processes never lose an update; a corrupt row is moved to ``corrupt_checkpoints``), and the
    archive of evicted messages with full-text search (FTS5), indexed by session.

    The schema version is ``PRAGMA user_version``; opening migrates an older database (also one
    of version 1, which kept it in a ``schema_version`` table) in one ``BEGIN IMMEDIATE``
    transaction, so processes opening a new file at once do not collide."""

    def __init__(self, path: str | os.PathLike[str], keep: int = 20, timeout: float = 30.0) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise InvalidArgumentError(f"keep must be an int >= 1, got {keep!r}")
        self.path = str(path)
        self.keep = keep
        self.timeout = timeout
        self.warnings: deque[str] = deque(maxlen=100)
        try:
            with self._connect() as connection:
                self._migrate(connection)
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as error:  # "file is not a database" and the like
            raise CheckpointCorruptError(f"{self.path} is not a checkpoint database: {error}") from None

    @staticmethod
    def _schema_version(connection: sqlite3.Connection) -> int:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if version == 0 and connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone():
            version = int(connection.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0])
        return version

    def _migrate(self, connection: sqlite3.Connection) -> None:
        def check(version: int) -> int:
            if version > SQL_SCHEMA_VERSION:
                raise CheckpointCorruptError(
                    f"{self.path} has schema version {version}, newer than this ctxwindow ({SQL_SCHEMA_VERSION})")
            return version

        if check(self._schema_version(connection)) == SQL_SCHEMA_VERSION:
            return
        if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            connection.execute("PRAGMA journal_mode=WAL")  # persistent; not allowed in a transaction
        with _transaction(connection, "BEGIN IMMEDIATE"):
            # Read again under the write lock: another process may have migrated meanwhile.
            for steps in _MIGRATIONS[check(self._schema_version(connection)):]:
                for step in steps:
                    if isinstance(step, str):
                        connection.execute(step)
                    else:
                        step(connection)
            connection.execute(f"PRAGMA user_version = {SQL_SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            connection.execute("PRAGMA synchronous=FULL")
            yield connection
        finally:
            connection.close()

    def _find_newest_good(self, connection: sqlite3.Connection, session_id: str,
                          set_aside: Callable[[int, str], str]) -> TaskCheckpoint | None:
        def reader(version: int) -> Callable[[], TaskCheckpoint | None]:
            def read() -> TaskCheckpoint | None:
                row = connection.execute("SELECT data FROM checkpoints WHERE session_id = ? AND version = ?",
                                         (session_id, version)).fetchone()
                return None if row is None else _parse(row[0], version)
            return read

        versions = [row[0] for row in connection.execute(
            "SELECT version FROM checkpoints WHERE session_id = ? ORDER BY version DESC", (session_id,))]
        return _newest_good(session_id, ((v, f"version {v}", reader(v)) for v in versions), set_aside,
                            self.warnings)

    @staticmethod
    def _set_aside(connection: sqlite3.Connection, session_id: str, version: int, reason: str) -> str:
        connection.execute(
            "INSERT OR REPLACE INTO corrupt_checkpoints SELECT session_id, version, saved_at, data, ?, ? "
            "FROM checkpoints WHERE session_id = ? AND version = ?", (reason, time.time(), session_id, version))
        connection.execute("DELETE FROM checkpoints WHERE session_id = ? AND version = ?", (session_id, version))
        return _SET_ASIDE

    def save(self, checkpoint: TaskCheckpoint, session_id: str = "default") -> int:
        """Stores ``checkpoint`` as its next version (``checkpoint.version + 1`` unless a newer
        number was set aside as corrupt); returns it and updates ``checkpoint``.
        :class:`StaleCheckpointError` (nothing written) when the newest good version is newer
        than the one ``checkpoint`` is based on."""
        checkpoint.validate()
        _check_session(session_id)
        with self._connect() as connection, _transaction(connection, "BEGIN IMMEDIATE"):
            newest = self._find_newest_good(
                connection, session_id, functools.partial(self._set_aside, connection, session_id))
            highest = connection.execute(
                "SELECT MAX(COALESCE((SELECT MAX(version) FROM checkpoints WHERE session_id = ?), 0), "
                "COALESCE((SELECT MAX(version) FROM corrupt_checkpoints WHERE session_id = ?), 0))",
                (session_id, session_id)).fetchone()[0]
            try:
                version, saved_at, document = _next_version(
                    checkpoint, newest.version if newest else 0, highest, session_id)
            except StaleCheckpointError:
                connection.execute("COMMIT")  # corrupt rows met stay set aside; this checkpoint is not written
                raise
            connection.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?)", (session_id, version, saved_at, document))
            kept = [row[0] for row in connection.execute(
                "SELECT version FROM checkpoints WHERE session_id = ? ORDER BY version DESC LIMIT ?",
                (session_id, self.keep))]
            retained = _retained_from(kept, self.keep)
            for table in ("checkpoints", "corrupt_checkpoints"):
                connection.execute(f"DELETE FROM {table} WHERE session_id = ? AND version < ?", (session_id, retained))
        checkpoint.version, checkpoint.saved_at = version, saved_at
        return version

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session, or None if it never had one. Corrupt
        rows are moved to ``corrupt_checkpoints`` and reported; :class:`CheckpointCorruptError`
        if no good one is left."""
        _check_session(session_id)
        found: list[tuple[int, str]] = []

        def set_aside_later(version: int, reason: str) -> str:
            found.append((version, reason))
            return _SET_ASIDE

        with self._connect() as connection:
            with _transaction(connection, "BEGIN"):  # one snapshot: concurrent saves may prune
                checkpoint = self._find_newest_good(connection, session_id, set_aside_later)
                set_aside = connection.execute("SELECT COUNT(*) FROM corrupt_checkpoints WHERE session_id = ?",
                                               (session_id,)).fetchone()[0]
            if found:  # readers take no write lock unless they found something to set aside
                with _transaction(connection, "BEGIN IMMEDIATE"):
                    for version, reason in found:
                        self._set_aside(connection, session_id, version, reason)
        return _loaded(session_id, checkpoint, set_aside + len(found))

    def sessions(self) -> list[str]:
        """The sessions with checkpoints."""
        with self._connect() as connection:
            return [row[0] for row in connection.execute(
                "SELECT DISTINCT session_id FROM checkpoints ORDER BY session_id")]

    # --- the archive of evicted messages --------------------------------------------------

    def session_archive(self, session_id: str) -> SQLiteArchive:
        """The archive of one session as a :class:`~ctxwindow.archive.MessageArchive`: give it
        to a window (``ContextWindow(..., archive=store.session_archive("s"))``) and the
        retrieval ids of its placeholders resolve from this database, also after a restart."""
        return SQLiteArchive(self, session_id)

    def _put_groups(self, session_id: str, groups: Sequence[Sequence[Message]]) -> list[tuple[str, str]]:
        """Stores the groups in one transaction; returns for each its retrieval id
        (:func:`ctxwindow.archive.retrieval_id`) and the id of its first message row,
        ``f"{session_id}:{position}"``. A group the session holds already is not stored again."""
        _check_session(session_id)
        documents = _group_documents(groups)
        ids = []
        with self._connect() as connection, _transaction(connection, "BEGIN IMMEDIATE"):
            position = connection.execute("SELECT COALESCE(MAX(position), 0) FROM archive WHERE session_id = ?",
                                          (session_id,)).fetchone()[0]
            for group, group_documents in zip(groups, documents):
                group_id = retrieval_id(group)
                stored = connection.execute(
                    "SELECT retrieval_id FROM archive WHERE session_id = ? AND group_id = ? ORDER BY position LIMIT 1",
                    (session_id, group_id)).fetchone()
                if stored is not None:
                    ids.append((group_id, stored[0]))
                    continue
                ids.append((group_id, f"{session_id}:{position + 1}"))
                for message, document in zip(group, group_documents):
                    position += 1
                    row_id = f"{session_id}:{position}"
                    connection.execute(
                        "INSERT INTO archive (retrieval_id, session_id, position, message, archived_at, group_id) "
                        "VALUES (?, ?, ?, ?, ?, ?)", (row_id, session_id, position, document, time.time(), group_id))
                    connection.execute("INSERT INTO archive_text VALUES (?, ?, ?)",
                                       (archive_text(message), row_id, session_id))
        return ids

    def _get_group(self, session_id: str, group_id: str) -> list[Message] | None:
        if not isinstance(group_id, str):
            raise InvalidTypeError(f"a retrieval id is a str, got {type(group_id).__name__}")
        with self._connect() as connection:
            return _group(connection, session_id, group_id)

    def _list_groups(self, session_id: str) -> list[tuple[str, list[Message]]]:
        with self._connect() as connection:
            rows = connection.execute("SELECT group_id, message FROM archive WHERE session_id = ? ORDER BY position",
                                      (session_id,)).fetchall()
        return _consecutive_groups((group_id, json.loads(message)) for group_id, message in rows)

    def _search_groups(self, session_id: str, query: str, limit: int) -> list[tuple[str, list[Message]]]:
        expression = _match_expression(query, limit, " OR ")
        if not expression:
            return []
        with self._connect() as connection:
            group_ids = [row[0] for row in connection.execute(
                "SELECT a.group_id FROM archive_text t JOIN archive a ON a.retrieval_id = t.retrieval_id "
                "WHERE archive_text MATCH ? AND a.session_id = ? GROUP BY a.group_id "
                "ORDER BY MIN(t.rank), MAX(a.position) DESC LIMIT ?", (expression, session_id, limit))]
            return [(group_id, _group(connection, session_id, group_id) or []) for group_id in group_ids]

    def archive(self, session_id: str, messages: Sequence[Message]) -> list[str]:
        """Stores messages (evicted from a window), each as its own group; returns one id per
        message for :meth:`get` (``f"{session_id}:{n}"``; a message the session holds already
        keeps its id)."""
        return [row_id for _, row_id in self._put_groups(session_id, [[message] for message in messages])]

    def get(self, retrieval_id: str) -> Message | None:
        """The archived message with that id (of any session, as returned by :meth:`archive`
        and :meth:`search`), or None. Groups: :meth:`session_archive`."""
        with self._connect() as connection:
            row = connection.execute("SELECT message FROM archive WHERE retrieval_id = ?",
                                     (retrieval_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def search(self, session_id: str, query: str, limit: int = 10) -> list[tuple[str, Message]]:
        """Archived messages of the session containing every word of ``query``, best first:
        ``(retrieval_id, message)`` pairs."""
        _check_session(session_id)
        expression = _match_expression(query, limit, " ")
        if not expression:
            return []
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT a.retrieval_id, a.message FROM archive_text t JOIN archive a "
                "ON a.retrieval_id = t.retrieval_id WHERE archive_text MATCH ? AND a.session_id = ? "
                "ORDER BY t.rank LIMIT ?", (expression, session_id, limit)).fetchall()
        return [(retrieval_id, json.loads(message)) for retrieval_id, message in rows]

    def archiver(self, session_id: str) -> Callable[..., None]:
        """An ``on_evict`` callback that archives every evicted message of a window."""
        _check_session(session_id)

        def on_evict(evicted: Sequence[Message], *_: Any) -> None:
            self.archive(session_id, evicted)
        return on_evict


class _GroupStore(Protocol):
    """What a session archive needs of its store (the SQLite and PostgreSQL stores)."""

    def _put_groups(self, session_id: str, groups: Sequence[Sequence[Message]]) -> list[tuple[str, str]]: ...

    def _get_group(self, session_id: str, group_id: str) -> list[Message] | None: ...

    def _search_groups(self, session_id: str, query: str, limit: int) -> list[tuple[str, list[Message]]]: ...

    def _list_groups(self, session_id: str) -> list[tuple[str, list[Message]]]: ...


class _StoreArchive:
    """One session's part of a store's archive, implementing
    :class:`~ctxwindow.archive.MessageArchive`: a group is named by
    :func:`ctxwindow.archive.retrieval_id` (as in every archive, so a placeholder's id resolves
    in whichever archive holds the group) and stored once per session."""

    def __init__(self, store: _GroupStore, session_id: str) -> None:
        self.store = store
        self.session_id = _check_session(session_id)

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


class SQLiteArchive(_StoreArchive):
    """One session's part of a :class:`SQLiteCheckpointStore`'s archive, implementing
    :class:`~ctxwindow.archive.MessageArchive`: a group is named by
    :func:`ctxwindow.archive.retrieval_id` (as in every archive, so a placeholder's id resolves
    in whichever archive holds the group) and stored once per session. Search finds groups
    containing any query word (a word with inner punctuation, such as ``eu-west-1``, as a
    phrase), best BM25 rank first."""

    store: SQLiteCheckpointStore

    def __init__(self, store: SQLiteCheckpointStore, session_id: str) -> None:
        super().__init__(store, session_id)


def _consecutive_groups(rows: Iterable[tuple[str, Message]]) -> list[tuple[str, list[Message]]]:
    """``(group_id, message)`` rows in position order, gathered into groups."""
    groups: list[tuple[str, list[Message]]] = []
    for group_id, message in rows:
        if groups and groups[-1][0] == group_id:
            groups[-1][1].append(message)
        else:
            groups.append((group_id, [message]))
    return groups


def _group(connection: sqlite3.Connection, session_id: str, group_id: str) -> list[Message] | None:
    rows = connection.execute("SELECT message FROM archive WHERE session_id = ? AND group_id = ? ORDER BY position",
                              (session_id, group_id)).fetchall()
    return [json.loads(row[0]) for row in rows] or None


def _match_expression(query: str, limit: int, joiner: str) -> str:
    """An FTS5 expression of the words of ``query`` (each whitespace-separated word a quoted
    phrase of its letters and digits), joined with ``joiner``; "" when it has none."""
    return joiner.join(f'"{phrase}"' for phrase in _query_phrases(query, limit))


def _query_phrases(query: str, limit: int) -> list[str]:
    """The phrases of ``query``: each whitespace-separated word as its letters and digits
    separated by spaces (``eu-west-1`` -> ``eu west 1``); words without any are left out.
    :class:`InvalidArgumentError` for an empty query or a bad limit."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgumentError("query must be a non-empty str")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidArgumentError(f"limit must be an int >= 0, got {limit!r}")
    phrases = [" ".join(re.findall(r"\w+", word)) for word in query.split()]
    return [phrase for phrase in phrases if phrase]


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


# --- the PostgreSQL store (extra ``postgres``) ----------------------------------------------

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

    _Connection = Connection[tuple[Any, ...]]

_T = TypeVar("_T")

#: Migrations of the PostgreSQL schema: entry ``n`` takes a database from version ``n`` to
#: ``n + 1``; the version is recorded in the table ``ctxwindow_schema``. Documents (checkpoints,
#: archived messages) are stored as UTF-8 JSON in ``bytea``, so strings holding NUL characters
#: (which ``text`` and ``jsonb`` refuse) and damaged documents are stored as they are.
_PG_MIGRATIONS: tuple[tuple[str, ...], ...] = (
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
PG_SCHEMA_VERSION = len(_PG_MIGRATIONS)
#: The advisory lock key held while the schema is created or migrated.
_PG_SCHEMA_LOCK = 0x6374_7877_0001
#: At most this many characters of a message's words are indexed (a tsvector holds < 1 MB).
PG_SEARCH_CHARS = 100_000
_PG_SET_ASIDE = "moved to table ctxwindow_corrupt_checkpoints"


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


class PostgresCheckpointStore:
    """Checkpoints of many sessions, and the archive of evicted messages, in PostgreSQL: the
    contract of :class:`SQLiteCheckpointStore` for many agents on many machines sharing one
    database. Needs the ``postgres`` extra (psycopg 3 and psycopg_pool).

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
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise InvalidArgumentError(f"keep must be an int >= 1, got {keep!r}")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise InvalidArgumentError(f"max_connections must be an int >= 1, got {max_connections!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidArgumentError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.keep = keep
        self.timeout = float(timeout)
        self.warnings: deque[str] = deque(maxlen=100)
        self._psycopg = psycopg
        self._pool_timeout = psycopg_pool.PoolTimeout
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
        try:
            self._run(self._migrate)
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

    # --- transactions ----------------------------------------------------------------------

    def _run(self, body: Callable[[_Connection], _T]) -> _T:
        """``body`` in one transaction on a pooled connection, then COMMIT. A server failure
        before COMMIT is a :class:`CheckpointStoreError` (the server rolled back); a connection
        lost once COMMIT was sent is a :class:`CheckpointCommitUnknownError`: never retried."""
        psycopg = self._psycopg
        committing = False
        try:
            with self.pool.connection() as connection:
                result = body(connection)
                committing = True
                connection.commit()
                return result
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

    def _migrate(self, connection: _Connection) -> None:
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SCHEMA_LOCK,))
        connection.execute("CREATE TABLE IF NOT EXISTS ctxwindow_schema (version integer NOT NULL)")
        row = connection.execute("SELECT MAX(version) FROM ctxwindow_schema").fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > PG_SCHEMA_VERSION:
            raise CheckpointCorruptError(
                f"the database has ctxwindow schema version {version}, newer than this ctxwindow "
                f"({PG_SCHEMA_VERSION})")
        if version == PG_SCHEMA_VERSION:
            return
        for steps in _PG_MIGRATIONS[version:]:
            for step in steps:
                connection.execute(step.encode())
        connection.execute("DELETE FROM ctxwindow_schema")
        connection.execute("INSERT INTO ctxwindow_schema VALUES (%s)", (PG_SCHEMA_VERSION,))

    @staticmethod
    def _lock_session(connection: _Connection, kind: str, session_id: str) -> None:
        """Serializes the writers of one session (``kind``: checkpoints or archive) until the
        transaction ends."""
        connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                           (f"ctxwindow.{kind}:{session_id}",))

    # --- checkpoints -----------------------------------------------------------------------

    def _find_newest_good(self, connection: _Connection, session_id: str,
                          set_aside: Callable[[int, str], str]) -> TaskCheckpoint | None:
        def reader(version: int) -> Callable[[], TaskCheckpoint | None]:
            def read() -> TaskCheckpoint | None:
                row = connection.execute(
                    "SELECT data FROM ctxwindow_checkpoints WHERE session_id = %s AND version = %s",
                    (session_id, version)).fetchone()
                return None if row is None else _parse(bytes(row[0]), version)
            return read

        versions = [int(row[0]) for row in connection.execute(
            "SELECT version FROM ctxwindow_checkpoints WHERE session_id = %s ORDER BY version DESC", (session_id,))]
        return _newest_good(session_id, ((v, f"version {v}", reader(v)) for v in versions), set_aside,
                            self.warnings)

    @staticmethod
    def _set_aside(connection: _Connection, session_id: str, version: int, reason: str) -> str:
        connection.execute(
            "INSERT INTO ctxwindow_corrupt_checkpoints SELECT session_id, version, saved_at, data, %s, %s "
            "FROM ctxwindow_checkpoints WHERE session_id = %s AND version = %s "
            "ON CONFLICT (session_id, version) DO UPDATE SET saved_at = EXCLUDED.saved_at, data = EXCLUDED.data, "
            "reason = EXCLUDED.reason, found_at = EXCLUDED.found_at",
            (reason.replace("\x00", "\\0"), time.time(), session_id, version))
        connection.execute("DELETE FROM ctxwindow_checkpoints WHERE session_id = %s AND version = %s",
                           (session_id, version))
        return _PG_SET_ASIDE

    def save(self, checkpoint: TaskCheckpoint, session_id: str = "default") -> int:
        """Stores ``checkpoint`` as its next version (``checkpoint.version + 1`` unless a newer
        number was set aside as corrupt); returns it and updates ``checkpoint``.
        :class:`StaleCheckpointError` (nothing written) when the newest good version is newer
        than the one ``checkpoint`` is based on; :class:`CheckpointStoreError` (nothing written)
        or :class:`CheckpointCommitUnknownError` (outcome unknown) when the server fails."""
        checkpoint.validate()
        _check_session(session_id)

        def body(connection: _Connection) -> tuple[int, float]:
            self._lock_session(connection, "checkpoints", session_id)
            newest = self._find_newest_good(
                connection, session_id, functools.partial(self._set_aside, connection, session_id))
            row = connection.execute(
                "SELECT GREATEST((SELECT MAX(version) FROM ctxwindow_checkpoints WHERE session_id = %s), "
                "(SELECT MAX(version) FROM ctxwindow_corrupt_checkpoints WHERE session_id = %s), 0)",
                (session_id, session_id)).fetchone()
            highest = int(row[0]) if row else 0
            try:
                version, saved_at, document = _next_version(
                    checkpoint, newest.version if newest else 0, highest, session_id)
            except StaleCheckpointError:
                connection.commit()  # corrupt rows met stay set aside; this checkpoint is not written
                raise
            connection.execute("INSERT INTO ctxwindow_checkpoints VALUES (%s, %s, %s, %s)",
                               (session_id, version, saved_at, document.encode()))
            kept = [int(r[0]) for r in connection.execute(
                "SELECT version FROM ctxwindow_checkpoints WHERE session_id = %s ORDER BY version DESC LIMIT %s",
                (session_id, self.keep))]
            retained = _retained_from(kept, self.keep)
            if retained:
                for table in ("ctxwindow_checkpoints", "ctxwindow_corrupt_checkpoints"):
                    connection.execute(f"DELETE FROM {table} WHERE session_id = %s AND version < %s".encode(),
                                       (session_id, retained))
            return version, saved_at

        version, saved_at = self._run(body)
        checkpoint.version, checkpoint.saved_at = version, saved_at
        return version

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session, or None if it never had one. Corrupt
        rows are moved to ``ctxwindow_corrupt_checkpoints`` and reported;
        :class:`CheckpointCorruptError` if no good one is left."""
        _check_session(session_id)
        found: list[tuple[int, str]] = []

        def set_aside_later(version: int, reason: str) -> str:
            found.append((version, reason))
            return _PG_SET_ASIDE

        def read(connection: _Connection) -> tuple[TaskCheckpoint | None, int]:
            # One snapshot: concurrent saves may prune versions between the statements.
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            checkpoint = self._find_newest_good(connection, session_id, set_aside_later)
            row = connection.execute("SELECT COUNT(*) FROM ctxwindow_corrupt_checkpoints WHERE session_id = %s",
                                     (session_id,)).fetchone()
            return checkpoint, int(row[0]) if row else 0

        def set_aside(connection: _Connection) -> None:
            self._lock_session(connection, "checkpoints", session_id)
            for version, reason in found:
                self._set_aside(connection, session_id, version, reason)

        checkpoint, set_aside_count = self._run(read)
        if found:  # readers take no lock unless they found something to set aside
            self._run(set_aside)
        return _loaded(session_id, checkpoint, set_aside_count + len(found))

    def sessions(self) -> list[str]:
        """The sessions with checkpoints."""
        return self._run(lambda connection: [row[0] for row in connection.execute(
            'SELECT session_id FROM ctxwindow_checkpoints GROUP BY session_id ORDER BY session_id COLLATE "C"')])

    # --- the archive of evicted messages ---------------------------------------------------

    def session_archive(self, session_id: str) -> PostgresArchive:
        """The archive of one session as a :class:`~ctxwindow.archive.MessageArchive`: give it
        to a window (``ContextWindow(..., archive=store.session_archive("s"))``) and the
        retrieval ids of its placeholders resolve from this database, from any machine."""
        return PostgresArchive(self, session_id)

    def _put_groups(self, session_id: str, groups: Sequence[Sequence[Message]]) -> list[tuple[str, str]]:
        """Stores the groups in one transaction; returns for each its retrieval id
        (:func:`ctxwindow.archive.retrieval_id`) and the id of its first message row,
        ``f"{session_id}:{position}"``. A group the session holds already is not stored again."""
        _check_session(session_id)
        documents = [[text.encode() for text in group] for group in _group_documents(groups)]

        def body(connection: _Connection) -> list[tuple[str, str]]:
            self._lock_session(connection, "archive", session_id)
            row = connection.execute("SELECT COALESCE(MAX(position), 0) FROM ctxwindow_archive WHERE session_id = %s",
                                     (session_id,)).fetchone()
            position = int(row[0]) if row else 0
            ids = []
            for group, group_documents in zip(groups, documents):
                group_id = retrieval_id(group)
                stored = connection.execute(
                    "SELECT retrieval_id FROM ctxwindow_archive WHERE session_id = %s AND group_id = %s "
                    "ORDER BY position LIMIT 1", (session_id, group_id)).fetchone()
                if stored is not None:
                    ids.append((group_id, str(stored[0])))
                    continue
                ids.append((group_id, f"{session_id}:{position + 1}"))
                rows = []
                for message, document in zip(group, group_documents):
                    position += 1
                    rows.append((f"{session_id}:{position}", session_id, position, group_id, document, time.time(),
                                 _search_text(message)))
                with connection.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO ctxwindow_archive (retrieval_id, session_id, position, group_id, message, "
                        "archived_at, search) VALUES (%s, %s, %s, %s, %s, %s, to_tsvector('simple', %s))", rows)
            return ids

        return self._run(body)

    def _list_groups(self, session_id: str) -> list[tuple[str, list[Message]]]:
        rows = self._run(lambda connection: connection.execute(
            "SELECT group_id, message FROM ctxwindow_archive WHERE session_id = %s ORDER BY position",
            (session_id,)).fetchall())
        return _consecutive_groups((str(group_id), json.loads(bytes(message))) for group_id, message in rows)

    @staticmethod
    def _group(connection: _Connection, session_id: str, group_id: str) -> list[Message] | None:
        rows = connection.execute(
            "SELECT message FROM ctxwindow_archive WHERE session_id = %s AND group_id = %s ORDER BY position",
            (session_id, group_id)).fetchall()
        return [json.loads(bytes(row[0])) for row in rows] or None

    def _get_group(self, session_id: str, group_id: str) -> list[Message] | None:
        if not isinstance(group_id, str):
            raise InvalidTypeError(f"a retrieval id is a str, got {type(group_id).__name__}")
        return self._run(lambda connection: self._group(connection, session_id, group_id))

    def _search_groups(self, session_id: str, query: str, limit: int) -> list[tuple[str, list[Message]]]:
        phrases = _query_phrases(query, limit)
        if not phrases:
            return []

        def body(connection: _Connection) -> list[tuple[str, list[Message]]]:
            group_ids = [str(row[0]) for row in connection.execute(
                f"SELECT group_id FROM ctxwindow_archive, (SELECT {_tsquery(phrases, '||')} AS q) AS query "
                "WHERE session_id = %s AND search @@ q GROUP BY group_id "
                "ORDER BY MAX(ts_rank(search, q)) DESC, MAX(position) DESC LIMIT %s".encode(),
                (*phrases, session_id, limit))]
            return [(group_id, self._group(connection, session_id, group_id) or []) for group_id in group_ids]

        return self._run(body)

    def archive(self, session_id: str, messages: Sequence[Message]) -> list[str]:
        """Stores messages (evicted from a window), each as its own group; returns one id per
        message for :meth:`get` (``f"{session_id}:{n}"``; a message the session holds already
        keeps its id)."""
        return [row_id for _, row_id in self._put_groups(session_id, [[message] for message in messages])]

    def get(self, retrieval_id: str) -> Message | None:
        """The archived message with that id (of any session, as returned by :meth:`archive`
        and :meth:`search`), or None. Groups: :meth:`session_archive`."""
        def body(connection: _Connection) -> Message | None:
            row = connection.execute("SELECT message FROM ctxwindow_archive WHERE retrieval_id = %s",
                                     (retrieval_id,)).fetchone()
            return json.loads(bytes(row[0])) if row else None

        return self._run(body)

    def search(self, session_id: str, query: str, limit: int = 10) -> list[tuple[str, Message]]:
        """Archived messages of the session containing every word of ``query``, best
        ``ts_rank`` first: ``(retrieval_id, message)`` pairs."""
        _check_session(session_id)
        phrases = _query_phrases(query, limit)
        if not phrases:
            return []

        def body(connection: _Connection) -> list[tuple[str, Message]]:
            rows = connection.execute(
                f"SELECT retrieval_id, message FROM ctxwindow_archive, (SELECT {_tsquery(phrases, '&&')} AS q) AS query "
                "WHERE session_id = %s AND search @@ q ORDER BY ts_rank(search, q) DESC, position DESC "
                "LIMIT %s".encode(), (*phrases, session_id, limit)).fetchall()
            return [(str(row_id), json.loads(bytes(message))) for row_id, message in rows]

        return self._run(body)

    def archiver(self, session_id: str) -> Callable[..., None]:
        """An ``on_evict`` callback that archives every evicted message of a window."""
        _check_session(session_id)

        def on_evict(evicted: Sequence[Message], *_: Any) -> None:
            self.archive(session_id, evicted)
        return on_evict


class PostgresArchive(_StoreArchive):
    """One session's part of a :class:`PostgresCheckpointStore`'s archive, implementing
    :class:`~ctxwindow.archive.MessageArchive` (groups named by
    :func:`ctxwindow.archive.retrieval_id`, stored once per session). Search finds groups
    containing any query word (a word with inner punctuation, such as ``eu-west-1``, as a
    phrase), best ``ts_rank`` first, newest first on ties."""

    store: PostgresCheckpointStore

    def __init__(self, store: PostgresCheckpointStore, session_id: str) -> None:
        super().__init__(store, session_id)


@functools.cache
def _counter() -> Tokenizer:
    return Tokenizer("o200k_base")


def bootstrap_prompt(checkpoint: TaskCheckpoint, max_tokens: int | None = None) -> str:
    """The text that resumes a task in a fresh window: goal, constraints, current subtask,
    remaining, last done, open issues, decisions, success criteria, learnings, previous summary,
    most important first; within ``max_tokens`` (o200k tokens) the least important lines go
    first. Planned subtasks are never presented as done."""
    done = [s for s in checkpoint.subtasks if s.status == "done"]
    current = [s for s in checkpoint.subtasks if s.status == "in_progress"]
    remaining = [s for s in checkpoint.subtasks if s.status == "planned"]
    sections: list[tuple[str, list[str]]] = [
        ("Goal", [checkpoint.goal]),
        ("Constraints (verbatim)", checkpoint.constraints),
        ("Current subtask", [s.title + (f" ({s.notes})" if s.notes else "") for s in current]),
        ("Remaining (not started)", [s.title for s in remaining]),
        ("Last done", [s.title for s in done[-3:]]),
        ("Open issues", checkpoint.open_issues),
        ("Decisions", checkpoint.decisions),
        ("Success criteria", checkpoint.success_criteria),
        ("Learnings", checkpoint.learnings),
        ("Previous summary", [checkpoint.summary] if checkpoint.summary else []),
    ]
    header = f"[Resuming task, checkpoint version {checkpoint.version}]"

    def render(kept: list[tuple[str, list[str]]]) -> str:
        lines = [header]
        for title, values in kept:
            if values:
                lines += [f"{title}:", *[f"- {v}" for v in values]]
        return "\n".join(lines)

    kept = [(title, list(values)) for title, values in sections]
    text = render(kept)
    if max_tokens is None:
        return text
    if max_tokens < 1:
        raise InvalidArgumentError(f"max_tokens must be >= 1, got {max_tokens}")
    # Drop from the least important section, last lines first; the goal stays whole.
    for index in range(len(kept) - 1, 0, -1):
        while kept[index][1] and _counter().count(text) > max_tokens:
            kept[index][1].pop()
            text = render(kept)
    if _counter().count(text) > max_tokens:
        ratio = max_tokens / max(_counter().count(text), 1)
        text = text[: max(math.floor(len(text) * ratio) - 3, 0)] + "..."
        while text and _counter().count(text) > max_tokens:
            text = text[: -max(len(text) // 10, 1)]
    return text
