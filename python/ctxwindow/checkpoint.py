"""Checkpoints that survive crashes: versioned task state, file and SQLite stores, an archive of
evicted messages with full-text search, and the resume prompt.

The versioning rule (one implementation, :func:`_next_version`, shared by the stores):

- A checkpoint carries the version it was loaded at or last saved as (0 when new); saving
  updates the object.
- Staleness is judged against the newest *good* version: if the store holds a good version
  newer than the one the checkpoint is based on, :class:`StaleCheckpointError` and nothing of
  the checkpoint is written.
- A corrupt version (a document that does not parse as a checkpoint of its number) is set aside
  by the first load or save that meets it: the file store renames it ``v00000042.json.corrupt``,
  the SQLite store moves the row to ``corrupt_checkpoints``. It is reported (a logged warning,
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
from typing import Any

from ctxwindow._native import Tokenizer
from ctxwindow.archive import archive_text, retrieval_id
from ctxwindow.errors import CheckpointCorruptError, InvalidArgumentError, InvalidTypeError, StaleCheckpointError

__all__ = [
    "SUBTASK_STATUSES",
    "Subtask",
    "TaskCheckpoint",
    "FileCheckpointStore",
    "SQLiteCheckpointStore",
    "SQLiteArchive",
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
        documents = []
        for group in groups:
            if not all(isinstance(m, dict) for m in group):
                raise InvalidTypeError("an archive stores message dicts")
            try:
                documents.append([json.dumps(m, ensure_ascii=False) for m in group])
            except (TypeError, ValueError) as error:
                raise InvalidTypeError(f"an archived message must be JSON-serializable: {error}") from None
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


class SQLiteArchive:
    """One session's part of a :class:`SQLiteCheckpointStore`'s archive, implementing
    :class:`~ctxwindow.archive.MessageArchive`: a group is named by
    :func:`ctxwindow.archive.retrieval_id` (as in every archive, so a placeholder's id resolves
    in whichever archive holds the group) and stored once per session. Search finds groups
    containing any query word (a word with inner punctuation, such as ``eu-west-1``, as a
    phrase), best BM25 rank first."""

    def __init__(self, store: SQLiteCheckpointStore, session_id: str) -> None:
        self.store = store
        self.session_id = _check_session(session_id)

    def put(self, messages: Sequence[Message]) -> str:
        """Stores the messages as one group (at least one message); returns its retrieval id."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not messages:
            raise InvalidArgumentError("an archive group is a non-empty sequence of message dicts")
        return self.store._put_groups(self.session_id, [messages])[0][0]

    def get(self, retrieval_id: str) -> list[Message] | None:
        """The group stored under ``retrieval_id`` in this session, or None."""
        return self.store._get_group(self.session_id, retrieval_id)

    def search(self, query: str, limit: int = 10) -> list[tuple[str, list[Message]]]:
        """``(retrieval_id, messages)`` of the groups matching ``query``, best first."""
        return self.store._search_groups(self.session_id, query, limit)


def _group(connection: sqlite3.Connection, session_id: str, group_id: str) -> list[Message] | None:
    rows = connection.execute("SELECT message FROM archive WHERE session_id = ? AND group_id = ? ORDER BY position",
                              (session_id, group_id)).fetchall()
    return [json.loads(row[0]) for row in rows] or None


def _match_expression(query: str, limit: int, joiner: str) -> str:
    """An FTS5 expression of the words of ``query`` (each whitespace-separated word a quoted
    phrase of its letters and digits), joined with ``joiner``; "" when it has none."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgumentError("query must be a non-empty str")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidArgumentError(f"limit must be an int >= 0, got {limit!r}")
    phrases = [" ".join(re.findall(r"\w+", word)) for word in query.split()]
    return joiner.join(f'"{phrase}"' for phrase in phrases if phrase)


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
