"""The file store: checkpoints as files, written atomically, locked across threads and processes.

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
import os
import re
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from .model import TaskCheckpoint, check_session
from .store import check_keep
from .versioning import loaded, newest_good, next_version, parse, retained_from

__all__ = ["FileCheckpointStore"]

_VERSION_FILE = re.compile(r"^v(\d+)\.json(\.corrupt)?$")


def _version_file(version: int) -> str:
    return f"v{version:08d}.json"


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


class FileCheckpointStore:
    """Checkpoints as files: ``DIRECTORY/SESSION/v00000042.json`` (for machines) and
    ``progress.md`` (for people), written atomically; the last ``keep`` good versions are kept.
    A corrupt or truncated version file is renamed ``v00000042.json.corrupt`` (never read again)
    and reported (a logged warning, also kept in ``warnings``, the last 100); the newest good
    version is loaded instead and the next save succeeds (the rule:
    :mod:`ctxwindow.checkpoint.versioning`). Safe across threads and processes (a lock file per
    session)."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 5) -> None:
        self.keep = check_keep(keep)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.warnings: deque[str] = deque(maxlen=100)
        # flock locks belong to open files, not threads: threads of one store also need a lock.
        self._lock = threading.Lock()

    def _session(self, session_id: str) -> Path:
        path = self.directory / check_session(session_id)
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
                return parse(document, version)
            return read

        def set_aside(version: int, reason: str) -> str:
            name = _version_file(version)
            with contextlib.suppress(FileNotFoundError):
                os.replace(folder / name, folder / f"{name}.corrupt")
            return f"moved aside to {name}.corrupt"

        stored, _ = self._listing(folder)
        candidates = ((v, _version_file(v), reader(v)) for v in reversed(stored))
        return newest_good(session_id, candidates, set_aside, self.warnings)

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
            version, saved_at, document = next_version(
                checkpoint, newest.version if newest else 0, max(stored + set_aside, default=0), session_id)
            _atomic_write(folder / _version_file(version), document.encode())
            checkpoint.version, checkpoint.saved_at = version, saved_at
            _atomic_write(folder / "progress.md", checkpoint.to_markdown().encode())
            retained = retained_from([*stored, version], self.keep)
            for old in [_version_file(v) for v in stored if v < retained] + [
                    f"{_version_file(v)}.corrupt" for v in set_aside if v < retained]:
                with contextlib.suppress(FileNotFoundError):
                    (folder / old).unlink()
        return version

    def load(self, session_id: str = "default") -> TaskCheckpoint | None:
        """The newest good checkpoint of the session, or None if it never had one. Corrupt
        versions are set aside and reported; :class:`CheckpointCorruptError` if no good one is
        left."""
        folder = self.directory / check_session(session_id)
        if not folder.is_dir():
            return None
        with self._locked(folder):
            checkpoint = self._find_newest_good(folder, session_id)
            return loaded(session_id, checkpoint, len(self._listing(folder)[1]))
