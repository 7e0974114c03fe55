"""Chat messages: the one checker (``check_history``) and ``repair_history``, and the adapters
from tau-bench records, SWE-agent trajectories and Anthropic content blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import MalformedMessageError, Tokenizer
from ctxwindow.messages import (
    MISSING_RESULT,
    PLACEHOLDER_USER,
    check_history,
    from_anthropic,
    from_swe_agent,
    from_tau_bench,
    repair_history,
    tool_call_ids,
    validate_message,
)

from .window_checks import Message, call, result

# --- the one checker and repair --------------------------------------------------------------

tool_ids = st.sampled_from(["a", "b", "c"])
raw_message = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=5)),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.text(max_size=5)),
    st.builds(lambda ids: {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]},
        st.lists(tool_ids, min_size=1, max_size=3, unique=True)),
    st.builds(lambda i: {"role": "tool", "tool_call_id": i, "content": "r"}, tool_ids),
    st.just({"role": "system", "content": "s"}),
    st.just({"content": "no role"}),
)


@given(st.lists(raw_message, max_size=25), st.booleans())
@settings(max_examples=300)
def test_repair_history_always_gives_a_valid_history(messages: list[Message], keep_pending: bool) -> None:
    copies = json.loads(json.dumps(messages))
    fixed, changes = repair_history(messages, keep_pending_tail=keep_pending)
    assert check_history(fixed, pending_tail=keep_pending) == []
    assert messages == copies, "repair_history changed its input"
    if check_history(messages, pending_tail=keep_pending) == []:
        assert fixed == messages and changes == []
    else:
        assert changes
    again, more = repair_history(fixed, keep_pending_tail=keep_pending)
    assert again == fixed and more == []
    for message in fixed:
        if message.get("content") == MISSING_RESULT:
            assert message["role"] == "tool"


def test_check_history_names_each_problem() -> None:
    assert check_history([{"role": "assistant", "content": "hi"}]) == [
        "message 0: the conversation starts with a assistant message, not a user message"]
    problems = check_history([{"role": "user", "content": "q"}, call("x"), {"role": "user", "content": "next"}])
    assert problems == ["message 1: tool calls ['x'] have no results before message 2"]
    assert check_history([{"role": "user", "content": "q"}, {"role": "system", "content": "late"}]) == [
        "message 1: a system message after the conversation started"]
    assert check_history([{"role": "user", "content": "q"}, call("x"), result("x", "1"), result("x", "2")]) == [
        "message 3: a second result for call 'x'"]
    assert check_history([PLACEHOLDER_USER, call("x")], pending_tail=True) == []


def test_repair_moves_a_late_result_up_to_its_call() -> None:
    fixed, changes = repair_history([{"role": "user", "content": "q"}, call("a"),
                                     {"role": "user", "content": "wait"}, result("a", "REAL")])
    assert fixed == [{"role": "user", "content": "q"}, call("a"), result("a", "REAL"),
                     {"role": "user", "content": "wait"}]
    assert changes == ["moved message 3, the result of call 'a', up to its call"]


# --- adapters ---------------------------------------------------------------------------------


def test_tau_bench_and_swe_agent_adapters(shared_data: Path) -> None:
    tokenizer = Tokenizer("o200k_base")
    record = json.loads((shared_data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())[0]
    messages = from_tau_bench(record)
    assert messages[0]["role"] == "system"
    for index, message in enumerate(messages):
        validate_message(message, index)
    tokenizer.count_messages(messages)
    for path in sorted((shared_data / "swe_agent_trajs").glob("*.traj")):
        converted = from_swe_agent(json.loads(path.read_text()))
        open_calls: set[str] = set()
        for index, message in enumerate(converted):
            validate_message(message, index)
            assert set(message) <= {"role", "content", "name", "tool_calls", "tool_call_id"}
            if message["role"] == "tool":
                assert message["tool_call_id"] in open_calls
            open_calls |= set(tool_call_ids(message))
        tokenizer.count_messages(converted)


def test_anthropic_adapter() -> None:
    converted = from_anthropic([
        {"role": "user", "content": "What's the weather?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
            {"type": "text", "text": "And tomorrow?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
    ], system="Be brief.")
    assert converted[0] == {"role": "system", "content": "Be brief."}
    assert converted[2]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
    assert converted[2]["content"] == "Let me check."
    assert converted[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    assert converted[4]["role"] == "user" and converted[4]["content"][1]["type"] == "image_url"
    assert converted[4]["content"][1]["image_url"]["url"] == "data:image/png;base64,AAAA"
    Tokenizer("o200k_base").count_messages(converted)
    with pytest.raises(MalformedMessageError, match="unsupported Anthropic block type 'video'"):
        from_anthropic([{"role": "user", "content": [{"type": "video"}]}])
    with pytest.raises(MalformedMessageError, match="roles are user and assistant"):
        from_anthropic([{"role": "system", "content": "x"}])
