"""The file store: corrupt files, durability of a save, locking on Windows."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxwindow import CheckpointCorruptError, InvalidArgumentError
from ctxwindow.checkpoint import FileCheckpointStore, TaskCheckpoint

from .stores import make_store


@pytest.mark.parametrize(
    "damage",
    [b'{"schema": "ctxwindow.checkpoint/1", "goal": "tru', b"", b"\x00\xff\xfe garbage \x89PNG",
     b'{"schema": "something/else", "goal": "x"}', b'{"schema": "ctxwindow.checkpoint/1", "version": 3}',
     b"[1, 2, 3]"],
    ids=["truncated", "empty", "binary", "wrong-schema", "no-goal", "not-an-object"],
)
def test_corrupt_files_fall_back_to_the_last_good_version(tmp_path: Path, damage: bytes) -> None:
    store = FileCheckpointStore(tmp_path, keep=5)
    checkpoint = TaskCheckpoint(goal="good")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    (tmp_path / "s" / "v00000003.json").write_bytes(damage)
    loaded = store.load("s")
    assert loaded is not None and loaded.version == 2 and loaded.goal == "good"
    assert store.warnings and "v00000003.json" in store.warnings[-1]
    for path in (tmp_path / "s").glob("v*.json"):
        path.write_bytes(damage)
    with pytest.raises(CheckpointCorruptError, match="no good checkpoint"):
        store.load("s")


def test_a_save_is_durable_before_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file is written to a temporary name, fsynced, renamed into place, and its folder
    fsynced after the rename (latency is measured by benches/bench_checkpoint.py)."""
    steps: list[str] = []
    fsync, replace = os.fsync, os.replace

    def spy_fsync(descriptor: int) -> None:
        steps.append("fsync folder" if stat.S_ISDIR(os.fstat(descriptor).st_mode) else "fsync file")
        fsync(descriptor)

    def spy_replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        steps.append(f"rename to {Path(target).name}")
        replace(source, target)

    store = FileCheckpointStore(tmp_path)
    checkpoint = TaskCheckpoint(goal="g", learnings=["x" * 100] * 20)
    monkeypatch.setattr(os, "fsync", spy_fsync)
    monkeypatch.setattr(os, "replace", spy_replace)
    store.save(checkpoint, "s")
    monkeypatch.undo()
    assert steps == ["fsync file", "rename to v00000001.json", "fsync folder",
                     "fsync file", "rename to progress.md", "fsync folder"]
    assert json.loads((tmp_path / "s" / "v00000001.json").read_text())["version"] == 1
    assert store.load("s") == checkpoint
    assert not [p.name for p in (tmp_path / "s").iterdir() if p.name.endswith(".tmp")]


def test_bad_arguments_raise_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="session_id"):
        FileCheckpointStore(Path("/tmp")).load("../etc")
    with pytest.raises(InvalidArgumentError, match="keep"):
        make_store("file", tmp_path, keep=0)
    assert not (tmp_path / "checkpoints").exists()


# --- the module imports on Windows (no fcntl there) ------------------------------------------

WITHOUT_FCNTL = textwrap.dedent("""
    import errno, sys, types
    sys.modules["fcntl"] = None  # as on Windows: importing it fails
    import ctxwindow.checkpoint as checkpoint
    calls = []

    def locking(descriptor, mode, count):
        calls.append(mode)
        if len(calls) == 1:  # LK_LOCK gives up after 10 tries: the helper tries again
            raise OSError(errno.EDEADLOCK, "Resource deadlock avoided")

    sys.modules["msvcrt"] = types.SimpleNamespace(LK_LOCK=1, LK_UNLCK=0, locking=locking)
    sys.platform = "win32"
    store = checkpoint.FileCheckpointStore(sys.argv[1])
    store.save(checkpoint.TaskCheckpoint(goal="g"), "s")
    assert store.load("s").version == 1
    print(calls)
""")


def test_module_imports_without_fcntl_and_locks_with_msvcrt(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_FCNTL, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 1, 0, 1, 0]"  # save: lock (retried), unlock; load: lock, unlock
