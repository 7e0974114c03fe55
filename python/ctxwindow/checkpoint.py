"""Checkpoints that survive crashes: versioned task state, file and SQLite stores, an archive of
evicted messages with full-text search, and the resume prompt.

Optimistic concurrency: a checkpoint carries the version it was loaded at (0 when new). Saving
stores that + 1 and updates the object; if the store already holds a newer version than the one
the checkpoint was based on, :class:`StaleCheckpointError` and nothing is written.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     store = FileCheckpointStore(folder)
...     checkpoint = TaskCheckpoint(goal="Migrate auth to OAuth")
...     print(store.save(checkpoint, "s1"), store.load("s1").goal)
1 Migrate auth to OAuth
"""

from __future__ import annotations

import functools
import contextlib
import fcntl
import json
import logging
import math
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ctxwindow._native import Tokenizer
from ctxwindow.errors import CheckpointCorruptError, InvalidArgumentError, InvalidTypeError, StaleCheckpointError

__all__ = [
    "SUBTASK_STATUSES",
    "Subtask",
    "TaskCheckpoint",
    "FileCheckpointStore",
    "SQLiteCheckpointStore",
    "StaleCheckpointError",
    "CheckpointCorruptError",
    "bootstrap_prompt",
]

logger = logging.getLogger("ctxwindow")

SCHEMA = "ctxwindow.checkpoint/1"
SUBTASK_STATUSES = ("planned", "in_progress", "done")
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


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


def _next_version(checkpoint: TaskCheckpoint, newest: int, session_id: str) -> tuple[int, float, str]:
    """The optimistic-concurrency rule shared by the stores: the version to write (the
    checkpoint's + 1), its time, and its JSON document; :class:`StaleCheckpointError` when the
    store already holds a newer version than the checkpoint was based on."""
    if newest > checkpoint.version:
        raise StaleCheckpointError(
            f"session {session_id!r} holds version {newest}, newer than version "
            f"{checkpoint.version} this checkpoint is based on; load it and retry")
    version, saved_at = checkpoint.version + 1, time.time()
    document = json.dumps({**checkpoint.to_dict(), "version": version, "saved_at": saved_at}, ensure_ascii=False)
    return version, saved_at, document


def _fsync_dir(path: Path) -> None:
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


class FileCheckpointStore:
    """Checkpoints as files: ``DIRECTORY/SESSION/v00000042.json`` (for machines) and
    ``progress.md`` (for people), written atomically; the last ``keep`` versions are kept. A
    corrupt or truncated file is detected and the newest good version is loaded instead (a
    warning is logged and kept in ``warnings``). Safe across threads and processes (a lock file
    per session)."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 5) -> None:
        if keep < 1:
            raise InvalidArgumentError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        self.warnings: list[str] = []
        self._lock = threading.Lock()

    def _session(self, session_id: str) -> Path:
        path = self.directory / _check_session(session_id)
        path.mkdir(exist_ok=True)
        return path

    @contextlib.contextmanager
    def _locked(self, folder: Path) -> Iterator[None]:
        with self._lock, open(folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def _versions(folder: Path) -> list[int]:
        found = []
        for path in folder.glob("v*.json"):
            with contextlib.suppress(ValueError):
                found.append(int(path.stem[1:]))
        return sorted(found)

    def save(self, checkpoint: TaskCheckpoint, session_id: str = "default") -> int:
        """Stores ``checkpoint`` as version ``checkpoint.version + 1``; returns it."""
        checkpoint.validate()
        folder = self._session(session_id)
        with self._locked(folder):
            versions = self._versions(folder)
            version, saved_at, document = _next_version(checkpoint, versions[-1] if versions else 0, session_id)
            _atomic_write(folder / f"v{version:08d}.json", document.encode())
            checkpoint.version, checkpoint.saved_at = version, saved_at
            _atomic_write(folder / "progress.md", checkpoint.to_markdown().encode())
            for old in versions[: max(len(versions) + 1 - self.keep, 0)]:
                with contextlib.suppress(FileNotFoundError):
                    (folder / f"v{old:08d}.json").unlink()
        return version

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session, or None if it has none. Corrupt versions
        are skipped with a warning; :class:`CheckpointCorruptError` if every version is corrupt."""
        folder = self.directory / _check_session(session_id)
        if not folder.is_dir():
            return None
        def reader(version: int) -> Callable[[], TaskCheckpoint | None]:
            def read() -> TaskCheckpoint | None:
                try:
                    checkpoint = TaskCheckpoint.from_dict(json.loads((folder / f"v{version:08d}.json").read_bytes()))
                except FileNotFoundError:  # pruned by a concurrent save
                    return None
                if checkpoint.version != version:
                    raise CheckpointCorruptError(f"holds version {checkpoint.version}")
                return checkpoint
            return read

        versions = reversed(self._versions(folder))
        return _newest_good(session_id, ((f"v{v:08d}.json", reader(v)) for v in versions), self.warnings)


def _newest_good(session_id: str, candidates: Iterable[tuple[str, Callable[[], TaskCheckpoint | None]]],
                 warnings: list[str]) -> TaskCheckpoint | None:
    """The first candidate (newest first) that reads as a good checkpoint; the bad ones before it
    are logged and added to ``warnings``; :class:`CheckpointCorruptError` if none is good."""
    problems = []
    for label, read in candidates:
        try:
            checkpoint = read()
        except (ValueError, UnicodeDecodeError, CheckpointCorruptError) as error:
            problems.append(f"{label}: {error}")
            continue
        if checkpoint is None:
            continue
        for problem in problems:
            message = f"checkpoint {problem}; loaded version {checkpoint.version} instead"
            logger.warning("ctxwindow: %s", message)
            warnings.append(message)
        return checkpoint
    if problems:
        raise CheckpointCorruptError(f"no good checkpoint in session {session_id!r}: {'; '.join(problems)}")
    return None


_SQL_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS checkpoints (session_id TEXT NOT NULL, version INTEGER NOT NULL, "
    "saved_at REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (session_id, version))",
    "CREATE TABLE IF NOT EXISTS archive (retrieval_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
    "position INTEGER NOT NULL, message TEXT NOT NULL, archived_at REAL NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS archive_text USING fts5(text, retrieval_id UNINDEXED, "
    "session_id UNINDEXED)",
]
SQL_SCHEMA_VERSION = 1


class SQLiteCheckpointStore:
    """Checkpoints of many sessions in one SQLite file (WAL), with the same versioning rules
    (the version check and the write are one transaction, so concurrent writers in threads or
    processes never lose an update), and the archive of evicted messages with full-text search
    (FTS5). A ``schema_version`` table allows future migrations."""

    def __init__(self, path: str | os.PathLike[str], keep: int = 20, timeout: float = 30.0) -> None:
        if keep < 1:
            raise InvalidArgumentError(f"keep must be >= 1, got {keep}")
        self.path = str(path)
        self.keep = keep
        self.timeout = timeout
        self.warnings: list[str] = []
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            for statement in _SQL_SCHEMA:
                connection.execute(statement)
            row = connection.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                connection.execute("INSERT INTO schema_version VALUES (?)", (SQL_SCHEMA_VERSION,))
            elif row[0] > SQL_SCHEMA_VERSION:
                raise CheckpointCorruptError(
                    f"{self.path} has schema version {row[0]}, newer than this ctxwindow ({SQL_SCHEMA_VERSION})")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            connection.execute("PRAGMA synchronous=FULL")
            yield connection
        finally:
            connection.close()

    def save(self, checkpoint: TaskCheckpoint, session_id: str = "default") -> int:
        """Stores ``checkpoint`` as version ``checkpoint.version + 1``; returns it."""
        checkpoint.validate()
        _check_session(session_id)
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                newest = connection.execute(
                    "SELECT COALESCE(MAX(version), 0) FROM checkpoints WHERE session_id = ?",
                    (session_id,)).fetchone()[0]
                version, saved_at, document = _next_version(checkpoint, newest, session_id)
                connection.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?)",
                                   (session_id, version, saved_at, document))
                connection.execute("DELETE FROM checkpoints WHERE session_id = ? AND version <= ?",
                                   (session_id, version - self.keep))
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        checkpoint.version, checkpoint.saved_at = version, saved_at
        return version

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session (corrupt rows skipped with a warning)."""
        _check_session(session_id)
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT version, data FROM checkpoints WHERE session_id = ? ORDER BY version DESC",
                (session_id,)).fetchall()
        def reader(data: str) -> Callable[[], TaskCheckpoint | None]:
            return lambda: TaskCheckpoint.from_dict(json.loads(data))

        return _newest_good(session_id, ((f"version {v}", reader(d)) for v, d in rows), self.warnings)

    def sessions(self) -> list[str]:
        """The sessions with checkpoints."""
        with self._connect() as connection:
            return [row[0] for row in connection.execute(
                "SELECT DISTINCT session_id FROM checkpoints ORDER BY session_id")]

    # --- the archive of evicted messages --------------------------------------------------

    def archive(self, session_id: str, messages: Sequence[dict[str, Any]]) -> list[str]:
        """Stores messages (evicted from a window); returns one retrieval id per message."""
        _check_session(session_id)
        ids = []
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                start = connection.execute("SELECT COUNT(*) FROM archive WHERE session_id = ?",
                                           (session_id,)).fetchone()[0]
                for offset, message in enumerate(messages):
                    retrieval_id = f"{session_id}:{start + offset + 1}"
                    text = _message_text(message)
                    connection.execute("INSERT INTO archive VALUES (?, ?, ?, ?, ?)",
                                       (retrieval_id, session_id, start + offset + 1,
                                        json.dumps(message, ensure_ascii=False), time.time()))
                    connection.execute("INSERT INTO archive_text VALUES (?, ?, ?)", (text, retrieval_id, session_id))
                    ids.append(retrieval_id)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return ids

    def get(self, retrieval_id: str) -> dict[str, Any] | None:
        """The archived message with that id, or None."""
        with self._connect() as connection:
            row = connection.execute("SELECT message FROM archive WHERE retrieval_id = ?",
                                     (retrieval_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def search(self, session_id: str, query: str, limit: int = 10) -> list[tuple[str, dict[str, Any]]]:
        """Archived messages of the session matching ``query`` (FTS5 syntax; plain words are
        matched as words), best first: ``(retrieval_id, message)`` pairs."""
        _check_session(session_id)
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgumentError("query must be a non-empty str")
        words = re.findall(r"\w+", query)
        expression = " ".join(f'"{w}"' for w in words) if words else query
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT a.retrieval_id, a.message FROM archive_text t JOIN archive a "
                "ON a.retrieval_id = t.retrieval_id WHERE archive_text MATCH ? AND t.session_id = ? "
                "ORDER BY rank LIMIT ?", (expression, session_id, limit)).fetchall()
        return [(retrieval_id, json.loads(message)) for retrieval_id, message in rows]

    def archiver(self, session_id: str) -> Callable[..., None]:
        """An ``on_evict`` callback that archives every evicted message of a window."""
        def on_evict(evicted: Sequence[dict[str, Any]], *_: Any) -> None:
            self.archive(session_id, evicted)
        return on_evict


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    parts = [content] if isinstance(content, str) else [
        str(p.get("text", "")) for p in content or [] if isinstance(p, dict)]
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


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
