"""Concurrent writers of one session, in threads and in processes: load-modify-save with retry on
StaleCheckpointError loses no update in any store."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from ctxwindow import StaleCheckpointError
from ctxwindow.checkpoint import TaskCheckpoint

from .stores import Store, close, open_kind, server_for


def test_concurrent_writers_in_threads_lose_no_update(store: Store) -> None:
    store.save(TaskCheckpoint(goal="count"), "s")
    saved: list[int] = []
    start = threading.Barrier(4)  # every writer loads before any saves: the first rounds collide
    failures: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            start.wait(timeout=60)
            for _ in range(10):
                while True:
                    checkpoint = store.load("s")
                    assert checkpoint is not None
                    checkpoint.learnings.append(name)
                    try:
                        saved.append(store.save(checkpoint, "s"))
                        break
                    except StaleCheckpointError:
                        continue
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    final = store.load("s")
    assert final is not None and final.version == 41 and len(final.learnings) == 40
    assert sorted(saved) == list(range(2, 42))


WRITER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import PostgresCheckpointStore, SQLiteCheckpointStore, StaleCheckpointError
    kind, location = sys.argv[4], sys.argv[1]
    store = SQLiteCheckpointStore(location) if kind == "sqlite" else PostgresCheckpointStore(location)
    print("ready", flush=True)
    sys.stdin.readline()  # every writer starts at once
    for _ in range(int(sys.argv[3])):
        while True:
            checkpoint = store.load("s")
            checkpoint.learnings.append(sys.argv[2])
            try:
                store.save(checkpoint, "s")
                break
            except StaleCheckpointError:
                pass
""")


@pytest.mark.parametrize("kind, processes, saves", [("sqlite", 4, 15), ("postgres", 8, 50)])
def test_concurrent_writers_in_processes_lose_no_update(request: pytest.FixtureRequest, tmp_path: Path, kind: str,
                                                        processes: int, saves: int) -> None:
    """Load-modify-save with retry on StaleCheckpointError from many processes on one session."""
    server = server_for(request, kind)
    location = server.new_schema() if server else str(tmp_path / "shared.db")
    store = open_kind(kind, location, keep=20)
    store.save(TaskCheckpoint(goal="count"), "s")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, location, f"p{i}", str(saves), kind],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(processes)]
    for writer in writers:  # each has opened its store
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.close()
    assert all(p.wait(timeout=120) == 0 for p in writers)
    for writer in writers:
        assert writer.stdout is not None
        writer.stdout.close()
    final = store.load("s")
    close(store)
    assert final is not None and final.version == processes * saves + 1  # 0 lost updates
    assert sorted(final.learnings) == sorted(f"p{i}" for i in range(processes) for _ in range(saves))
