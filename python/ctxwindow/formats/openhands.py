"""OpenHands completion logs (``log_completions=True``; one JSON file per model call, in a
folder): ``{"messages": [...], "response": {...}, "kwargs": {"tools": [...]}, ...}`` (OpenHands
0.x) or ``{"messages": [...], "tools": [...], "response": {...}, ...}`` (the software agent SDK;
``"llm_path": "responses"`` with ``instructions`` and ``input`` items for the Responses API).

One log is the request as sent plus the reply; when the model saw converted prompts (no native
function calling) the reply read is the one before conversion (``raw_response``), so request
and reply match. A folder of logs is read as its latest request and reply; the earlier requests
(prefixes of it, unless a condenser rewrote the history) and error logs are counted as skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxwindow._canonical import ROLES, canonical_message
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError, MalformedMessageError
from ctxwindow.formats.responses import from_responses
from ctxwindow.formats.trajectory import Trajectory, chat_items, tools_of, without_none

__all__ = ["from_openhands_completion", "read_openhands_folder", "is_openhands"]


def _reply(log: Mapping[str, Any]) -> Mapping[str, Any] | None:
    response = log.get("raw_response") or log.get("response")
    return response if isinstance(response, Mapping) else None


def from_openhands_completion(log: Mapping[str, Any]) -> Trajectory:
    """One OpenHands completion log as a conversation: the request's messages (or Responses
    ``instructions`` and ``input`` items) and the model's reply; the tool definitions of the
    request when they are in an API's form."""
    if not isinstance(log, Mapping):
        raise InvalidTypeError(f"an OpenHands completion log must be a dict, not {type(log).__name__}")
    out = Trajectory("OpenHands completion log", [])
    reply = _reply(log)
    kwargs = log.get("kwargs")
    options: Mapping[str, Any] = kwargs if isinstance(kwargs, Mapping) else {}
    out.tools = tools_of(options.get("tools")) or tools_of(log.get("tools"))
    if log.get("llm_path") == "responses" or (isinstance(log.get("input"), list) and "messages" not in log):
        items = log.get("input")
        if not isinstance(items, list):
            raise MalformedMessageError("an OpenHands Responses log needs an 'input' list")
        output = reply.get("output") if reply is not None else None
        request = [without_none(i) for i in items if isinstance(i, Mapping)]
        answer = [without_none(o) for o in output if isinstance(o, Mapping)] if isinstance(output, list) else []
        out.messages = from_responses(chat_items([*request, *answer], out))
        instructions = log.get("instructions")
        if isinstance(instructions, str) and instructions:
            out.messages.insert(0, {"role": "system", "content": instructions})
        out.format += " (Responses items)"
    else:
        messages = log.get("messages")
        if not isinstance(messages, list):
            raise MalformedMessageError("an OpenHands completion log needs a 'messages' list")
        for index, record in enumerate(messages):
            if isinstance(record, Mapping) and record.get("role") in ROLES:
                out.messages.append(canonical_message(record, f"message {index}"))
            else:
                out.skip("non-message record in the request")
        choices = reply.get("choices") if reply is not None else None
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get("message")
            if isinstance(message, Mapping):
                out.messages.append(canonical_message({**message, "role": message.get("role") or "assistant"},
                                                      "the reply"))
    if reply is None:
        out.skip("error log (a request without a reply)" if "error" in log else "request without a reply")
    return out


def is_openhands(value: Any) -> bool:
    """Whether a parsed JSON value is an OpenHands completion log."""
    if not isinstance(value, Mapping):
        return False
    request = isinstance(value.get("messages"), list) or isinstance(value.get("input"), list)
    logged = isinstance(value.get("response"), Mapping) or isinstance(value.get("error"), Mapping)
    return request and logged and ("timestamp" in value or "kwargs" in value)


def _json_files(folder: str | os.PathLike[str]) -> list[Path]:
    if not isinstance(folder, (str, os.PathLike)):
        raise InvalidTypeError(f"folder must be a str or a path, not {type(folder).__name__}")
    try:
        return sorted(Path(folder).glob("*.json"))
    except (OSError, ValueError) as error:  # ValueError: a name the file system cannot encode
        raise InvalidArgumentError(f"{folder!r}: cannot list the folder: {error}") from None


def read_openhands_folder(folder: str | os.PathLike[str]) -> Trajectory:
    """A folder of OpenHands completion logs as its latest request and reply (by the logs'
    ``timestamp``); the earlier requests, error logs and files that are not completion logs are
    counted as skipped."""
    logs: list[tuple[float, str, Mapping[str, Any]]] = []
    skipped: dict[str, int] = {}
    for path in _json_files(folder):
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            skipped["unreadable file"] = skipped.get("unreadable file", 0) + 1
            continue
        if not is_openhands(value):
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
