"""``Notes``: what the agent writes down during the run (task progress, decisions, bugs,
constraints, learnings), carried forward verbatim in every prompt within a token cap, critical
first. The window sends them as a system message after the system prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ctxwindow._checks import check_int, check_text
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.strategies.base import CompactionState, StrategyReport

__all__ = ["Notes", "Note", "NOTE_CATEGORIES", "IMPORTANCE"]

NOTE_CATEGORIES = ("task_progress", "decisions", "bugs", "constraints", "learnings", "misc")
IMPORTANCE = {"critical": 0, "high": 1, "normal": 2, "low": 3}


@dataclass(frozen=True)
class Note:
    """One note."""

    category: str
    text: str
    importance: str
    serial: int


@dataclass
class Notes:
    """A notebook carried in every prompt, at most ``max_tokens`` (most important first, then
    newest); notes that do not fit are left out of the prompt but kept in ``notes``."""

    max_tokens: int = 500
    name: str = "notes"
    cost: str = "free"
    notes: list[Note] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_int(self.max_tokens, "max_tokens", 1)

    def write_note(self, category: str, text: str, importance: str = "normal") -> Note:
        """Adds a note. ``category`` in task_progress, decisions, bugs, constraints, learnings,
        misc; ``importance`` in critical, high, normal, low; ``text`` a non-empty str that is
        valid Unicode (:class:`~ctxwindow.errors.InvalidTextError` for a lone surrogate)."""
        if not isinstance(category, str) or category not in NOTE_CATEGORIES:
            raise InvalidArgumentError(f"unknown note category {category!r}; known: {', '.join(NOTE_CATEGORIES)}")
        if not isinstance(importance, str) or importance not in IMPORTANCE:
            raise InvalidArgumentError(f"unknown importance {importance!r}; known: {', '.join(IMPORTANCE)}")
        if not isinstance(text, str) or not text.strip():
            raise InvalidTypeError("a note's text must be a non-empty str")
        check_text(text, "a note's text")
        note = Note(category, text.strip(), importance, len(self.notes))
        self.notes.append(note)
        return note

    def render(self, count: Callable[[str], int]) -> str | None:
        """The notes message text within the cap (None without notes)."""
        if not self.notes:
            return None
        ordered = sorted(self.notes, key=lambda n: (IMPORTANCE[n.importance], -n.serial))
        header = "[Notes]"
        lines: list[str] = []
        used = count(header)
        for note in ordered:
            line = f"- ({note.category}, {note.importance}) {note.text}"
            tokens = count(line + "\n")
            if used + tokens <= self.max_tokens:
                lines.append(line)
                used += tokens
        return header + "\n" + "\n".join(lines) if lines else None

    def apply(self, state: CompactionState) -> StrategyReport:
        """Notes never compact anything: they are carried by the window; a no-op here."""
        return StrategyReport(self.name, state.total(), state.total())
