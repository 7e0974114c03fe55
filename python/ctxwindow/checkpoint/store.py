"""What every checkpoint store implements: :class:`CheckpointStore`.

Three stores implement it: :class:`~ctxwindow.checkpoint.FileCheckpointStore` (files),
:class:`~ctxwindow.checkpoint.SQLiteCheckpointStore` and
:class:`~ctxwindow.checkpoint.PostgresCheckpointStore` (the shared SQL skeleton of
:mod:`ctxwindow.checkpoint.sql`, which adds ``sessions`` and the archive of evicted messages).
``ContextWindow.resume`` and ``save_checkpoint`` accept any of them.

>>> import tempfile
>>> from ctxwindow.checkpoint import FileCheckpointStore
>>> with tempfile.TemporaryDirectory() as folder:
...     isinstance(FileCheckpointStore(folder), CheckpointStore)
True
"""

from __future__ import annotations

from collections import deque
from typing import Protocol, runtime_checkable

from ctxwindow.errors import InvalidArgumentError

from .model import TaskCheckpoint

__all__ = ["CheckpointStore", "check_keep"]


def check_keep(keep: object) -> int:
    """``keep`` (how many good versions a store keeps per session) if it is an int >= 1;
    :class:`InvalidArgumentError` otherwise."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise InvalidArgumentError(f"keep must be an int >= 1, got {keep!r}")
    return keep


@runtime_checkable
class CheckpointStore(Protocol):
    """A store of versioned checkpoints, many sessions each (the rule:
    :mod:`ctxwindow.checkpoint.versioning`).

    - ``save(checkpoint, session_id)`` stores ``checkpoint`` as the session's next version,
      returns that version and updates ``checkpoint.version`` and ``checkpoint.saved_at``.
      Optimistic concurrency: :class:`~ctxwindow.errors.StaleCheckpointError`, and nothing
      written, when the store holds a good version newer than the one ``checkpoint`` is based on.
    - ``load(session_id)`` returns the newest good checkpoint, None for a session that never
      held one, and :class:`~ctxwindow.errors.CheckpointCorruptError` when every version it held
      is corrupt. Corrupt versions are set aside and reported in ``warnings``.
    - ``warnings``: what the store worked around (corrupt versions set aside), the last 100.

    Bad arguments (an invalid session id, an invalid checkpoint) raise
    :class:`~ctxwindow.errors.InvalidArgumentError` and change nothing.
    """

    warnings: deque[str]

    def save(self, checkpoint: TaskCheckpoint, session_id: str = "default") -> int:
        """Stores ``checkpoint`` as the session's next version; returns it."""
        ...

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session, or None if it never had one."""
        ...
