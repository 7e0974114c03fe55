"""Copies each benches/results/*.md table into docs/performance.md between its begin/end markers.

Every table must have its markers on the page: a table written by a benchmark but never shown
(or a marker whose table is gone) is an error, not a silent skip.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "performance.md"
MARKER = re.compile(r"<!-- begin (benches/results/[^ ]+\.md) -->")


def embed(text: str, tables: dict[str, str]) -> str:
    """``text`` with the content between each table's markers replaced by that table."""
    for name, table in tables.items():
        pattern = re.compile(rf"(<!-- begin {re.escape(name)} -->\n).*?(<!-- end {re.escape(name)} -->)", re.S)
        text, found = pattern.subn(lambda m: m.group(1) + table + m.group(2), text)
        if found != 1:
            raise SystemExit(f"{PAGE.relative_to(ROOT)}: {found} marker pairs for {name}, expected 1")
    unknown = sorted(set(MARKER.findall(text)) - set(tables))
    if unknown:
        raise SystemExit(f"{PAGE.relative_to(ROOT)}: markers without a table in benches/results: {', '.join(unknown)}")
    return text


def main() -> None:
    tables = {f"benches/results/{path.name}": path.read_text()
              for path in sorted((ROOT / "benches" / "results").glob("*.md"))}
    PAGE.write_text(embed(PAGE.read_text(), tables))
    print(f"{len(tables)} tables embedded in {PAGE.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
