"""The versioning rule, one implementation shared by every store.

- A checkpoint carries the version it was loaded at or last saved as (0 when new); saving
  updates the object.
- Staleness is judged against the newest *good* version: if the store holds a good version
  newer than the one the checkpoint is based on, :class:`StaleCheckpointError` and nothing of
  the checkpoint is written.
- A corrupt version (a document that does not parse as a checkpoint of its number) is set aside
  by the first load or save that meets it: the file store renames it ``v00000042.json.corrupt``,
  the SQLite store moves the row to ``corrupt_checkpoints`` (``ctxwindow_corrupt_checkpoints`` in
  PostgreSQL). It is reported (a logged warning, also kept in the store's ``warnings``), never
  read again, and never makes a save stale.
- A number is never reused: the version written is ``max(based on, highest number the session
  ever held, corrupt ones included) + 1``. Normally that is ``checkpoint.version + 1``; when
  version N was corrupt and load fell back to N - 1, the next save writes N + 1.
- ``load`` returns the newest good version, None for a session that never held one, and
  :class:`CheckpointCorruptError` when every version it held is corrupt.

Stored documents have one schema, :data:`~ctxwindow.checkpoint.model.SCHEMA`; there is no older
document format to migrate. The database schemas have their own versions and migrations, in
their dialects (:mod:`ctxwindow.checkpoint.sqlite`, :mod:`ctxwindow.checkpoint.postgres`).

>>> next_version(TaskCheckpoint(goal="g", version=2), newest_good=1, highest=3, session_id="s")[0]
4
>>> retained_from([4, 5, 6, 7], keep=3)
5
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from ctxwindow.errors import CheckpointCorruptError, StaleCheckpointError

from .model import TaskCheckpoint

__all__ = ["loaded", "newest_good", "next_version", "parse", "report", "retained_from"]

logger = logging.getLogger("ctxwindow")

#: How a store reads one version: ``(version, label, read)``; ``read`` returns None for a
#: version that vanished (pruned by a concurrent save) and raises CheckpointCorruptError.
Candidate = tuple[int, str, Callable[[], "TaskCheckpoint | None"]]


def parse(document: object, version: int) -> TaskCheckpoint:
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


def report(warnings: deque[str], message: str) -> None:
    """Reports a problem a store met and worked around: a logged warning, also kept in ``warnings``."""
    logger.warning("ctxwindow: %s", message)
    warnings.append(message)


def newest_good(session_id: str, candidates: Iterable[Candidate], set_aside: Callable[[int, str], str],
                warnings: deque[str]) -> TaskCheckpoint | None:
    """The first candidate ``(version, label, read)``, newest first, that reads as a good
    checkpoint, or None. Every corrupt candidate before it is set aside (``set_aside(version,
    reason)`` returns where it went) and reported (:func:`report`)."""
    for version, label, read in candidates:
        try:
            checkpoint = read()
        except CheckpointCorruptError as error:
            where = set_aside(version, str(error))
            report(warnings, f"checkpoint {label} of session {session_id!r} is corrupt ({error}); {where}")
            continue
        if checkpoint is not None:
            return checkpoint
    return None


def loaded(session_id: str, checkpoint: TaskCheckpoint | None, set_aside: int) -> TaskCheckpoint | None:
    """What ``load`` returns given the newest good ``checkpoint`` and the number of versions the
    session has set aside: None only for a session that never held a version."""
    if checkpoint is None and set_aside:
        raise CheckpointCorruptError(
            f"no good checkpoint in session {session_id!r}: its {set_aside} stored version(s) are corrupt "
            "and set aside")
    return checkpoint


def next_version(checkpoint: TaskCheckpoint, newest_good: int, highest: int,
                 session_id: str) -> tuple[int, float, str]:
    """The version to write, its time and its JSON document. ``newest_good`` is the session's
    newest good version (0 for none), ``highest`` the highest number it ever held, corrupt
    versions set aside included (0 for none).

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


def retained_from(good_versions: Sequence[int], keep: int) -> int:
    """The oldest version kept when a store prunes after a save: the ``keep`` newest good
    versions stay, and every version below the oldest of them (good or set aside) goes. Versions
    set aside that are newer stay, so the highest number ever written is never forgotten."""
    return sorted(good_versions)[-keep] if len(good_versions) >= keep else 0
