"""The canonical message form and its one validator, below everything that reads or writes
messages (the converters of :mod:`ctxwindow.formats`, the history checks of
:mod:`ctxwindow.messages`, the window); :mod:`ctxwindow.messages` re-exports all of it, where
users look for it.

Canonical form: ``{"role": "system" | "developer" | "user" | "assistant" | "tool", "content": str |
None | [parts], "tool_calls": [...], "tool_call_id": str, "name": str}``.

Grouping: an assistant message with ``tool_calls`` starts a group that its tool results (``role ==
"tool"``, answering one of its call ids) join; every other message starts its own group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ctxwindow._types import Message
from ctxwindow.errors import InvalidTypeError, MalformedMessageError

__all__ = ["ROLES", "CHAT_FIELDS", "tool_call_ids", "starts_group", "text_of", "copy_message",
           "validate_message", "canonical_message", "as_mapping", "check_items", "as_items"]

ROLES = ("system", "developer", "user", "assistant", "tool")
#: The fields of a chat message the canonical form keeps.
CHAT_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id")


def tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    """The ids of the tool calls an assistant message makes (empty for other messages)."""
    calls = message.get("tool_calls") or []
    return [str(call.get("id")) for call in calls if isinstance(call, Mapping)]


def starts_group(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` starts a new group (tool results join the group of their call)."""
    return message.get("role") != "tool"


def text_of(message: Mapping[str, Any]) -> str:
    """The text of a message's content (text parts joined by newlines; images left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text") or part.get("refusal") or "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("text", "refusal", "input_text", "output_text")
        )
    return ""


def copy_message(message: Mapping[str, Any]) -> Message:
    """A deep copy of a message's dicts and lists (strings, numbers and other values are shared:
    they are immutable or opaque), several times cheaper than ``copy.deepcopy``. The window
    stores such copies, so a caller changing its own message afterwards changes nothing inside."""
    return {key: _copy_value(value) for key, value in message.items()}


def _copy_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_value(item) for item in value]
    return value


def validate_message(message: object, index: int | str = 0) -> None:
    """Checks the shape the window relies on (the token counter checks the rest): a dict with a
    known role; a tool result with a str ``tool_call_id``; tool calls, a list, with str ids.
    Errors name the message: ``message {index}``, or ``index`` itself when it is a str."""
    if isinstance(index, str):
        _validate(message, index)
    else:
        _validate(message, f"message {index}")


def _validate(message: object, where: str) -> None:
    if not isinstance(message, Mapping):
        raise MalformedMessageError(f"{where}: a message must be a dict, not {type(message).__name__}")
    role = message.get("role")
    if role is None:
        raise MalformedMessageError(f"{where}: missing 'role'")
    if not isinstance(role, str) or role not in ROLES:
        raise MalformedMessageError(f"{where}: unknown role {role!r} (known: {', '.join(ROLES)})")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise MalformedMessageError(
            f"{where}: a tool result needs a str 'tool_call_id' naming the call it answers"
        )
    calls = message.get("tool_calls")
    if calls:
        if role != "assistant":
            raise MalformedMessageError(f"{where}: only assistant messages make tool calls")
        if not isinstance(calls, (list, tuple)):
            raise MalformedMessageError(f"{where}: 'tool_calls' must be a list, not {type(calls).__name__}")
        ids = [call.get("id") if isinstance(call, Mapping) else None for call in calls]
        if not all(isinstance(i, str) and i for i in ids):
            raise MalformedMessageError(f"{where}: every tool call needs a str 'id'")
        if len(set(ids)) != len(ids):
            raise MalformedMessageError(f"{where}: tool call ids repeat: {ids}")


def as_mapping(value: object, where: str, what: str = "a message") -> Mapping[str, Any]:
    """``value`` when it is a mapping, else :class:`~ctxwindow.errors.MalformedMessageError`
    naming ``where`` (the converters' check of every message, block and item they read)."""
    if not isinstance(value, Mapping):
        raise MalformedMessageError(f"{where}: {what} must be a dict, not {type(value).__name__}")
    return value


def canonical_message(message: object, where: str = "message 0") -> Message:
    """A chat message reduced to the canonical fields (``None`` values left out; ``content``
    always present: None for a tool call without text, else ``""``). Raises
    :class:`~ctxwindow.errors.MalformedMessageError` naming ``where`` for a non-dict."""
    record = as_mapping(message, where)
    out = {key: record[key] for key in CHAT_FIELDS if key in record and record[key] is not None}
    if "content" not in out:
        out["content"] = None if record.get("tool_calls") else ""
    return out


def check_items(value: object, name: str = "messages") -> None:
    """Raises :class:`~ctxwindow.errors.InvalidTypeError` naming ``name`` unless ``value`` is a
    list of messages or items (any iterable but a str, bytes or a dict)."""
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise InvalidTypeError(f"{name} must be a list, not {type(value).__name__}")


def as_items(value: object, name: str = "messages") -> list[Any]:
    """The elements of a list of messages or items (see :func:`check_items`) as a new list; the
    elements are the caller's."""
    check_items(value, name)
    assert isinstance(value, Iterable)
    return list(value)
