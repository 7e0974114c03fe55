"""OpenAI Responses API items to and from the canonical chat dicts: :func:`from_responses`,
:func:`to_responses`, and :func:`responses_turns` (where a list of items is cut into turns).

Responses items map to chat messages as follows. A ``message`` item (or the short
``{"role", "content"}`` form) of a user, system or developer becomes that message, its
``input_text`` / ``input_image`` parts ``text`` / ``image_url`` parts. The items the model
produced in one turn (``reasoning``, an assistant ``message`` with ``output_text`` / ``refusal``
parts, ``function_call``) become one assistant message: its text parts and its ``tool_calls``
(``call_id`` as the call's ``id``), so the window groups a call with its results as for chat.
``function_call_output`` becomes a ``tool`` message. What chat has no field for (item ``id`` and
``status``, annotations, ``reasoning`` items, which stay opaque and attached to their turn) is kept
under the message's ``"responses"`` key, only when there is such data, and put back by
:func:`to_responses`. The token counter ignores that key (reasoning items of past turns are not
billed as input by the Responses API); a Chat Completions provider does not accept it, so send
messages made from Responses items back with :func:`to_responses`.

Round trips are lossless: ``to_responses(from_responses(items)) == items`` for items of the kinds
above, and ``from_responses(to_responses(messages)) == messages`` for chat messages (except a
message's ``name``, which the Responses API has no field for and which is left out).

>>> items = [{"role": "user", "content": "weather in Paris?"},
...          {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Paris"}'},
...          {"type": "function_call_output", "call_id": "c1", "output": "18 C"}]
>>> [m["role"] for m in from_responses(items)]
['user', 'assistant', 'tool']
>>> to_responses(from_responses(items)) == items
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxwindow._canonical import as_items, as_mapping
from ctxwindow._types import Message
from ctxwindow.errors import MalformedMessageError

__all__ = ["from_responses", "to_responses", "responses_turns"]

_MODEL_ITEMS = ("reasoning", "function_call")


def _plain(item: object, index: int) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)  # the openai SDK's response item models
    if callable(dump):
        data = dump(exclude_none=True)
        if isinstance(data, Mapping):
            return dict(data)
    raise MalformedMessageError(f"item {index}: a Responses item must be a dict, not {type(item).__name__}")


def _part_from_responses(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind in ("input_text", "output_text"):
        out: dict[str, Any] = {"type": "text", "text": part.get("text", "")}
    elif kind == "refusal":
        out = {"type": "refusal", "refusal": part.get("refusal", "")}
    elif kind == "input_image":
        if not isinstance(part.get("image_url"), str):
            raise MalformedMessageError(f"{where}: an input_image part needs an image_url (file ids are not supported)")
        out = {"type": "image_url", "image_url": {"url": part["image_url"]}}
        if part.get("detail") is not None:
            out["image_url"]["detail"] = part["detail"]
    else:
        raise MalformedMessageError(
            f"{where}: unsupported content part type {kind!r} (supported: input_text, output_text, refusal, input_image)")
    return out


def _part_to_responses(part: object, role: str, where: str) -> dict[str, Any]:
    part = as_mapping(part, where, "a content part")
    kind = part.get("type")
    if kind == "text":
        return {"type": "output_text" if role == "assistant" else "input_text", "text": part.get("text", "")}
    if kind == "refusal":
        return {"type": "refusal", "refusal": part.get("refusal", "")}
    if kind == "image_url":
        image = as_mapping(part.get("image_url") or {}, where, "an image_url")
        out: dict[str, Any] = {"type": "input_image", "image_url": image.get("url", "")}
        if image.get("detail") is not None:
            out["detail"] = image["detail"]
        return out
    raise MalformedMessageError(f"{where}: content part type {kind!r} has no Responses form")


def _content_from_responses(content: Any, where: str) -> tuple[Any, list[Any]]:
    """The chat content of a message item and, per part, what chat cannot hold (annotations...)."""
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise MalformedMessageError(f"{where}: content must be a str or a list of parts")
    parts = [_part_from_responses(p, where) for p in content]
    extras = [{k: v for k, v in p.items() if k not in ("type", "text", "refusal", "image_url", "detail")}
              for p in content]
    return parts, extras


def _content_to_responses(content: Any, role: str, where: str, extras: object = None) -> Any:
    if content is None:
        return []
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MalformedMessageError(f"{where}: content must be a str, None or a list of parts, "
                                    f"not {type(content).__name__}")
    parts = [_part_to_responses(p, role, where) for p in content]
    for part, extra in zip(parts, extras if isinstance(extras, list) else []):
        part.update(as_mapping(extra, where, "a part's kept Responses data"))
    return parts


def _kind(item: Mapping[str, Any]) -> Any:
    return item.get("type", "message" if "role" in item else None)


def _is_model_item(item: Mapping[str, Any]) -> bool:
    """Whether the model wrote this item (reasoning, an assistant message, a function call)."""
    kind = _kind(item)
    return kind in _MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")


def _starts_turn(kind: Any, run: Sequence[Mapping[str, Any]]) -> bool:
    """One model turn is [reasoning] [message] [function_call...]: a message or reasoning item
    after a message or call starts the next turn."""
    return kind != "function_call" and any(_kind(i) != "reasoning" for i in run)


def responses_turns(items: Iterable[object]) -> list[tuple[Any, ...]]:
    """``items`` cut where :func:`from_responses` cuts them: each model turn (the items that
    become one assistant message) is one tuple, every other item a tuple of its own; so
    ``from_responses`` of each tuple, concatenated, is ``from_responses(items)``."""
    out: list[tuple[Any, ...]] = []
    run: list[Any] = []
    plain: list[Mapping[str, Any]] = []
    for index, raw in enumerate(as_items(items, "items")):
        item = raw if isinstance(raw, Mapping) else _plain(raw, index)
        if _is_model_item(item):
            if _starts_turn(_kind(item), plain):
                out.append(tuple(run))
                run, plain = [], []
            run.append(raw)
            plain.append(item)
            continue
        if run:
            out.append(tuple(run))
            run, plain = [], []
        out.append((raw,))
    if run:
        out.append(tuple(run))
    return out


def from_responses(items: Iterable[object]) -> list[Message]:
    """OpenAI Responses API input/output items (dicts or the SDK's models) to canonical chat
    messages; see the module documentation. Raises :class:`MalformedMessageError` naming the
    item for an item kind or content part it cannot represent (``item_reference``, built-in
    tool calls, files) or an item that is not a dict."""
    out: list[Message] = []
    run: list[tuple[int, dict[str, Any]]] = []  # the model's items of the current turn

    def close_run() -> None:
        if run:
            out.append(_assistant_from_items(run))
            run.clear()

    for index, raw in enumerate(as_items(items, "items")):
        item = _plain(raw, index)
        where = f"item {index}"
        kind = _kind(item)
        if _is_model_item(item):
            if _starts_turn(kind, [i for _, i in run]):
                close_run()
            run.append((index, item))
            continue
        close_run()
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer"):
                raise MalformedMessageError(f"{where}: unknown message role {role!r}")
            content, extras = _content_from_responses(item.get("content", ""), where)
            message: Message = {"role": role, "content": content}
            meta = {k: v for k, v in item.items() if k not in ("role", "content")}
            if any(extras):
                meta["part_extras"] = extras
            if meta:
                message["responses"] = meta
            out.append(message)
        elif kind == "function_call_output":
            output = item.get("output", "")
            if not isinstance(output, str):
                output, extras = _content_from_responses(output, where)
            message = {"role": "tool", "tool_call_id": str(item.get("call_id")), "content": output}
            meta = {k: v for k, v in item.items() if k not in ("type", "call_id", "output")}
            if meta:
                message["responses"] = meta
            out.append(message)
        else:
            raise MalformedMessageError(
                f"{where}: unsupported Responses item type {kind!r} (supported: message, function_call, "
                "function_call_output, reasoning)")
    close_run()
    return out


def _assistant_from_items(run: list[tuple[int, dict[str, Any]]]) -> Message:
    """One assistant message from the model's items of a turn; ``responses`` keeps each item's
    skeleton (what chat has no field for) in order, so :func:`to_responses` rebuilds them."""
    content: Any = None
    calls: list[dict[str, Any]] = []
    skeletons: list[dict[str, Any]] = []
    for index, item in run:
        where = f"item {index}"
        kind = item.get("type", "message")
        if kind == "reasoning":
            skeletons.append(item)
        elif kind == "function_call":
            calls.append({"id": str(item.get("call_id")), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments", "")}})
            skeletons.append({k: v for k, v in item.items() if k not in ("call_id", "name", "arguments")})
        else:
            text, extras = _content_from_responses(item.get("content", ""), where)
            skeleton = {k: v for k, v in item.items() if k not in ("role", "content")}
            if isinstance(text, str):
                skeleton["text"] = True
            else:
                skeleton["parts"] = len(text)
            if any(extras):
                skeleton["part_extras"] = extras
            if content is None:
                content = text
            else:  # a second message item in one turn: parts side by side
                content = _as_parts(content) + _as_parts(text)
            skeletons.append(skeleton)
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    if skeletons != _default_skeletons(message):
        message["responses"] = skeletons
    return message


def _as_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


def _default_skeletons(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The items :func:`to_responses` writes for an assistant message without ``responses``."""
    skeletons: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str):
        skeletons.append({"text": True})
    elif content:
        skeletons.append({"parts": len(content)})
    skeletons.extend({"type": "function_call"} for _ in message.get("tool_calls") or [])
    return skeletons


def to_responses(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Canonical chat messages (e.g. ``window.messages()``) to Responses API input items; see
    the module documentation. Data kept under ``responses`` by :func:`from_responses` (item
    ids, status, reasoning items, annotations) is put back; when a compaction rewrote the
    message, its current text and calls are what is written. Raises
    :class:`MalformedMessageError` naming the message for one that is not a dict or has an
    unknown role or a part with no Responses form."""
    out: list[dict[str, Any]] = []
    for index, raw in enumerate(as_items(messages)):
        where = f"message {index}"
        message = as_mapping(raw, where)
        role = message.get("role")
        meta = message.get("responses")
        if role == "assistant":
            out.extend(_assistant_to_items(message, meta if isinstance(meta, list) else None, where))
        elif role == "tool":
            content = message.get("content")
            output = (content if isinstance(content, str) or content is None
                      else _content_to_responses(content, "user", where))
            item: dict[str, Any] = {"type": "function_call_output", "call_id": message.get("tool_call_id"),
                                    "output": output if output is not None else ""}
            if isinstance(meta, Mapping):
                item = {**item, **meta}
            out.append(item)
        elif role in ("user", "system", "developer"):
            extra = dict(meta) if isinstance(meta, Mapping) else {}
            extras = extra.pop("part_extras", None)
            item = {**extra, "role": role,
                    "content": _content_to_responses(message.get("content"), "user", where, extras)}
            out.append(_ordered(item, extra))
        else:
            raise MalformedMessageError(f"{where}: unknown role {role!r}")
    return out


def _ordered(item: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``type`` first when present, as the API documents items (dict order only)."""
    if "type" in extra:
        return {"type": extra["type"], **{k: v for k, v in item.items() if k != "type"}}
    return item


def _call_parts(call: object, where: str) -> tuple[Any, Mapping[str, Any]]:
    """A chat tool call's id and function, checked to be dicts."""
    call = as_mapping(call, where, "a tool call")
    return call.get("id"), as_mapping(call.get("function") or {}, where, "a tool call's function")


def _assistant_to_items(message: Mapping[str, Any], skeletons: list[Any] | None, where: str) -> list[dict[str, Any]]:
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, (list, tuple)):
        raise MalformedMessageError(f"{where}: 'tool_calls' must be a list, not {type(raw_calls).__name__}")
    calls = [_call_parts(call, where) for call in raw_calls]
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise MalformedMessageError(f"{where}: content must be a str, None or a list of parts, "
                                    f"not {type(content).__name__}")
    if skeletons is None:
        skeletons = _default_skeletons(message)
    parts = _as_parts(content) if not isinstance(content, str) else None
    text_left = content if isinstance(content, str) else None
    out: list[dict[str, Any]] = []
    for raw_skeleton in skeletons:
        skeleton = as_mapping(raw_skeleton, where, "a kept Responses item")
        kind = skeleton.get("type", "message")
        if kind == "reasoning":
            out.append(dict(skeleton))
        elif kind == "function_call":
            if not calls:
                continue  # the call was dropped by a rewrite
            call_id, function = calls.pop(0)
            item = dict(skeleton)
            item.update({"call_id": call_id, "name": function.get("name"),
                         "arguments": function.get("arguments", "")})
            out.append(_ordered(item, skeleton))
        else:
            item = {k: v for k, v in skeleton.items() if k not in ("text", "parts", "part_extras")}
            item["role"] = "assistant"
            if text_left is not None:  # all of a str content goes to the first message item
                item["content"] = text_left if skeleton.get("text") else _content_to_responses(
                    [{"type": "text", "text": text_left}], "assistant", where, skeleton.get("part_extras"))
                text_left = None
            elif parts is not None:
                count = skeleton.get("parts", len(parts)) if isinstance(skeleton.get("parts"), int) else len(parts)
                mine, parts = parts[:count], parts[count:]
                if not mine:
                    continue
                item["content"] = _content_to_responses(mine, "assistant", where, skeleton.get("part_extras"))
            else:
                continue
            out.append(_ordered(item, skeleton))
    if text_left:  # content written by a rewrite where the turn had no message item
        out.insert(0, {"role": "assistant", "content": text_left})
    for call_id, function in calls:
        out.append({"type": "function_call", "call_id": call_id, "name": function.get("name"),
                    "arguments": function.get("arguments", "")})
    return out
