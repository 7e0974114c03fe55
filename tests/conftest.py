"""Shared fixtures: the real data in ``../shared/data`` and Python ``tiktoken`` run offline as the
reference implementation."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("CTXWINDOW_SHARED_DATA", ROOT.parent / "shared" / "data"))

# The name Python tiktoken caches each vocabulary under (sha1 of its download URL).
TIKTOKEN_CACHE_NAMES = {
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
}

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def send_json(handler: BaseHTTPRequestHandler, reply: object) -> None:
    """Answers a fake provider's request with ``reply`` as JSON (status 200)."""
    data = json.dumps(reply).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def require_shared_data() -> Path:
    """The shared data folder; its absence fails under CI and skips elsewhere."""
    if SHARED_DATA.is_dir():
        return SHARED_DATA
    if os.environ.get("CI"):
        pytest.fail(f"shared data not found at {SHARED_DATA} (set CTXWINDOW_SHARED_DATA)")
    pytest.skip(f"shared data not found at {SHARED_DATA} (set CTXWINDOW_SHARED_DATA)")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return require_shared_data()


@pytest.fixture(scope="session")
def tiktoken_module(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Python tiktoken reading its vocabularies from a cache built from the bundled gz files."""
    data = require_shared_data()
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name, cache_name in TIKTOKEN_CACHE_NAMES.items():
        with gzip.open(data / "tiktoken_vocab" / f"{name}.tiktoken.gz", "rb") as source:
            (cache / cache_name).write_bytes(source.read())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    return tiktoken


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def shared_texts(data: Path) -> list[str]:
    """Every string value of every JSON/JSONL file, and the whole text of every other text file,
    in ``../shared/data`` (vocabularies excepted)."""
    texts: list[str] = []
    for path in sorted(data.rglob("*")):
        if not path.is_file() or path.suffix == ".gz":
            continue
        raw = path.read_text(encoding="utf-8", errors="strict")
        if path.suffix in (".json", ".traj"):
            texts.extend(_strings(json.loads(raw)))
        elif path.suffix == ".jsonl":
            for line in raw.splitlines():
                if line.strip():
                    texts.extend(_strings(json.loads(line)))
        else:
            texts.append(raw)
    return texts


@pytest.fixture(scope="session")
def real_texts(shared_data: Path) -> list[str]:
    return shared_texts(shared_data)


def tau_bench_trajectories(data: Path) -> list[list[dict[str, Any]]]:
    """The message lists of the 200 tau-bench airline runs."""
    records = json.loads((data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    return [record["traj"] for record in records]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A throwaway PostgreSQL server for the whole run (:mod:`tests.pg_server`). Missing server
    binaries or psycopg fail the tests that need it (never a silent skip);
    ``CTXWINDOW_SKIP_POSTGRES=1`` skips them explicitly."""
    if os.environ.get("CTXWINDOW_SKIP_POSTGRES") == "1":
        pytest.skip("CTXWINDOW_SKIP_POSTGRES=1: PostgreSQL tests skipped")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as error:
        pytest.fail(f"the PostgreSQL tests need psycopg 3 and psycopg_pool ({error}): "
                    "pip install -r requirements-dev.txt (or 'ctxwindow[postgres]')")
    from .pg_server import MISSING, find_server_binaries, postgres_server as start

    if find_server_binaries() is None:
        pytest.fail(MISSING)
    with start() as server:
        yield server
