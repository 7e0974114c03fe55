"""A griffe extension that lets the package's docstrings read well as Markdown.

The docstrings are written for ``help()`` and doctest: reST literals and roles, and ``>>>``
examples in running text. Rendered as Markdown, an example's ``window.retrieve(id)[-1]["content"]``
would read as a reference link, so each example becomes a fenced ``pycon`` block, and each role
(``:class:`~ctxwindow.errors.WindowBusyError```) becomes inline code with the name it shows in Sphinx.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

# :class:`~ctxwindow.errors.WindowBusyError`, :meth:`acompact`, :data:`PRICES`, ...
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    """The name Sphinx would show: the last component after ``~``, else the whole target."""
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def _fence_examples(text: str) -> str:
    """Wraps every run of ``>>>`` lines and their expected output in a ``pycon`` fence."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        if out and out[-1].strip():
            out.append("")  # a fence must not continue a paragraph
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():  # the example ends at the first blank line
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
        if i < len(lines):
            out.append("")
    return "\n".join(out)


def _literal_blocks(text: str) -> str:
    """reST's ``for example::`` introduces an indented literal block: Markdown needs the colon only."""
    return re.sub(r"::\n", ":\n", text)


class ReadableDocstrings(griffe.Extension):
    """Rewrites each docstring once the object tree is complete (public paths resolve to it)."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Fences the examples and flattens the roles of ``obj``'s own docstring."""
        if obj.docstring is None:
            return
        text = obj.docstring.value
        obj.docstring.value = _literal_blocks(ROLE.sub(_role, _fence_examples(text)))
