"""mini-swe-agent trajectories (``.traj.json``: ``{"info": ..., "messages": [...],
"trajectory_format": "mini-swe-agent-1.1"}``; the 1.0 files too): chat messages with an
``extra`` field of run metadata (dropped), the closing ``{"role": "exit", ...}`` record (skipped
and counted), and, with the Responses API models, whole response objects (``"object":
"response"``, whose ``output`` items are the turn) next to ``function_call_output`` and
``message`` items, read with :func:`ctxwindow.formats.from_responses`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxwindow._canonical import ROLES, canonical_message
from ctxwindow.errors import InvalidTypeError, MalformedMessageError
from ctxwindow.formats.responses import from_responses
from ctxwindow.formats.trajectory import RESPONSES_KINDS, Trajectory, chat_items, without_none

__all__ = ["from_mini_swe_agent", "is_mini_swe_agent"]


def _is_responses_record(record: Mapping[str, Any]) -> bool:
    return record.get("object") == "response" or record.get("type") in RESPONSES_KINDS


def from_mini_swe_agent(trajectory: Mapping[str, Any]) -> Trajectory:
    """The conversation of a mini-swe-agent trajectory (``.traj.json``): its ``messages``
    without their ``extra`` metadata; ``exit`` records and other non-messages skipped and
    counted; Responses API runs (response objects and items) converted to chat messages."""
    if not isinstance(trajectory, Mapping):
        raise InvalidTypeError(f"a mini-swe-agent trajectory must be a dict, not {type(trajectory).__name__}")
    records = trajectory.get("messages")
    if not isinstance(records, list):
        raise MalformedMessageError("a mini-swe-agent trajectory needs a 'messages' list")
    out = Trajectory("mini-swe-agent trajectory", [])
    responses = any(isinstance(r, Mapping) and _is_responses_record(r) for r in records)
    items: list[dict[str, Any]] = []
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            out.skip(f"{type(record).__name__} record")
            continue
        role = record.get("role")
        if role == "exit":
            out.skip("exit")
        elif responses and record.get("object") == "response":
            output = record.get("output")
            if not isinstance(output, list):
                raise MalformedMessageError(f"record {index}: a response object needs an 'output' list")
            items.extend(without_none(item) for item in output if isinstance(item, Mapping))
        elif responses and (_is_responses_record(record) or role in ROLES):
            items.append(without_none(record))
        elif role in ROLES:
            out.messages.append(canonical_message(record, f"record {index}"))
        else:
            out.skip(f"role {role!r}" if role is not None else "record without a role")
    if responses:
        out.format += " (Responses items)"
        out.messages = from_responses(chat_items(items, out))
    return out


def is_mini_swe_agent(value: Any) -> bool:
    """Whether a parsed JSON value is a mini-swe-agent trajectory."""
    if not (isinstance(value, Mapping) and isinstance(value.get("messages"), list)):
        return False
    if str(value.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return True
    info = value.get("info")
    return isinstance(info, Mapping) and ("mini_version" in info or "exit_status" in info)
