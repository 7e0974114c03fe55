"""The resume text: :func:`bootstrap_prompt`, what a fresh window is given to carry on a task.

>>> checkpoint = TaskCheckpoint(goal="Migrate auth to OAuth", subtasks=[Subtask("rollout", "in_progress")])
>>> print(bootstrap_prompt(checkpoint))
[Resuming task, checkpoint version 0]
Goal:
- Migrate auth to OAuth
Current subtask:
- rollout
"""

from __future__ import annotations

import functools
import math

from ctxwindow._native import Tokenizer
from ctxwindow.errors import InvalidArgumentError

from .model import Subtask, TaskCheckpoint

__all__ = ["bootstrap_prompt"]


@functools.cache
def _counter() -> Tokenizer:
    return Tokenizer("o200k_base")


def _sections(checkpoint: TaskCheckpoint) -> list[tuple[str, list[str]]]:
    """The sections of the resume text, most important first."""
    def titles(status: str) -> list[Subtask]:
        return [s for s in checkpoint.subtasks if s.status == status]

    return [
        ("Goal", [checkpoint.goal]),
        ("Constraints (verbatim)", list(checkpoint.constraints)),
        ("Current subtask", [s.title + (f" ({s.notes})" if s.notes else "") for s in titles("in_progress")]),
        ("Remaining (not started)", [s.title for s in titles("planned")]),
        ("Last done", [s.title for s in titles("done")[-3:]]),
        ("Open issues", list(checkpoint.open_issues)),
        ("Decisions", list(checkpoint.decisions)),
        ("Success criteria", list(checkpoint.success_criteria)),
        ("Learnings", list(checkpoint.learnings)),
        ("Previous summary", [checkpoint.summary] if checkpoint.summary else []),
    ]


def bootstrap_prompt(checkpoint: TaskCheckpoint, max_tokens: int | None = None) -> str:
    """The text that resumes a task in a fresh window: goal, constraints, current subtask,
    remaining, last done, open issues, decisions, success criteria, learnings, previous summary,
    most important first; within ``max_tokens`` (o200k tokens) the least important lines go
    first. Planned subtasks are never presented as done."""
    header = f"[Resuming task, checkpoint version {checkpoint.version}]"

    def render(kept: list[tuple[str, list[str]]]) -> str:
        lines = [header]
        for title, values in kept:
            if values:
                lines += [f"{title}:", *[f"- {v}" for v in values]]
        return "\n".join(lines)

    kept = _sections(checkpoint)
    text = render(kept)
    if max_tokens is None:
        return text
    if max_tokens < 1:
        raise InvalidArgumentError(f"max_tokens must be >= 1, got {max_tokens}")
    # Drop from the least important section, last lines first; the goal stays whole.
    for index in range(len(kept) - 1, 0, -1):
        while kept[index][1] and _counter().count(text) > max_tokens:
            kept[index][1].pop()
            text = render(kept)
    if _counter().count(text) > max_tokens:
        ratio = max_tokens / max(_counter().count(text), 1)
        text = text[: max(math.floor(len(text) * ratio) - 3, 0)] + "..."
        while text and _counter().count(text) > max_tokens:
            text = text[: -max(len(text) // 10, 1)]
    return text
