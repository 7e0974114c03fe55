"""Helpers shared by the benchmark scripts: machine description, timing, result files, and
Python tiktoken run offline from the shared vocabulary files."""

from __future__ import annotations

import gzip
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benches" / "results"
SHARED_DATA = Path(os.environ.get("CTXWINDOW_SHARED_DATA", ROOT.parent / "shared" / "data"))
TIKTOKEN_CACHE_NAMES = {
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
}


def machine() -> str:
    """One line describing the machine the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def best_seconds(call: Callable[[], object], repeat: int = 5, min_time: float = 0.2) -> float:
    """The best time of one call over `repeat` rounds, each looping for at least `min_time`."""
    best = float("inf")
    for _ in range(repeat):
        loops = 0
        started = time.perf_counter()
        while True:
            call()
            loops += 1
            elapsed = time.perf_counter() - started
            if elapsed >= min_time:
                break
        best = min(best, elapsed / loops)
    return best


def median(values: list[float]) -> float:
    return statistics.median(values)


def offline_tiktoken() -> Any:
    """Python tiktoken with its vocabularies read from the shared gz files (no network)."""
    cache = Path(tempfile.mkdtemp(prefix="tiktoken-cache-"))
    for name, cache_name in TIKTOKEN_CACHE_NAMES.items():
        with gzip.open(SHARED_DATA / "tiktoken_vocab" / f"{name}.tiktoken.gz", "rb") as source:
            (cache / cache_name).write_bytes(source.read())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    return tiktoken


def write_results(name: str, payload: dict[str, Any], table: list[list[str]], title: str) -> None:
    """Writes benches/results/NAME.json and NAME.md (a markdown table under a title line)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"machine": machine(), **payload}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    header, *rows = table
    lines = [f"**{title}** ({payload['machine']})", "", "| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
