"""Chat messages: the canonical form (OpenAI chat dicts), the grouping rule, and adapters from
Anthropic content blocks, SWE-agent trajectories and tau-bench records.

Canonical form: ``{"role": "system" | "developer" | "user" | "assistant" | "tool", "content": str |
None | [parts], "tool_calls": [...], "tool_call_id": str, "name": str}``.

Grouping: an assistant message with ``tool_calls`` starts a group that its tool results (``role ==
"tool"``, answering one of its call ids) join; every other message starts its own group. Nothing in
this package ever outputs a tool result without its call or a call without its results.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxwindow.errors import MalformedMessageError

__all__ = [
    "Message",
    "ROLES",
    "validate_message",
    "tool_call_ids",
    "starts_group",
    "text_of",
    "from_anthropic",
    "from_swe_agent",
    "from_tau_bench",
]

Message = dict[str, Any]
ROLES = ("system", "developer", "user", "assistant", "tool")
_KEEP = ("role", "content", "name", "tool_calls", "tool_call_id")


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


def validate_message(message: object, index: int = 0) -> None:
    """Checks the shape the window relies on (the token counter checks the rest): a dict with a
    known role; a tool result with a str ``tool_call_id``; tool calls with str ids."""
    if not isinstance(message, Mapping):
        raise MalformedMessageError(f"message {index}: a message must be a dict, not {type(message).__name__}")
    role = message.get("role")
    if role is None:
        raise MalformedMessageError(f"message {index}: missing 'role'")
    if role not in ROLES:
        raise MalformedMessageError(f"message {index}: unknown role {role!r} (known: {', '.join(ROLES)})")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise MalformedMessageError(
            f"message {index}: a tool result needs a str 'tool_call_id' naming the call it answers"
        )
    calls = message.get("tool_calls")
    if calls:
        if role != "assistant":
            raise MalformedMessageError(f"message {index}: only assistant messages make tool calls")
        ids = [call.get("id") if isinstance(call, Mapping) else None for call in calls]
        if not all(isinstance(i, str) and i for i in ids):
            raise MalformedMessageError(f"message {index}: every tool call needs a str 'id'")
        if len(set(ids)) != len(ids):
            raise MalformedMessageError(f"message {index}: tool call ids repeat: {ids}")


def _canonical(message: Mapping[str, Any]) -> Message:
    out = {key: message[key] for key in _KEEP if key in message and message[key] is not None}
    if "content" not in out:
        out["content"] = None if message.get("tool_calls") else ""
    return out


def from_anthropic(messages: Iterable[Mapping[str, Any]], system: str | None = None) -> list[Message]:
    """Anthropic Messages API content blocks to canonical messages: ``text`` -> text parts,
    ``image`` (base64 or URL source) -> ``image_url`` parts, ``tool_use`` -> assistant
    ``tool_calls`` (input as a JSON string), ``tool_result`` -> ``tool`` messages (placed before
    the rest of their user turn)."""
    out: list[Message] = []
    if system:
        out.append({"role": "system", "content": system})
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise MalformedMessageError(f"message {index}: Anthropic roles are user and assistant, got {role!r}")
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise MalformedMessageError(f"message {index}: content must be a str or a list of blocks")
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        results: list[Message] = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                parts.append({"type": "text", "text": block.get("text", "")})
            elif kind == "image":
                source = block.get("source") or {}
                if source.get("type") == "base64":
                    url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
                else:
                    url = str(source.get("url", ""))
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif kind == "tool_use":
                calls.append({"id": block.get("id"), "type": "function", "function": {
                    "name": block.get("name"), "arguments": json.dumps(block.get("input", {}))}})
            elif kind == "tool_result":
                inner = block.get("content", "")
                text = inner if isinstance(inner, str) else "\n".join(
                    str(b.get("text", "")) for b in inner if isinstance(b, Mapping) and b.get("type") == "text")
                results.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text})
            else:
                raise MalformedMessageError(f"message {index}: unsupported Anthropic block type {kind!r}")
        out.extend(results)
        if role == "assistant" and calls:
            text = "\n".join(p["text"] for p in parts if p["type"] == "text")
            out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        elif parts:
            only_text = all(p["type"] == "text" for p in parts)
            out.append({"role": role, "content": "\n".join(p["text"] for p in parts) if only_text else parts})
    return out


def from_swe_agent(trajectory: Mapping[str, Any]) -> list[Message]:
    """The ``history`` of a SWE-agent ``.traj`` as canonical messages (both styles: observations
    as user messages, or tool results answering ``tool_calls`` through ``tool_call_ids``)."""
    history = trajectory.get("history")
    if not isinstance(history, list):
        raise MalformedMessageError("a SWE-agent trajectory needs a 'history' list")
    out: list[Message] = []
    for message in history:
        canonical = _canonical(message)
        if message.get("role") == "tool" and "tool_call_id" not in canonical:
            ids = message.get("tool_call_ids") or []
            if ids:
                canonical["tool_call_id"] = str(ids[0])
        out.append(canonical)
    return out


def from_tau_bench(record: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[Message]:
    """The messages of a tau-bench record (its ``traj``) or of a bare message list."""
    messages = record.get("traj") if isinstance(record, Mapping) else record
    if not isinstance(messages, Sequence):
        raise MalformedMessageError("a tau-bench record needs a 'traj' list")
    return [_canonical(message) for message in messages]
