"""The quick start (README and the site's home page) and the sync and formats example run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FRAMEWORKS = ROOT / "docs" / "guides" / "frameworks.md"
HOME = ROOT / "docs" / "index.md"


def test_the_readme_sync_and_formats_example_runs() -> None:
    text = FRAMEWORKS.read_text()
    section = text.split("\n## Sync\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "docs/guides/frameworks.md", "exec"), namespace)
    window = namespace["window"]
    assert [m["role"] for m in window.messages()] == ["system", "user", "assistant", "tool"]  # type: ignore[attr-defined]
    assert namespace["system"] == "Be brief."


@pytest.mark.parametrize("page", [README, HOME], ids=["README.md", "docs/index.md"])
def test_the_readme_quick_start_runs(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = page.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], page.name, "exec"), {})
    assert capsys.readouterr().out == "green 5\n"
