"""Chat messages: the canonical form (OpenAI chat dicts), the grouping rule, the one pairing
checker (:func:`check_history`) and :func:`repair_history`; and, where users look for them, the
converters of other formats (:mod:`ctxwindow.formats`): Anthropic content blocks, Responses API
items, SWE-agent trajectories and tau-bench records.

Canonical form: ``{"role": "system" | "developer" | "user" | "assistant" | "tool", "content": str |
None | [parts], "tool_calls": [...], "tool_call_id": str, "name": str}``.

Grouping: an assistant message with ``tool_calls`` starts a group that its tool results (``role ==
"tool"``, answering one of its call ids) join; every other message starts its own group. Nothing in
this package ever outputs a tool result without its call or a call without its results.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxwindow._canonical import (
    ROLES,
    as_items,
    check_items,
    copy_message,
    starts_group,
    text_of,
    tool_call_ids,
    validate_message,
)
from ctxwindow._types import Message
from ctxwindow.errors import MalformedMessageError
from ctxwindow.formats import (
    from_anthropic,
    from_responses,
    from_swe_agent,
    from_tau_bench,
    to_anthropic,
    to_responses,
)

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
    "to_anthropic",
    "from_responses",
    "to_responses",
    "from_swe_agent",
    "from_tau_bench",
]


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
    check_items(messages)
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

    messages = as_items(messages)
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
