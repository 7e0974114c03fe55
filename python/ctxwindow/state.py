"""The serialized state of a window, as carried by ``TaskCheckpoint.window_state``: the
conversation (with pins, groups, summaries and the originals of rewritten messages), the pending
tool-call group, notes, the in-memory archive, the system prompt, context, tool definitions,
output reserve, calibration and standing instructions. JSON-compatible; token counts are not stored (a restoring window
counts with its own tokenizer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxwindow.errors import InvalidArgumentError
from ctxwindow.messages import PLACEHOLDER_USER, Message, check_history, copy_message, tool_call_ids
from ctxwindow.strategies.base import Entry

__all__ = ["WindowState", "calibration_bounds", "entry_to_dict", "entry_from_dict", "load_entries"]

FORMAT = 2


def calibration_bounds(exact: bool) -> tuple[float, float]:
    """The range a window's calibration (billed over counted prompt tokens) is kept in: [1, 1.5]
    with an exact tokenizer, whose count is never loosened, and [0.5, 3] with an estimate, which
    the provider's billing may lower as well as raise."""
    return (1.0, 1.5) if exact else (0.5, 3.0)


def entry_to_dict(entry: Entry) -> dict[str, Any]:
    """One entry as JSON-compatible data."""
    return {"message": copy_message(entry.message), "seq": entry.seq, "group": entry.group,
            "turn": entry.turn, "pinned": entry.pinned,
            "original": copy_message(entry.original) if entry.original is not None else None,
            "kind": entry.kind}


def entry_from_dict(data: dict[str, Any], tokens: int) -> Entry:
    """An entry from :func:`entry_to_dict` data, with its count."""
    original = data.get("original")
    if not isinstance(data["pinned"], bool) or (original is not None and not isinstance(original, dict)):
        raise ValueError("an entry's pinned must be a bool and its original a message dict or None")
    return Entry(copy_message(data["message"]), tokens, int(data["seq"]), int(data["group"]),
                 int(data["turn"]), data["pinned"], copy_message(original) if original is not None else None,
                 str(data.get("kind", "message")))


@dataclass(frozen=True)
class WindowState:
    """A window's state, ready to serialize (:meth:`to_dict`) or restore."""

    entries: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    open_calls: list[str]
    seq: int
    turn: int
    calibration: float
    notes: list[dict[str, str]]
    archive: dict[str, Any] | None
    system: str | None
    context: str | None
    tools: list[dict[str, Any]] | None
    reserve_output: int
    #: The standing instructions, superseded ones included (``StandingInstructions.to_list``).
    instructions: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "entries": self.entries, "pending": self.pending,
                "open_calls": self.open_calls, "seq": self.seq, "turn": self.turn,
                "calibration": self.calibration, "notes": self.notes, "archive": self.archive,
                "system": self.system, "context": self.context, "tools": self.tools,
                "reserve_output": self.reserve_output, "instructions": self.instructions}

    @classmethod
    def from_dict(cls, data: object, reserve_output: int) -> WindowState:
        """Parses :meth:`to_dict` data (also of earlier versions, which had no tools or reserve:
        ``reserve_output`` is then kept); :class:`InvalidArgumentError` when it is not a window
        state."""
        if not isinstance(data, dict) or "entries" not in data:
            raise InvalidArgumentError("the checkpoint holds no window state (use ContextWindow.checkpoint)")
        try:
            state = cls(
                entries=list(data["entries"]), pending=list(data.get("pending", [])),
                open_calls=[str(c) for c in data.get("open_calls", [])], seq=int(data["seq"]),
                turn=int(data["turn"]), calibration=float(data.get("calibration", 1.0)),
                notes=list(data.get("notes", [])), archive=data.get("archive"),
                system=data.get("system"), context=data.get("context"), tools=data.get("tools"),
                reserve_output=int(data.get("reserve_output", reserve_output)),
                instructions=list(data.get("instructions", [])))
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidArgumentError(f"the checkpoint's window state is malformed: {error}") from None
        low, high = calibration_bounds(exact=False)  # the widest bounds
        if not low <= state.calibration <= high:  # also refuses NaN
            raise InvalidArgumentError(
                f"the checkpoint's window state is malformed: calibration {state.calibration} "
                f"not in [{low:g}, {high:g}]")
        seqs = [int(e.get("seq", -1)) if isinstance(e, dict) else -1 for e in state.entries + state.pending]
        if len(set(seqs)) != len(seqs) or any(s < 0 or s > state.seq for s in seqs):
            raise InvalidArgumentError(
                "the checkpoint's window state is malformed: entry seqs must be distinct, >= 0 and <= seq")
        return state



def load_entries(state: WindowState, count_message: Callable[[Message], int]) -> tuple[list[Entry], list[Entry]]:
    """The conversation's entries and the pending tool-call group of ``state``, counted with
    ``count_message``; :class:`InvalidArgumentError` when they are malformed or are not a
    conversation a provider would accept (a restoring window then changes nothing)."""
    try:
        entries = [entry_from_dict(e, count_message(e["message"])) for e in state.entries]
        pending = [entry_from_dict(e, count_message(e["message"])) for e in state.pending]
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidArgumentError(f"the checkpoint's window state is malformed: {error}") from None
    conversation = [e.message for e in entries]
    if conversation and conversation[0].get("role") != "user":
        conversation.insert(0, PLACEHOLDER_USER)
    problems = check_history(conversation + [e.message for e in pending], pending_tail=bool(pending))
    open_calls = (set(tool_call_ids(pending[0].message))
                  - {str(e.message.get("tool_call_id")) for e in pending[1:]}) if pending else set()
    if open_calls != set(state.open_calls) or (pending and not open_calls):
        problems.append("the open calls do not match the pending tool-call group")
    if problems:
        raise InvalidArgumentError("the checkpoint's window state is not a valid conversation: " + "; ".join(problems))
    return entries, pending
