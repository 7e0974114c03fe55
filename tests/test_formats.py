"""Responses API and Anthropic formats: lossless round trips both ways (Hypothesis), typed errors,
and a window fed from one format and sent in it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwindow import ContextWindow, MalformedMessageError
from ctxwindow.formats import responses_turns
from ctxwindow.messages import check_history, from_anthropic, from_responses, to_anthropic, to_responses
from ctxwindow.strategies import TruncateToolResults

text = st.text(st.characters(codec="utf-8"), max_size=30)
nonempty = text.filter(bool)
ident = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
arguments = st.dictionaries(ident, st.one_of(st.integers(-1000, 1000), text, st.booleans()), max_size=3)
png = base64.b64encode(b"\x89PNG fake bytes").decode()
image_part = st.sampled_from([
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
])
text_part = text.map(lambda t: {"type": "text", "text": t})


@st.composite
def chat_histories(draw: st.DrawFn, *, images_need_lists: bool = False) -> list[dict[str, Any]]:
    """Valid chat histories: optional system, then user turns with plain replies or tool rounds."""
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(nonempty)})
    counter = 0
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            parts = draw(st.lists(st.one_of(text_part, image_part), min_size=1, max_size=3))
            if images_need_lists and not any(p["type"] == "image_url" for p in parts):
                parts.append(draw(image_part))
            out.append({"role": "user", "content": parts})
        else:
            out.append({"role": "user", "content": draw(text)})
        for _ in range(draw(st.integers(0, 2))):
            ids = [f"call_{counter + k}" for k in range(draw(st.integers(1, 3)))]
            counter += len(ids)
            out.append({"role": "assistant", "content": draw(st.one_of(st.none(), nonempty)), "tool_calls": [
                {"id": i, "type": "function", "function": {"name": draw(ident),
                                                           "arguments": json.dumps(draw(arguments))}}
                for i in ids]})
            out.extend({"role": "tool", "tool_call_id": i, "content": draw(text)} for i in ids)
        out.append({"role": "assistant", "content": draw(text)})
    return out


@given(chat_histories())
def test_chat_to_responses_and_back_is_lossless(messages: list[dict[str, Any]]) -> None:
    assert from_responses(to_responses(messages)) == messages


@given(chat_histories(images_need_lists=True))
def test_chat_to_anthropic_and_back_is_lossless(messages: list[dict[str, Any]]) -> None:
    system, turns = to_anthropic(messages)
    assert from_anthropic(turns, system) == messages
    roles = [t["role"] for t in turns]
    assert all(a != b or a == "user" for a, b in zip(roles, roles[1:])), roles
    # Parallel results share one user turn, right after the assistant turn that called them.
    for before, turn in zip(turns, turns[1:]):
        uses = [b["id"] for b in before["content"] if isinstance(before["content"], list)
                and b["type"] == "tool_use"]
        if uses:
            assert [b["tool_use_id"] for b in turn["content"] if b["type"] == "tool_result"] == uses


@st.composite
def responses_items(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Responses API items as the API and the OpenAI Agents SDK write them."""
    items: list[dict[str, Any]] = []
    counter = 0
    if draw(st.booleans()):
        items.append({"role": "developer", "content": draw(text)})
    for turn in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            items.append({"role": "user", "content": draw(text)})
        else:
            items.append({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": draw(text)},
                *draw(st.lists(st.just({"type": "input_image", "image_url": "https://example.com/a.png",
                                        "detail": "low"}), max_size=1))]})
        for step in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                items.append({"type": "reasoning", "id": f"rs_{turn}_{step}", "summary": [
                    {"type": "summary_text", "text": draw(text)}], "encrypted_content": draw(ident)})
            calls = draw(st.integers(0, 2))
            if draw(st.booleans()) or not calls:
                items.append({"type": "message", "id": f"msg_{turn}_{step}", "role": "assistant",
                              "status": "completed", "content": [
                                  {"type": "output_text", "text": draw(text), "annotations": []}]})
            ids = [f"call_{counter + k}" for k in range(calls)]
            counter += calls
            items.extend({"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": draw(ident),
                          "arguments": json.dumps(draw(arguments)), "status": "completed"} for i in ids)
            items.extend({"type": "function_call_output", "call_id": i, "output": draw(text)} for i in ids)
            if not calls:
                break
    return items


@given(responses_items())
def test_responses_to_chat_and_back_is_lossless(items: list[dict[str, Any]]) -> None:
    messages = from_responses(items)
    assert to_responses(messages) == items
    assert [m for turn in responses_turns(items) for m in from_responses(turn)] == messages
    conversation = [m for m in messages if m["role"] != "developer"]
    assert check_history(conversation) == []


@st.composite
def anthropic_turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Anthropic turns in the form to_anthropic writes (one text block per turn, or images)."""
    turns: list[dict[str, Any]] = []
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    pending: list[str] = []
    counter = 0
    for _ in range(draw(st.integers(1, 5))):
        results = [{"type": "tool_result", "tool_use_id": i, "content": draw(text)} for i in pending]
        rest = draw(st.sampled_from(["none", "text", "image"])) if results else draw(st.sampled_from(["str", "image"]))
        if rest == "str":
            turns.append({"role": "user", "content": draw(text)})
        else:
            blocks: list[dict[str, Any]] = list(results)
            if rest == "text":
                blocks.append({"type": "text", "text": draw(text)})
            elif rest == "image":
                blocks += [{"type": "text", "text": draw(text)}, image]
            turns.append({"role": "user", "content": blocks})
        calls = draw(st.integers(0, 2))
        if calls:
            pending = [f"toolu_{counter + k}" for k in range(calls)]
            counter += calls
            blocks = [{"type": "text", "text": draw(nonempty)}] if draw(st.booleans()) else []
            blocks += [{"type": "tool_use", "id": i, "name": draw(ident), "input": draw(arguments)} for i in pending]
            turns.append({"role": "assistant", "content": blocks})
        else:
            pending = []
            turns.append({"role": "assistant", "content": draw(text)})
    if pending:
        turns.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "done"}
                                                  for i in pending]})
    return turns


@given(anthropic_turns(), st.one_of(st.none(), nonempty))
def test_anthropic_to_chat_and_back_is_lossless(turns: list[dict[str, Any]], system: str | None) -> None:
    messages = from_anthropic(turns, system)
    assert to_anthropic(messages) == (system, turns)
    assert check_history(messages) == []


def test_bad_input_gets_typed_errors_naming_the_item() -> None:
    with pytest.raises(MalformedMessageError, match="item 1: unsupported Responses item type 'web_search_call'"):
        from_responses([{"role": "user", "content": "x"}, {"type": "web_search_call", "id": "ws"}])
    with pytest.raises(MalformedMessageError, match="item 0: unsupported content part type 'input_file'"):
        from_responses([{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}])
    with pytest.raises(MalformedMessageError, match="item 0: a Responses item must be a dict"):
        from_responses([42])
    with pytest.raises(MalformedMessageError, match="message 1: the arguments of tool call 'a' are not JSON"):
        to_anthropic([{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}])
    with pytest.raises(MalformedMessageError, match="message 0: unknown role 'robot'"):
        to_responses([{"role": "robot", "content": "x"}])


def test_a_window_fed_responses_items_sends_valid_items_and_keeps_their_ids() -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "read the log"}]
    for step in range(6):
        items += [
            {"type": "reasoning", "id": f"rs_{step}", "summary": []},
            {"type": "function_call", "id": f"fc_{step}", "call_id": f"c{step}", "name": "read",
             "arguments": json.dumps({"page": step}), "status": "completed"},
            {"type": "function_call_output", "call_id": f"c{step}", "output": "log line 42\n" * 200},
        ]
    items.append({"type": "message", "id": "msg_end", "role": "assistant", "status": "completed",
                  "content": [{"type": "output_text", "text": "found it", "annotations": []}]})
    window = ContextWindow("gpt-4o", max_tokens=3_000, system="You read logs.",
                           strategies=[TruncateToolResults(max_chars=400)])
    window.sync(from_responses(items))
    sent = window.messages()
    assert check_history(sent) == []
    again = to_responses(sent)
    assert again[0] == {"role": "system", "content": "You read logs."}
    assert again[-1] == items[-1]
    outputs = [i for i in again if i.get("type") == "function_call_output"]
    # What is sent is the window's current text (rewrites included), with the items' ids.
    assert [i["output"] for i in outputs] == [m["content"] for m in sent if m["role"] == "tool"]
    assert window.last_compaction is not None and window.last_compaction.applied
    calls = {i["call_id"]: i for i in again if i.get("type") == "function_call"}
    assert set(calls) == {i["call_id"] for i in outputs}
    assert all(c["id"] == "fc_" + c["call_id"][1:] for c in calls.values())
    assert window.usage.total <= window.usage.budget


def test_anthropic_parallel_results_and_the_next_user_message_share_one_turn() -> None:
    system, turns = to_anthropic([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x": 1}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "user", "content": "thanks"}])
    assert system is None
    assert turns[-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "1"},
        {"type": "tool_result", "tool_use_id": "b", "content": "2"},
        {"type": "text", "text": "thanks"}]}
    assert turns[1]["content"][1] == {"type": "tool_use", "id": "b", "name": "g", "input": {"x": 1}}
