"""Copies each benches/results/*.md table into README.md between its begin/end markers."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    for table in sorted((ROOT / "benches" / "results").glob("*.md")):
        name = f"benches/results/{table.name}"
        pattern = re.compile(
            rf"(<!-- begin {re.escape(name)} -->\n).*?(<!-- end {re.escape(name)} -->)", re.S
        )
        text = pattern.sub(lambda m: m.group(1) + table.read_text() + m.group(2), text)
    readme.write_text(text)


if __name__ == "__main__":
    main()
