"""Checkpoints: round trips, stale rejection, concurrent writers (threads and processes), crash
safety under SIGKILL, corrupt files, the resume prompt, and window checkpoint / resume."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwindow import (
    CheckpointCorruptError,
    ContextWindow,
    InvalidArgumentError,
    StaleCheckpointError,
    Tokenizer,
)
from ctxwindow.checkpoint import (
    FileCheckpointStore,
    SQLiteCheckpointStore,
    Subtask,
    TaskCheckpoint,
    bootstrap_prompt,
)
from ctxwindow.strategies import Summarize

from .test_window import call, check_valid, result

Store = FileCheckpointStore | SQLiteCheckpointStore


@pytest.fixture(params=["file", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "file":
        return FileCheckpointStore(tmp_path / "checkpoints", keep=3)
    return SQLiteCheckpointStore(tmp_path / "checkpoints.db", keep=3)


texts = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
checkpoints = st.builds(
    TaskCheckpoint,
    goal=texts.filter(str.strip),
    window_id=st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True),
    success_criteria=st.lists(texts, max_size=3),
    constraints=st.lists(texts, max_size=3),
    subtasks=st.lists(st.builds(Subtask, title=texts, status=st.sampled_from(["planned", "in_progress", "done"]),
                                notes=texts), max_size=4),
    decisions=st.lists(texts, max_size=3),
    open_issues=st.lists(texts, max_size=3),
    learnings=st.lists(texts, max_size=3),
    summary=texts,
)


@given(checkpoint=checkpoints)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_round_trip(store: Store, checkpoint: TaskCheckpoint) -> None:
    session = f"s{uuid.uuid4().hex}"
    version = store.save(checkpoint, session)
    assert version == checkpoint.version == 1 and checkpoint.saved_at is not None
    loaded = store.load(session)
    assert loaded == checkpoint
    assert store.save(loaded, session) == 2


def test_stale_saves_are_rejected_and_write_nothing(store: Store) -> None:
    first = TaskCheckpoint(goal="ship v2")
    store.save(first, "s")
    a, b = store.load("s"), store.load("s")
    assert a is not None and b is not None
    a.decisions.append("use Postgres")
    assert store.save(a, "s") == 2
    b.decisions.append("use MySQL")
    with pytest.raises(StaleCheckpointError, match="holds version 2"):
        store.save(b, "s")
    assert b.version == 1
    latest = store.load("s")
    assert latest is not None and latest.decisions == ["use Postgres"] and latest.version == 2
    assert store.load("never-saved") is None


def test_old_versions_are_pruned(store: Store) -> None:
    checkpoint = TaskCheckpoint(goal="g")
    for _ in range(6):
        store.save(checkpoint, "s")
    assert store.load("s") is not None and checkpoint.version == 6
    if isinstance(store, FileCheckpointStore):
        assert sorted(p.name for p in (store.directory / "s").glob("v*.json")) == [
            "v00000004.json", "v00000005.json", "v00000006.json"]
        assert (store.directory / "s" / "progress.md").read_text().startswith("# g")


def test_concurrent_writers_in_threads_lose_no_update(store: Store) -> None:
    store.save(TaskCheckpoint(goal="count"), "s")
    saved: list[int] = []

    def writer(name: str) -> None:
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

    threads = [threading.Thread(target=writer, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = store.load("s")
    assert final is not None and final.version == 41 and len(final.learnings) == 40
    assert sorted(saved) == list(range(2, 42))


WRITER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import SQLiteCheckpointStore, StaleCheckpointError
    store = SQLiteCheckpointStore(sys.argv[1])
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


def test_concurrent_writers_in_processes_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    store = SQLiteCheckpointStore(path)
    store.save(TaskCheckpoint(goal="count"), "s")
    processes = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{i}", "15"]) for i in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in processes)
    final = store.load("s")
    assert final is not None and final.version == 61 and len(final.learnings) == 60
    assert sorted(set(final.learnings)) == ["p0", "p1", "p2", "p3"]


CRASHER = textwrap.dedent("""
    import sys
    from ctxwindow.checkpoint import FileCheckpointStore, SQLiteCheckpointStore, TaskCheckpoint
    kind, path = sys.argv[1], sys.argv[2]
    store = FileCheckpointStore(path, keep=3) if kind == "file" else SQLiteCheckpointStore(path, keep=3)
    checkpoint = store.load("s") or TaskCheckpoint(goal="survive")
    while True:
        checkpoint.learnings.append("x" * 200)
        store.save(checkpoint, "s")
        print(checkpoint.version, flush=True)
""")


def kill_trials(kind: str, path: Path, trials: int, seed: int) -> tuple[int, int]:
    """Kills a writer at random moments; returns (bad loads, trials)."""
    rng = random.Random(seed)
    bad = 0
    for _ in range(trials):
        writer = subprocess.Popen([sys.executable, "-c", CRASHER, kind, str(path)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        first = writer.stdout.readline()  # at least one save acknowledged
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(writer.pid, signal.SIGKILL)
        acknowledged = [int(first)] + [int(line) for line in writer.stdout.read().split()]
        writer.stdout.close()
        writer.wait()
        store = FileCheckpointStore(path, keep=3) if kind == "file" else SQLiteCheckpointStore(path, keep=3)
        loaded = store.load("s")
        if loaded is None or loaded.version < acknowledged[-1] or len(loaded.learnings) != loaded.version:
            bad += 1
    return bad, trials


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_sigkill_during_saves_never_loses_an_acknowledged_version(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("store" if kind == "file" else "store.db")
    bad, trials = kill_trials(kind, path, trials=12, seed=7)
    assert bad == 0, f"{bad} of {trials} loads lost or corrupt"


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


def test_corrupt_sqlite_rows_fall_back(tmp_path: Path) -> None:
    import sqlite3

    store = SQLiteCheckpointStore(tmp_path / "c.db")
    checkpoint = TaskCheckpoint(goal="good")
    store.save(checkpoint, "s")
    store.save(checkpoint, "s")
    with sqlite3.connect(tmp_path / "c.db") as connection:
        connection.execute("UPDATE checkpoints SET data = '{\"trunc' WHERE version = 2")
    loaded = store.load("s")
    assert loaded is not None and loaded.version == 1 and store.warnings


def test_validation() -> None:
    with pytest.raises(InvalidArgumentError, match="needs a goal"):
        TaskCheckpoint(goal="  ")
    with pytest.raises(InvalidArgumentError, match="window_id"):
        TaskCheckpoint(goal="g", window_id="bad id!")
    with pytest.raises(InvalidArgumentError, match="version"):
        TaskCheckpoint(goal="g", version=-1)
    with pytest.raises(InvalidArgumentError, match="status 'maybe'"):
        TaskCheckpoint(goal="g", subtasks=[Subtask("a", "maybe")])
    warnings = TaskCheckpoint(goal="g", subtasks=[Subtask("a", "done"), Subtask("b")]).validate()
    assert warnings and "no current subtask" in warnings[0]
    with pytest.raises(InvalidArgumentError, match="session_id"):
        FileCheckpointStore(Path("/tmp")).load("../etc")


def test_bootstrap_prompt_is_ordered_and_bounded() -> None:
    checkpoint = TaskCheckpoint(
        goal="Migrate auth to OAuth", constraints=["Never push to main without review."],
        subtasks=[Subtask("inventory endpoints", "done"), Subtask("token refresh", "in_progress"),
                  Subtask("rollout", "planned")],
        decisions=["Use PKCE for the mobile client."], open_issues=["Refresh fails on Safari"],
        learnings=["Staging tokens expire after 5 minutes."] * 20, summary="Long story " * 100)
    text = bootstrap_prompt(checkpoint)
    order = ["Goal:", "Constraints (verbatim):", "Current subtask:", "Remaining (not started):", "Last done:",
             "Open issues:", "Decisions:", "Learnings:", "Previous summary:"]
    positions = [text.index(title) for title in order]
    assert positions == sorted(positions)
    assert "- rollout" in text.split("Remaining (not started):")[1].split("Last done:")[0]
    assert "rollout" not in text.split("Last done:")[1].split("Open issues:")[0]
    bounded = bootstrap_prompt(checkpoint, max_tokens=80)
    assert Tokenizer("o200k_base").count(bounded) <= 80
    assert "Migrate auth to OAuth" in bounded and "Never push to main without review." in bounded
    assert "Previous summary" not in bounded


def test_window_checkpoint_and_resume_round_trip(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "w.db")
    evicted: list[Any] = []

    def build() -> ContextWindow:
        return ContextWindow("gpt-4o", max_tokens=1400, preserve_recent=2,
                             strategies=[Summarize(preserve_recent=3)])

    window = build()
    window.set_system("You are a travel agent.")
    window.events.on("on_evict", store.archiver("trip"))
    window.events.on("on_evict", lambda e, u: evicted.extend(e))
    window.write_note("constraints", "Never book basic economy.", "critical")
    window.add({"role": "user", "content": "Find me a flight to Denver (reservation ZFA04Y)."}, pinned=True)
    for i in range(12):
        window.add({"role": "user", "content": f"question {i} " + "details " * 30})
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", f"flight HAT{100 + i} costs {200 + i} USD " * 10))
    window.add(call("pending"))  # a call still waiting for its result
    checkpoint = window.checkpoint("Book a trip", constraints=["Never book basic economy."])
    store.save(checkpoint, "trip")

    resumed = build()
    assert resumed.resume(store, "trip") is not None
    assert resumed.messages() == window.messages()
    assert resumed.usage.total == window.usage.total
    assert resumed.pending_messages() == window.pending_messages()
    resumed.add(result("pending", "done"))
    window.add(result("pending", "done"))
    assert resumed.messages() == window.messages()
    check_valid(resumed, "You are a travel agent.")
    summary = resumed.messages()[2]["content"]
    retrieval_id = summary.rsplit("retrieval id ", 1)[1].rstrip(")")
    assert resumed.retrieve(retrieval_id)
    assert evicted and store.search("trip", "HAT100")
    assert store.get(store.search("trip", "question")[0][0]) is not None
    with pytest.raises(InvalidArgumentError, match="no window state"):
        build().restore(TaskCheckpoint(goal="x"))


def test_save_and_load_latency(tmp_path: Path) -> None:
    # Measured properly by benches/bench_checkpoint.py; here only that both work with fsync.
    store = FileCheckpointStore(tmp_path)
    checkpoint = TaskCheckpoint(goal="g", learnings=["x" * 100] * 20)
    store.save(checkpoint, "s")
    assert json.loads((tmp_path / "s" / "v00000001.json").read_text())["version"] == 1
