"""Chat messages: the canonical form (OpenAI chat dicts), the grouping rule, and adapters from
Anthropic content blocks, SWE-agent trajectories and tau-bench records.

Canonical form: ``{"role": "system" | "developer" | "user" | "assistant" | "tool", "content": str |
None | [parts], "tool_calls": [...], "tool_call_id": str, "name": str}``.

Grouping: an assistant message with ``tool_calls`` starts a group that its tool results (``role ==
"tool"``, answering one of its call ids) join; every other message starts its own group. Nothing in
this package ever outputs a tool result without its call or a call without its results.
"""

from __future__ import annotations

import collections

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxwindow.errors import MalformedMessageError

__all__ = [
    "Message",
    "ROLES",
    "validate_message",
    "check_history",
    "repair_history",
    "copy_message",
    "PLACEHOLDER_USER",
    "MISSING_RESULT",
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
    known role; a tool result with a str ``tool_call_id``; tool calls with str ids. Errors name
    the message: ``message {index}``, or ``index`` itself when it is a str."""
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
    if role not in ROLES:
        raise MalformedMessageError(f"{where}: unknown role {role!r} (known: {', '.join(ROLES)})")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise MalformedMessageError(
            f"{where}: a tool result needs a str 'tool_call_id' naming the call it answers"
        )
    calls = message.get("tool_calls")
    if calls:
        if role != "assistant":
            raise MalformedMessageError(f"{where}: only assistant messages make tool calls")
        ids = [call.get("id") if isinstance(call, Mapping) else None for call in calls]
        if not all(isinstance(i, str) and i for i in ids):
            raise MalformedMessageError(f"{where}: every tool call needs a str 'id'")
        if len(set(ids)) != len(ids):
            raise MalformedMessageError(f"{where}: tool call ids repeat: {ids}")


#: The user message put first when a history's conversation does not start with one.
PLACEHOLDER_USER: Message = {"role": "user", "content": "[Earlier conversation omitted]"}
#: The content of the result :func:`repair_history` gives a tool call that has none.
MISSING_RESULT = "[No result was recorded for this tool call]"


def check_history(messages: Sequence[Mapping[str, Any]], *, pending_tail: bool = False) -> list[str]:
    """What a chat-completions provider would reject in ``messages``: one sentence per problem,
    ``[]`` when the history is valid. Checked: each message's shape, system (or developer)
    messages only before the conversation, the first conversation message a user message, every
    tool result right after the call it answers (no orphan, no result answering a call twice),
    and every tool call answered before the next non-tool message. With ``pending_tail=True``,
    calls still unanswered at the very end are allowed (a conversation being built).

    This is the one pairing checker of the package: the window checks every planned compaction
    with it, and the replay report uses it.

    >>> check_history([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": ""}])
    ["message 1: tool result for call 'x' does not follow an assistant message that makes that call"]
    """
    problems: list[str] = []
    open_calls: set[str] = set()
    answered: set[str] = set()
    caller = -1
    conversation_started = False
    for index, message in enumerate(messages):
        try:
            validate_message(message, index)
        except MalformedMessageError as error:
            problems.append(str(error))
            continue
        role = message["role"]
        if role in ("system", "developer"):
            if conversation_started:
                problems.append(f"message {index}: a {role} message after the conversation started")
            continue
        if not conversation_started:
            conversation_started = True
            if role != "user":
                problems.append(f"message {index}: the conversation starts with a {role} message, not a user message")
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id in open_calls:
                open_calls.discard(call_id)
                answered.add(call_id)
            elif call_id in answered:
                problems.append(f"message {index}: a second result for call {call_id!r}")
            else:
                problems.append(f"message {index}: tool result for call {call_id!r} does not follow an "
                                "assistant message that makes that call")
            continue
        if open_calls:
            problems.append(f"message {caller}: tool calls {sorted(open_calls)} have no results "
                            f"before message {index}")
        open_calls, answered, caller = set(tool_call_ids(message)), set(), index
    if open_calls and not pending_tail:
        problems.append(f"message {caller}: tool calls {sorted(open_calls)} have no results")
    return problems


def repair_history(messages: Iterable[Mapping[str, Any]], *,
                   keep_pending_tail: bool = True) -> tuple[list[Message], list[str]]:
    """A valid history made from ``messages`` (from another framework, a log, a crash), and what
    was changed, one sentence each:

    - malformed messages (no role, unknown role, bad tool ids) are dropped;
    - system and developer messages that come after the conversation started are moved to the
      front, in order;
    - a tool result that comes after other messages is moved up, right after the results of
      the call it answers, when that call has no result yet (a result logged late);
    - tool results that answer no call of the assistant message before them (orphans), and
      second results for the same call, are dropped;
    - a tool call with no result anywhere gets one, clearly marked (:data:`MISSING_RESULT`),
      placed right after the group's other results;
    - calls still unanswered at the very end are kept as they are when ``keep_pending_tail``
      (the conversation is still running; the window holds them back), else given the marked
      result too;
    - a conversation that does not start with a user message gets :data:`PLACEHOLDER_USER` first.

    The result passes ``check_history(result, pending_tail=keep_pending_tail)``. Messages are
    copied, never changed in place.

    >>> fixed, changes = repair_history([{"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ...     {"role": "user", "content": "and?"}])
    >>> [m["role"] for m in fixed]
    ['user', 'assistant', 'tool', 'user']
    """
    changes: list[str] = []
    leading: list[Message] = []
    body: list[Message] = []
    started = False
    open_calls: list[str] = []
    answered: set[str] = set()

    messages = list(messages)
    moved: set[int] = set()
    # Where each call's results are, in order (one pass), so finding a late result is O(1).
    results_of: dict[str, collections.deque[int]] = {}
    for position, item in enumerate(messages):
        if isinstance(item, Mapping) and item.get("role") == "tool" and isinstance(item.get("tool_call_id"), str):
            results_of.setdefault(item["tool_call_id"], collections.deque()).append(position)

    def close_group(reason: str, after: int) -> None:
        for call_id in list(open_calls):
            later = results_of.get(call_id)
            while later and later[0] < after:
                later.popleft()
            late = later.popleft() if later else None
            if late is not None:
                moved.add(late)
                body.append(dict(messages[late]))
                changes.append(f"moved message {late}, the result of call {call_id!r}, up to its call")
            else:
                body.append({"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT})
                changes.append(f"gave tool call {call_id!r} a placeholder result ({reason})")
        open_calls.clear()

    for index, raw in enumerate(messages):
        if index in moved:
            continue
        try:
            validate_message(raw, index)
        except MalformedMessageError as error:
            changes.append(f"dropped {error}")
            continue
        message = dict(raw)
        role = message["role"]
        if role in ("system", "developer"):
            if started:
                changes.append(f"moved the {role} message {index} to the front")
            leading.append(message)
            continue
        started = True
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id in open_calls:
                open_calls.remove(call_id)
                answered.add(call_id)
                body.append(message)
            else:
                what = "a second result for" if call_id in answered else "an orphan result for"
                changes.append(f"dropped message {index}, {what} call {call_id!r}")
            continue
        close_group(f"it had none before message {index}", index + 1)
        body.append(message)
        open_calls, answered = tool_call_ids(message), set()
    if open_calls and not keep_pending_tail:
        close_group("it had none at the end", len(messages))
    if body and body[0]["role"] != "user":
        body.insert(0, dict(PLACEHOLDER_USER))
        changes.append(f"put a placeholder user message before the first {body[1]['role']} message")
    return leading + body, changes


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


# Other providers' formats live in their own module; re-exported here, where users look for them.
from ctxwindow.formats import from_responses, to_anthropic, to_responses  # noqa: E402

__all__ += ["from_responses", "to_responses", "to_anthropic"]
