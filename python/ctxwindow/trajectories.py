"""What agents write to disk, read as a conversation: mini-swe-agent trajectories, OpenHands
LLM completion logs and chat files that carry their tool definitions.

Each reader returns a :class:`Trajectory`: the canonical messages, the tool definitions sent
with them (when the file has them in a form an API takes) and, per kind, the records that are
not chat messages and were skipped (an ``exit`` record, an error log...). A skipped record is
counted, never an error; a record that claims to be a message but is malformed still raises
:class:`~ctxwindow.errors.MalformedMessageError`.

- **mini-swe-agent** ``.traj.json`` (``{"info": ..., "messages": [...], "trajectory_format":
  "mini-swe-agent-1.1"}``; the 1.0 files too): chat messages with an ``extra`` field of run
  metadata (dropped), the closing ``{"role": "exit", ...}`` record (skipped and counted), and, with
  the Responses API models, whole response objects (``"object": "response"``, whose ``output``
  items are the turn) next to ``function_call_output`` and ``message`` items, read with
  :func:`ctxwindow.formats.from_responses`.
- **OpenHands** completion logs (``log_completions=True``; one JSON file per model call, in a
  folder): ``{"messages": [...], "response": {...}, "kwargs": {"tools": [...]}, ...}`` (OpenHands
  0.x) or ``{"messages": [...], "tools": [...], "response": {...}, ...}`` (the software agent SDK;
  ``"llm_path": "responses"`` with ``instructions`` and ``input`` items for the Responses API).
  One log is the request as sent plus the reply; when the model saw converted prompts (no native
  function calling) the reply read is the one before conversion (``raw_response``), so request
  and reply match. A folder of logs is read as its latest request and reply; the earlier requests
  (prefixes of it, unless a condenser rewrote the history) and error logs are counted as skipped.
- A chat (or Responses, or Anthropic) file ``{"messages": [...], "tools": [...]}``: the tools are
  returned with the messages, so the tool schemas are counted as the API counts them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxwindow.errors import MalformedMessageError
from ctxwindow.formats import from_responses, infer_format
from ctxwindow.messages import ROLES, Message, _canonical

__all__ = ["Trajectory", "from_mini_swe_agent", "from_openhands_completion", "read_openhands_folder",
           "infer_trajectory", "tools_of"]


@dataclass
class Trajectory:
    """A conversation read from an agent's file."""

    #: What the file was read as (``"mini-swe-agent trajectory"``, ...).
    format: str
    #: The canonical chat messages, system prompt first when there is one.
    messages: list[Message]
    #: The tool definitions sent with the conversation (None: the file does not say).
    tools: list[dict[str, Any]] | None = None
    #: Records that are not chat messages, skipped: kind -> count.
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, kind: str, count: int = 1) -> None:
        if count:
            self.skipped[kind] = self.skipped.get(kind, 0) + count


def _no_none(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None and k != "extra"}


# --- mini-swe-agent ------------------------------------------------------------------------------

_RESPONSES_KINDS = {"function_call", "function_call_output", "reasoning", "message"}


def _chat_items(items: list[dict[str, Any]], out: Trajectory) -> list[dict[str, Any]]:
    """The Responses items a chat conversation can hold; the rest (built-in tool calls, item
    references...) skipped and counted."""
    kept = []
    for item in items:
        kind = item.get("type", "message" if "role" in item else None)
        if kind in _RESPONSES_KINDS:
            kept.append(item)
        else:
            out.skip(f"Responses item {kind!r}")
    return kept


def _is_responses_record(record: Mapping[str, Any]) -> bool:
    return record.get("object") == "response" or record.get("type") in _RESPONSES_KINDS


def from_mini_swe_agent(trajectory: Mapping[str, Any]) -> Trajectory:
    """The conversation of a mini-swe-agent trajectory (``.traj.json``): its ``messages``
    without their ``extra`` metadata; ``exit`` records and other non-messages skipped and
    counted; Responses API runs (response objects and items) converted to chat messages."""
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
            items.extend(_no_none(item) for item in output if isinstance(item, Mapping))
        elif responses and (_is_responses_record(record) or role in ROLES):
            items.append(_no_none(record))
        elif role in ROLES:
            out.messages.append(_canonical(record))
        else:
            out.skip(f"role {role!r}" if role is not None else "record without a role")
    if responses:
        out.format += " (Responses items)"
        out.messages = from_responses(_chat_items(items, out))
    return out


def _is_mini_swe_agent(value: Any) -> bool:
    if not (isinstance(value, Mapping) and isinstance(value.get("messages"), list)):
        return False
    if str(value.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return True
    info = value.get("info")
    return isinstance(info, Mapping) and ("mini_version" in info or "exit_status" in info)


# --- OpenHands -----------------------------------------------------------------------------------


def tools_of(value: Any) -> list[dict[str, Any]] | None:
    """The tool definitions in ``value`` when they are in a form an API takes: Chat Completions
    (``{"type": "function", "function": {...}}``), Responses (``{"type": "function", "name":
    ...}``) or Anthropic (``{"name", "input_schema"}``); None otherwise (absent, empty, or an
    agent's own tool objects)."""
    if not isinstance(value, list) or not value:
        return None
    for tool in value:
        if not isinstance(tool, Mapping):
            return None
        chat = isinstance(tool.get("function"), Mapping)
        responses = tool.get("type") == "function" and isinstance(tool.get("name"), str)
        anthropic = isinstance(tool.get("name"), str) and "input_schema" in tool
        if not (chat or responses or anthropic):
            return None
    return [dict(tool) for tool in value]


def _reply(log: Mapping[str, Any]) -> Mapping[str, Any] | None:
    response = log.get("raw_response") or log.get("response")
    return response if isinstance(response, Mapping) else None


def from_openhands_completion(log: Mapping[str, Any]) -> Trajectory:
    """One OpenHands completion log as a conversation: the request's messages (or Responses
    ``instructions`` and ``input`` items) and the model's reply; the tool definitions of the
    request when they are in an API's form."""
    out = Trajectory("OpenHands completion log", [])
    reply = _reply(log)
    kwargs = log.get("kwargs") if isinstance(log.get("kwargs"), Mapping) else {}
    assert isinstance(kwargs, Mapping)
    out.tools = tools_of(kwargs.get("tools")) or tools_of(log.get("tools"))
    if log.get("llm_path") == "responses" or (isinstance(log.get("input"), list) and "messages" not in log):
        items = log.get("input")
        if not isinstance(items, list):
            raise MalformedMessageError("an OpenHands Responses log needs an 'input' list")
        output = reply.get("output") if reply is not None else None
        request = [_no_none(i) for i in items if isinstance(i, Mapping)]
        out.messages = from_responses(_chat_items(
            [*request, *(_no_none(o) for o in output or [] if isinstance(o, Mapping))], out))
        instructions = log.get("instructions")
        if isinstance(instructions, str) and instructions:
            out.messages.insert(0, {"role": "system", "content": instructions})
        out.format += " (Responses items)"
    else:
        messages = log.get("messages")
        if not isinstance(messages, list):
            raise MalformedMessageError("an OpenHands completion log needs a 'messages' list")
        for record in messages:
            if isinstance(record, Mapping) and record.get("role") in ROLES:
                out.messages.append(_canonical(record))
            else:
                out.skip("non-message record in the request")
        choices = reply.get("choices") if reply is not None else None
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get("message")
            if isinstance(message, Mapping):
                out.messages.append(_canonical({**message, "role": message.get("role") or "assistant"}))
    if reply is None:
        out.skip("error log (a request without a reply)" if "error" in log else "request without a reply")
    return out


def _is_openhands(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return False
    request = isinstance(value.get("messages"), list) or isinstance(value.get("input"), list)
    logged = isinstance(value.get("response"), Mapping) or isinstance(value.get("error"), Mapping)
    return request and logged and ("timestamp" in value or "kwargs" in value)


def read_openhands_folder(folder: str | Path) -> Trajectory:
    """A folder of OpenHands completion logs as its latest request and reply (by the logs'
    ``timestamp``); the earlier requests, error logs and files that are not completion logs are
    counted as skipped."""
    logs: list[tuple[float, str, Mapping[str, Any]]] = []
    skipped: dict[str, int] = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            skipped["unreadable file"] = skipped.get("unreadable file", 0) + 1
            continue
        if not _is_openhands(value):
            skipped["file that is not a completion log"] = skipped.get("file that is not a completion log", 0) + 1
        elif _reply(value) is None:
            skipped["error log (a request without a reply)"] = skipped.get("error log (a request without a reply)", 0) + 1
        else:
            stamp = value.get("timestamp")
            logs.append((float(stamp) if isinstance(stamp, (int, float)) else 0.0, path.name, value))
    if not logs:
        raise MalformedMessageError(f"{folder}: no OpenHands completion log (*.json with a request and a response)")
    logs.sort(key=lambda entry: (entry[0], entry[1]))
    out = from_openhands_completion(logs[-1][2])
    out.format = out.format.replace("completion log", f"completion logs ({len(logs)} requests, the latest read)")
    out.skip("earlier request (a prefix of the latest)", len(logs) - 1)
    for kind, count in skipped.items():
        out.skip(kind, count)
    return out


# --- any file --------------------------------------------------------------------------------------


def infer_trajectory(value: Any) -> Trajectory | None:
    """The agent trajectory in a parsed JSON value (mini-swe-agent, an OpenHands completion log,
    or a Responses / Anthropic file), None when it is none of these (a chat list or another
    format). A top-level ``tools`` list of API tool definitions comes back with the messages."""
    if _is_mini_swe_agent(value):
        return from_mini_swe_agent(value)
    if _is_openhands(value):
        return from_openhands_completion(value)
    inferred = infer_format(value)
    if inferred is None:
        return None
    return Trajectory(inferred[0], inferred[1], tools_of(value.get("tools")) if isinstance(value, Mapping) else None)

