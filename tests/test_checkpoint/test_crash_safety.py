"""Crash safety: a writer killed (SIGKILL) at random moments while saving never costs an
acknowledged version, and never leaves a half-written one that loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from .stores import KINDS, kill_trials, server_for


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_during_saves_never_loses_an_acknowledged_version(request: pytest.FixtureRequest, tmp_path: Path,
                                                                  kind: str) -> None:
    server = server_for(request, kind)
    path = server.new_schema() if server else tmp_path / ("store" if kind == "file" else "store.db")
    bad, trials = kill_trials(kind, path, trials=12, seed=7)
    assert bad == 0, f"{bad} of {trials} loads lost or corrupt"
