"""The checkpoint model: :class:`TaskCheckpoint` and its :class:`Subtask`, their validation, the
stored document (``to_dict`` / ``from_dict``) and the progress file for people.

>>> checkpoint = TaskCheckpoint(goal="Migrate auth to OAuth", subtasks=[Subtask("inventory", "done")])
>>> TaskCheckpoint.from_dict(checkpoint.to_dict()) == checkpoint
True
>>> checkpoint.to_dict()["schema"]
'ctxwindow.checkpoint/1'
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxwindow.errors import CheckpointCorruptError, InvalidArgumentError, InvalidTypeError

__all__ = ["SCHEMA", "SUBTASK_STATUSES", "Subtask", "TaskCheckpoint", "check_id", "check_session"]

#: The schema of a stored checkpoint document; a document of another schema is corrupt.
SCHEMA = "ctxwindow.checkpoint/1"
SUBTASK_STATUSES = ("planned", "in_progress", "done")
# Window and session ids name folders and rows: no separators, no spaces, bounded length.
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_LIST_FIELDS = ("success_criteria", "constraints", "decisions", "open_issues", "learnings")


def check_id(name: str, value: object) -> str:
    """``value`` if it is a valid window or session id (1-128 characters of letters, digits and
    ``_.:-``); :class:`InvalidArgumentError` naming ``name`` otherwise."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidArgumentError(f"{name} must be 1-128 characters of letters, digits and _.:-, got {value!r}")
    return value


def check_session(session_id: str) -> str:
    """``session_id`` if it is a valid session id (:func:`check_id`)."""
    return check_id("session_id", session_id)


@dataclass
class Subtask:
    """A step of the task; ``status`` is one of :data:`SUBTASK_STATUSES`."""

    title: str
    status: str = "planned"
    notes: str = ""


@dataclass
class TaskCheckpoint:
    """The state of a task across windows. ``version`` is the stored version this object was
    loaded at or last saved as (0 when new); ``saved_at`` is set by the store (epoch seconds)."""

    goal: str
    window_id: str = "default"
    version: int = 0
    success_criteria: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    subtasks: list[Subtask] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    open_issues: list[str] = field(default_factory=list)
    learnings: list[str] = field(default_factory=list)
    summary: str = ""
    saved_at: float | None = None
    #: A window's state (ContextWindow.checkpoint / resume); opaque to the stores.
    window_state: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.subtasks = [s if isinstance(s, Subtask) else Subtask(**s) for s in self.subtasks]
        self.validate()

    def validate(self) -> list[str]:
        """Raises :class:`InvalidArgumentError` for errors (no goal, invalid ids or versions,
        unknown statuses); returns warnings (remaining work but no current subtask)."""
        if not isinstance(self.goal, str) or not self.goal.strip():
            raise InvalidArgumentError("a checkpoint needs a goal")
        check_id("window_id", self.window_id)
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise InvalidArgumentError(f"version must be an int >= 0, got {self.version!r}")
        for name in _LIST_FIELDS:
            values = getattr(self, name)
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise InvalidTypeError(f"{name} must be a list of str")
        for subtask in self.subtasks:
            if subtask.status not in SUBTASK_STATUSES:
                raise InvalidArgumentError(
                    f"subtask {subtask.title!r} has status {subtask.status!r}; known: {', '.join(SUBTASK_STATUSES)}")
        warnings = []
        planned = [s for s in self.subtasks if s.status == "planned"]
        current = [s for s in self.subtasks if s.status == "in_progress"]
        if planned and not current:
            warnings.append("remaining work but no current subtask: the next planned one is not started")
        if len(current) > 1:
            warnings.append(f"{len(current)} subtasks in progress at once")
        return warnings

    def to_dict(self) -> dict[str, Any]:
        """The stored document: every field, and ``schema`` (:data:`SCHEMA`)."""
        data = asdict(self)
        data["schema"] = SCHEMA
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskCheckpoint:
        """Parses a stored checkpoint; :class:`CheckpointCorruptError` when it is not one."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise CheckpointCorruptError(f"not a {SCHEMA} document")
        fields = {k: v for k, v in data.items() if k != "schema"}
        try:
            return cls(**fields)
        except (TypeError, CheckpointCorruptError, InvalidArgumentError, InvalidTypeError) as error:
            raise CheckpointCorruptError(f"invalid checkpoint: {error}") from None

    def to_markdown(self) -> str:
        """A progress file for people."""
        marks = {"done": "[x]", "in_progress": "[~]", "planned": "[ ]"}
        lines = [f"# {self.goal}", "", f"version {self.version}, window {self.window_id}"]
        if self.saved_at:
            lines[-1] += time.strftime(", saved %Y-%m-%d %H:%M:%S UTC", time.gmtime(self.saved_at))
        for title, values in (("Success criteria", self.success_criteria), ("Constraints", self.constraints)):
            if values:
                lines += ["", f"## {title}", *[f"- {v}" for v in values]]
        if self.subtasks:
            lines += ["", "## Subtasks", *[f"- {marks[s.status]} {s.title}" + (f": {s.notes}" if s.notes else "")
                                           for s in self.subtasks]]
        for title, values in (("Decisions", self.decisions), ("Open issues", self.open_issues),
                              ("Learnings", self.learnings)):
            if values:
                lines += ["", f"## {title}", *[f"- {v}" for v in values]]
        if self.summary:
            lines += ["", "## Summary", self.summary]
        return "\n".join(lines) + "\n"
