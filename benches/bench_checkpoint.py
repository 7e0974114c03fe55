"""Checkpoint durability and latency: 1000 SIGKILL trials per store (a writer killed at a random
moment while saving in a loop; a load must return a complete version no older than the last one
acknowledged), and save + load of a typical checkpoint with fsync."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import write_results  # noqa: E402

from ctxwindow.checkpoint import FileCheckpointStore, SQLiteCheckpointStore, Subtask, TaskCheckpoint  # noqa: E402
from tests.test_checkpoint import kill_trials  # noqa: E402

TRIALS = 1000


def typical() -> TaskCheckpoint:
    return TaskCheckpoint(
        goal="Migrate the auth service to OAuth 2.1 with PKCE", success_criteria=["all tests green"] * 3,
        constraints=["Never push to main without review."] * 5,
        subtasks=[Subtask(f"step {i}", "done" if i < 4 else "planned") for i in range(8)],
        decisions=["Use PKCE for mobile because implicit flow is deprecated."] * 6,
        open_issues=["Refresh fails on Safari"] * 3, learnings=["Staging tokens expire after 5 minutes."] * 6,
        summary="The agent inventoried the endpoints and started on token refresh. " * 20)


def latency_ms(store: Any) -> float:
    checkpoint = typical()
    samples = []
    for _ in range(200):
        started = time.perf_counter()
        store.save(checkpoint, "bench")
        store.load("bench")
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="ctxwindow-bench-") as temporary:
        run(Path(temporary))


def run(folder: Path) -> None:
    results: dict[str, Any] = {}
    table = [["store", "save + load (median, fsync)", "SIGKILL trials", "lost or corrupt loads"]]
    for kind in ("file", "sqlite"):
        store = FileCheckpointStore(folder / "files") if kind == "file" else SQLiteCheckpointStore(folder / "c.db")
        ms = latency_ms(store)
        bad, trials = kill_trials(kind, folder / (f"kill-{kind}" + (".db" if kind == "sqlite" else "")), TRIALS, seed=1)
        results[kind] = {"save_load_ms": ms, "trials": trials, "bad_loads": bad}
        table.append([kind, f"{ms:.2f} ms", str(trials), str(bad)])
    write_results("checkpoint", results, table, "Checkpoints")


if __name__ == "__main__":
    main()
