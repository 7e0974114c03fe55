"""The seeds of the `count` fuzz target (fuzz/seeds/count/, where crashing inputs are added as
regression cases) count exactly as Python tiktoken counts them. `make fuzz` replays them first
and checks every mutant against tiktoken-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwindow import Tokenizer

SEEDS = sorted((Path(__file__).resolve().parent.parent / "fuzz" / "seeds" / "count").iterdir())


@pytest.mark.parametrize("path", SEEDS, ids=[p.name for p in SEEDS])
@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_seed_counts_like_tiktoken(path: Path, encoding: str, tiktoken_module: Any) -> None:
    text = path.read_bytes().decode("utf-8", "replace")
    reference = tiktoken_module.get_encoding(encoding)
    assert Tokenizer(encoding).count(text) == len(reference.encode_ordinary(text))


def test_there_are_seeds() -> None:
    assert len(SEEDS) >= 5
