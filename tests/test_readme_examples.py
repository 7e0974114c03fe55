"""The README's quick start and its sync and formats example run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_sync_and_formats_example_runs() -> None:
    text = README.read_text()
    section = text.split("## Agent frameworks and other formats", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    window = namespace["window"]
    assert [m["role"] for m in window.messages()] == ["system", "user", "assistant", "tool"]  # type: ignore[attr-defined]
    assert namespace["system"] == "Be brief."


def test_the_readme_quick_start_runs(capsys: pytest.CaptureFixture[str]) -> None:
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "README.md", "exec"), {})
    assert capsys.readouterr().out == "green 5\n"
