"""Checkpoint durability, latency and throughput.

- SIGKILL trials per store (a writer killed at a random moment while saving in a loop; a load
  must return a complete version no older than the last one acknowledged): 1000 by default.
- save + load of a typical checkpoint, one client: median and p99 over 300 rounds, the stores
  taking turns round by round, with fsync (file and SQLite fsync every write; PostgreSQL runs
  with fsync and synchronous_commit on).
- saves per second with 1, 4 and 16 concurrent clients, each a separate *process* (as agents
  are) with its own session, saving in a loop for a fixed time; PostgreSQL next to SQLite.

PostgreSQL is a throwaway local server (``tests/pg_server.py``: initdb in a temporary folder,
Unix socket), started and stopped by this script.

    python benches/bench_checkpoint.py [--trials N] [--seconds S]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import write_results  # noqa: E402

from ctxwindow.checkpoint import Subtask, TaskCheckpoint  # noqa: E402
from tests.pg_server import postgres_server  # noqa: E402
from tests.test_checkpoint import close, kill_trials, open_kind  # noqa: E402

CLIENTS = (1, 4, 16)


def typical() -> TaskCheckpoint:
    return TaskCheckpoint(
        goal="Migrate the auth service to OAuth 2.1 with PKCE", success_criteria=["all tests green"] * 3,
        constraints=["Never push to main without review."] * 5,
        subtasks=[Subtask(f"step {i}", "done" if i < 4 else "planned") for i in range(8)],
        decisions=["Use PKCE for mobile because implicit flow is deprecated."] * 6,
        open_issues=["Refresh fails on Safari"] * 3, learnings=["Staging tokens expire after 5 minutes."] * 6,
        summary="The agent inventoried the endpoints and started on token refresh. " * 20)


def latency_ms(stores: dict[str, Any], rounds: int = 300) -> dict[str, tuple[float, float]]:
    """(median, p99) of one save followed by one load, in ms, per store. The stores take turns
    round by round, so that a busy disk or CPU slows them alike and their ratios stay fair."""
    checkpoints = {kind: typical() for kind in stores}
    samples: dict[str, list[float]] = {kind: [] for kind in stores}
    for _ in range(rounds + 20):
        for kind, store in stores.items():
            started = time.perf_counter()
            store.save(checkpoints[kind], "bench")
            store.load("bench")
            samples[kind].append((time.perf_counter() - started) * 1e3)
    figures = {}
    for kind, values in samples.items():
        values = sorted(values[20:])  # the first rounds warm up connections and caches
        figures[kind] = statistics.median(values), values[min(len(values) - 1, round(0.99 * len(values)))]
    return figures


CLIENT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[4])
    from benches.bench_checkpoint import typical
    from tests.test_checkpoint import open_kind
    kind, location, session, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[5])
    store = open_kind(kind, location, keep=20)
    checkpoint = typical()
    store.save(checkpoint, session)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    while time.time() < start:
        time.sleep(0.0005)
    saves = 0
    while time.time() < start + seconds:
        store.save(checkpoint, session)
        saves += 1
    print(saves, flush=True)
""")


def saves_per_second(kind: str, location: str, clients: int, seconds: float) -> float:
    """Total saves per second of ``clients`` processes saving at once, each to its own session
    (they start together once every one has connected and saved once)."""
    root = str(Path(__file__).resolve().parent.parent)
    processes = [subprocess.Popen([sys.executable, "-c", CLIENT, kind, location, f"c{clients}-{i}", root,
                                   str(seconds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for i in range(clients)]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    start = time.time() + 0.2
    counts = [int(p.communicate(f"{start}\n", timeout=300)[0]) for p in processes]
    assert all(p.returncode == 0 for p in processes)
    return sum(counts) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000, help="SIGKILL trials per store")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput run")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxwindow-bench-") as temporary, postgres_server() as server:
        run(Path(temporary), server.new_schema, arguments.trials, arguments.seconds)


def run(folder: Path, new_schema: Callable[[], str], trials: int, seconds: float) -> None:
    kinds = ("file", "sqlite", "postgres")

    def location(kind: str, name: str) -> str:
        """Where a store of ``kind`` keeps its checkpoints: a folder, a file or a new schema."""
        if kind == "postgres":
            return new_schema()
        return str(folder / (name if kind == "file" else f"{name}.db"))

    results: dict[str, Any] = {"clients": "processes, one session each", "throughput_seconds": seconds,
                               **{kind: {"saves_per_second": {}} for kind in kinds}}
    stores = {kind: open_kind(kind, location(kind, "latency"), keep=20) for kind in kinds}
    for kind, (median, p99) in latency_ms(stores).items():
        results[kind].update(save_load_ms=median, save_load_p99_ms=p99)
        close(stores[kind])
    for clients in CLIENTS:  # SQLite and PostgreSQL back to back at each count
        for kind in ("sqlite", "postgres"):
            results[kind]["saves_per_second"][clients] = saves_per_second(
                kind, location(kind, f"throughput-{clients}"), clients, seconds)
    for kind in kinds:
        bad, done = kill_trials(kind, location(kind, "kill"), trials, seed=1)
        results[kind].update(trials=done, bad_loads=bad)
    table = [["store", "save + load median", "p99", *[f"saves/s, {n} client{'s' if n > 1 else ''}" for n in CLIENTS],
              "SIGKILL trials", "lost or corrupt loads"]]
    for kind in kinds:
        figures = results[kind]
        throughput = figures["saves_per_second"]
        table.append([kind, f"{figures['save_load_ms']:.2f} ms", f"{figures['save_load_p99_ms']:.2f} ms",
                      *[f"{throughput[n]:.0f}" if n in throughput else "-" for n in CLIENTS],
                      str(figures["trials"]), str(figures["bad_loads"])])
    for clients in CLIENTS:
        results[f"postgres_vs_sqlite_saves_{clients}"] = (
            results["postgres"]["saves_per_second"][clients] / results["sqlite"]["saves_per_second"][clients])
    results["postgres_vs_sqlite_save_load_median"] = results["postgres"]["save_load_ms"] / results["sqlite"]["save_load_ms"]
    write_results("checkpoint", results, table, "Checkpoints")


if __name__ == "__main__":
    main()
