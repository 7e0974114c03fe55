"""tau-bench records: the messages of a record's ``traj`` (or of a bare message list)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxwindow._canonical import canonical_message
from ctxwindow._types import Message
from ctxwindow.errors import MalformedMessageError

__all__ = ["from_tau_bench"]


def from_tau_bench(record: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[Message]:
    """The messages of a tau-bench record (its ``traj``) or of a bare message list."""
    messages = record.get("traj") if isinstance(record, Mapping) else record
    if isinstance(messages, (str, bytes, bytearray)) or not isinstance(messages, Sequence):
        raise MalformedMessageError("a tau-bench record needs a 'traj' list")
    return [canonical_message(message, f"message {index}") for index, message in enumerate(messages)]
