"""Anthropic Messages API content blocks to and from the canonical chat dicts:
:func:`from_anthropic` and its inverse :func:`to_anthropic`.

``from_anthropic(*reversed(to_anthropic(messages)))`` gives back the chat messages (text joined
per message, as ``from_anthropic`` does).

>>> system, turns = to_anthropic([{"role": "system", "content": "Be brief."},
...                               {"role": "user", "content": "hi"}])
>>> from_anthropic(turns, system)
[{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ctxwindow._canonical import as_items, as_mapping, text_of
from ctxwindow._types import Message
from ctxwindow.errors import InvalidTypeError, MalformedMessageError

__all__ = ["from_anthropic", "to_anthropic"]


def _image_url(block: Mapping[str, Any], where: str) -> str:
    source = as_mapping(block.get("source") or {}, where, "an image block's source")
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    return str(source.get("url", ""))


def _tool_result_text(inner: object, where: str) -> str:
    if isinstance(inner, str):
        return inner
    if not isinstance(inner, list):
        raise MalformedMessageError(f"{where}: a tool_result's content must be a str or a list of blocks, "
                                    f"not {type(inner).__name__}")
    return "\n".join(str(b.get("text", "")) for b in inner if isinstance(b, Mapping) and b.get("type") == "text")


def from_anthropic(messages: Iterable[Mapping[str, Any]], system: str | None = None) -> list[Message]:
    """Anthropic Messages API content blocks to canonical messages: ``text`` -> text parts,
    ``image`` (base64 or URL source) -> ``image_url`` parts, ``tool_use`` -> assistant
    ``tool_calls`` (input as a JSON string), ``tool_result`` -> ``tool`` messages (placed before
    the rest of their user turn). Raises :class:`MalformedMessageError` naming the message for
    one that is not a dict, has another role than user and assistant, or holds a block it cannot
    read."""
    if system is not None and not isinstance(system, str):
        raise InvalidTypeError(f"system must be a str or None, not {type(system).__name__}")
    out: list[Message] = []
    if system:
        out.append({"role": "system", "content": system})
    for index, raw in enumerate(as_items(messages)):
        where = f"message {index}"
        message = as_mapping(raw, where)
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise MalformedMessageError(f"{where}: Anthropic roles are user and assistant, got {role!r}")
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise MalformedMessageError(f"{where}: content must be a str or a list of blocks")
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        results: list[Message] = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                text = block.get("text", "")
                if not isinstance(text, str):
                    raise MalformedMessageError(f"{where}: a text block's text must be a str, not {type(text).__name__}")
                parts.append({"type": "text", "text": text})
            elif kind == "image":
                parts.append({"type": "image_url", "image_url": {"url": _image_url(block, where)}})
            elif kind == "tool_use":
                try:
                    arguments = json.dumps(block.get("input", {}))
                except (TypeError, ValueError) as error:  # a set, bytes, a non-str key, a cycle, nan
                    raise MalformedMessageError(f"{where}: a tool_use input must be JSON data: {error}") from None
                calls.append({"id": block.get("id"), "type": "function", "function": {
                    "name": block.get("name"), "arguments": arguments}})
            elif kind == "tool_result":
                text = _tool_result_text(block.get("content", ""), where)
                results.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text})
            else:
                raise MalformedMessageError(f"{where}: unsupported Anthropic block type {kind!r}")
        out.extend(results)
        if role == "assistant" and calls:
            text = "\n".join(p["text"] for p in parts if p["type"] == "text")
            out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        elif parts:
            only_text = all(p["type"] == "text" for p in parts)
            out.append({"role": role, "content": "\n".join(p["text"] for p in parts) if only_text else parts})
    return out


def _anthropic_block(part: object, where: str) -> dict[str, Any]:
    part = as_mapping(part, where, "a content part")
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind == "refusal":
        return {"type": "text", "text": part.get("refusal", "")}
    if kind == "image_url":
        url = str(as_mapping(part.get("image_url") or {}, where, "an image_url").get("url", ""))
        if url.startswith("data:") and ";base64," in url:
            header, data = url[5:].split(";base64,", 1)
            try:
                base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise MalformedMessageError(f"{where}: an image data URL whose data is not base64") from None
            return {"type": "image", "source": {"type": "base64", "media_type": header or "image/png", "data": data}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise MalformedMessageError(f"{where}: content part type {kind!r} has no Anthropic form")


def _anthropic_content(content: Any, where: str) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise MalformedMessageError(f"{where}: content must be a str, None or a list of parts, "
                                    f"not {type(content).__name__}")
    return [_anthropic_block(p, where) for p in content]


def _tool_use(call: object, where: str) -> dict[str, Any]:
    """A chat tool call as a ``tool_use`` block (its arguments parsed: the input is an object)."""
    call = as_mapping(call, where, "a tool call")
    function = as_mapping(call.get("function") or {}, where, "a tool call's function")
    arguments = function.get("arguments") or "{}"
    if not isinstance(arguments, str):
        raise MalformedMessageError(f"{where}: the arguments of tool call {call.get('id')!r} must be a JSON "
                                    f"str, not {type(arguments).__name__}")
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        raise MalformedMessageError(
            f"{where}: the arguments of tool call {call.get('id')!r} are not JSON "
            "(Anthropic's tool_use input is an object)") from None
    if not isinstance(parsed, dict):
        raise MalformedMessageError(
            f"{where}: the arguments of tool call {call.get('id')!r} are not a JSON object")
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": parsed}


def to_anthropic(messages: Iterable[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Canonical chat messages (e.g. ``window.messages()``) to an Anthropic ``messages.create``
    call's ``(system, messages)``: system and developer messages joined into ``system`` (None
    when there is none); assistant tool calls as ``tool_use`` blocks (arguments parsed from
    JSON); the tool results of one call group as ``tool_result`` blocks in one user turn, as the
    API requires, followed by the next user message's content when one follows; text and images
    (data URLs as base64 sources) as blocks. The inverse of :func:`from_anthropic`. Raises
    :class:`MalformedMessageError` naming the message for one that is not a dict, has an
    unknown role, or holds what Anthropic cannot take.

    >>> system, turns = to_anthropic([
    ...     {"role": "system", "content": "Be brief."}, {"role": "user", "content": "ls"},
    ...     {"role": "assistant", "content": None, "tool_calls": [
    ...         {"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
    ...         {"id": "b", "type": "function", "function": {"name": "pwd", "arguments": "{}"}}]},
    ...     {"role": "tool", "tool_call_id": "a", "content": "x.py"},
    ...     {"role": "tool", "tool_call_id": "b", "content": "/src"}])
    >>> system, [t["role"] for t in turns], [b["type"] for b in turns[2]["content"]]
    ('Be brief.', ['user', 'assistant', 'user'], ['tool_result', 'tool_result'])
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []  # tool_result blocks waiting for their user turn

    def flush_results() -> None:
        if results:
            out.append({"role": "user", "content": list(results)})
            results.clear()

    for index, raw in enumerate(as_items(messages)):
        where = f"message {index}"
        message = as_mapping(raw, where)
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            if content is not None and not isinstance(content, (str, list)):
                raise MalformedMessageError(f"{where}: content must be a str, None or a list of parts, "
                                            f"not {type(content).__name__}")
            system.append(text_of(message))
        elif role == "tool":
            text = content if isinstance(content, str) else "\n".join(
                str(p.get("text", "")) for p in _anthropic_parts(content, where) if p.get("type") == "text")
            results.append({"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": text})
        elif role == "user":
            if results:
                rest = ([{"type": "text", "text": content}] if isinstance(content, str)
                        else _anthropic_content(content, where))
                out.append({"role": "user", "content": results + rest})
                results.clear()
            else:
                out.append({"role": "user", "content": content if isinstance(content, str)
                            else _anthropic_content(content, where)})
        elif role == "assistant":
            flush_results()
            calls = message.get("tool_calls") or []
            if not isinstance(calls, (list, tuple)):
                raise MalformedMessageError(f"{where}: 'tool_calls' must be a list, not {type(calls).__name__}")
            if not calls:
                out.append({"role": "assistant", "content": content if isinstance(content, str)
                            else _anthropic_content(content, where)})
                continue
            blocks = _anthropic_content(content, where)
            blocks.extend(_tool_use(call, where) for call in calls)
            out.append({"role": "assistant", "content": blocks})
        else:
            raise MalformedMessageError(f"{where}: unknown role {role!r}")
    flush_results()
    return ("\n\n".join(system) if system else None), out


def _anthropic_parts(content: object, where: str) -> list[Mapping[str, Any]]:
    """The dict parts of a tool result's list content (None: none); anything else is an error."""
    if content is None:
        return []
    if not isinstance(content, list):
        raise MalformedMessageError(f"{where}: content must be a str, None or a list of parts, "
                                    f"not {type(content).__name__}")
    return [p for p in content if isinstance(p, Mapping)]
