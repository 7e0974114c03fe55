"""SWE-agent trajectories (``.traj``): the ``history`` as canonical messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxwindow._canonical import canonical_message
from ctxwindow._types import Message
from ctxwindow.errors import InvalidTypeError, MalformedMessageError

__all__ = ["from_swe_agent"]


def from_swe_agent(trajectory: Mapping[str, Any]) -> list[Message]:
    """The ``history`` of a SWE-agent ``.traj`` as canonical messages (both styles: observations
    as user messages, or tool results answering ``tool_calls`` through ``tool_call_ids``)."""
    if not isinstance(trajectory, Mapping):
        raise InvalidTypeError(f"a SWE-agent trajectory must be a dict, not {type(trajectory).__name__}")
    history = trajectory.get("history")
    if not isinstance(history, list):
        raise MalformedMessageError("a SWE-agent trajectory needs a 'history' list")
    out: list[Message] = []
    for index, message in enumerate(history):
        canonical = canonical_message(message, f"history[{index}]")
        if canonical.get("role") == "tool" and "tool_call_id" not in canonical:
            ids = message.get("tool_call_ids")
            if isinstance(ids, list) and ids:
                canonical["tool_call_id"] = str(ids[0])
        out.append(canonical)
    return out
