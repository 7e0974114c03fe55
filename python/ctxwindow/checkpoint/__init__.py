"""Checkpoints that survive crashes: versioned task state, file, SQLite and PostgreSQL stores, an
archive of evicted messages with full-text search, and the resume prompt.

One module per concern:

- :mod:`~ctxwindow.checkpoint.model`: :class:`TaskCheckpoint`, :class:`Subtask`, validation,
  the stored document;
- :mod:`~ctxwindow.checkpoint.versioning`: the versioning rule every store follows (optimistic
  concurrency, corrupt versions set aside, numbers never reused);
- :mod:`~ctxwindow.checkpoint.store`: :class:`CheckpointStore`, the protocol of every store;
- :mod:`~ctxwindow.checkpoint.files`: :class:`FileCheckpointStore`;
- :mod:`~ctxwindow.checkpoint.sql`: the SQL skeleton (checkpoints and the archive of evicted
  messages, written once) over a small dialect, with :mod:`~ctxwindow.checkpoint.sqlite`
  (:class:`SQLiteCheckpointStore`, :class:`SQLiteArchive`) and
  :mod:`~ctxwindow.checkpoint.postgres` (:class:`PostgresCheckpointStore`,
  :class:`PostgresArchive`; extra ``postgres``, psycopg imported only when a store opens);
- :mod:`~ctxwindow.checkpoint.resume`: :func:`bootstrap_prompt`.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     store = FileCheckpointStore(folder)
...     checkpoint = TaskCheckpoint(goal="Migrate auth to OAuth")
...     print(store.save(checkpoint, "s1"), store.load("s1").goal)
1 Migrate auth to OAuth
"""

from __future__ import annotations

from ctxwindow.errors import (
    CheckpointCommitUnknownError,
    CheckpointCorruptError,
    CheckpointStoreError,
    StaleCheckpointError,
)

from .files import FileCheckpointStore
from .model import SCHEMA, SUBTASK_STATUSES, Subtask, TaskCheckpoint
from .postgres import PG_SCHEMA_VERSION, PG_SEARCH_CHARS, PostgresArchive, PostgresCheckpointStore
from .resume import bootstrap_prompt
from .sqlite import SQL_SCHEMA_VERSION, SQLiteArchive, SQLiteCheckpointStore
from .store import CheckpointStore

__all__ = [
    "SCHEMA",
    "SUBTASK_STATUSES",
    "SQL_SCHEMA_VERSION",
    "PG_SCHEMA_VERSION",
    "PG_SEARCH_CHARS",
    "Subtask",
    "TaskCheckpoint",
    "CheckpointStore",
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
