"""ContextWindow itself: replays of every real trajectory at small budgets (a from-scratch recount
and the provider rules after every step), held-back tool calls, overflow of protected content,
calibration, tool definitions, bad messages, and a Hypothesis test of the per-turn invariants.
Compaction, strategies, events and configuration have their own test files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import (
    ContextOverflowError,
    ContextWindow,
    CtxWindowError,
    InvalidArgumentError,
    MalformedMessageError,
)
from ctxwindow.messages import from_swe_agent, from_tau_bench
from ctxwindow.strategies import ClearToolResults, TruncateToolResults

# ``call``, ``check_valid`` and ``result`` are imported from here by other test files too.
from .window_checks import Message, call, check_valid, result

# --- replays of the real data -------------------------------------------------------------


def replay(messages: list[Message], budget: int) -> tuple[int, int]:
    """Replays a conversation; returns (messages added, overflows). Checks after every step."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    conversation = messages[1:] if system is not None else messages
    evicted: list[Message] = []
    try:
        window = ContextWindow("gpt-4o", max_tokens=budget, system=system, preserve_recent=2,
                               on_evict=lambda e, u: evicted.extend(e))
    except ContextOverflowError as error:
        assert error.needed > error.available == budget
        return 0, 1
    added = 0
    for message in conversation:
        if message["role"] == "system":
            continue
        try:
            window.add(message)
        except ContextOverflowError as error:
            assert error.needed > error.available
            check_valid(window, system)
            return added, 1
        added += 1
        check_valid(window, system)
    kept = len(window)
    assert kept + len(evicted) == added - len(window.pending_messages())
    return added, 0


@pytest.mark.parametrize("budget", [1000, 2000, 4000, 8000])
def test_replay_tau_bench(shared_data: Path, budget: int) -> None:
    records = json.loads((shared_data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    results = [replay(from_tau_bench(r), budget) for r in records]
    assert len(results) == 200
    # An overflow is legitimate only when protected content (the 1.25k-token policy, the newest
    # user message, the last two messages with their groups) exceeds the budget; replay()
    # checks that. At 8k tokens every run fits.
    if budget >= 8000:
        assert sum(o for _, o in results) == 0


@pytest.mark.parametrize("budget", [1000, 2000, 4000, 8000])
def test_replay_swe_agent(shared_data: Path, budget: int) -> None:
    paths = sorted((shared_data / "swe_agent_trajs").glob("*.traj"))
    results = [replay(from_swe_agent(json.loads(path.read_text())), budget) for path in paths]
    assert len(results) == 6
    # Their system prompts (tool documentation) alone take most of 1k-2k tokens, so replay()
    # sees mostly legitimate overflows there; from 4k on, over a hundred messages are replayed.
    if budget >= 4000:
        assert sum(added for added, _ in results) > 100


@pytest.mark.parametrize("budget", [1000, 2000, 4000, 8000])
def test_replay_chitchat(shared_data: Path, budget: int) -> None:
    lines = (shared_data / "chitchat_byu" / "chitchat_long250.jsonl").read_text().splitlines()
    chats = [json.loads(line) for line in lines]
    assert len(chats) == 250
    total = 0
    for chat in chats:
        messages = [{"role": m["role"], "content": m["content"]} for m in chat["messages"]]
        added, overflows = replay(messages, budget)
        total += added
        assert overflows == 0 or budget == 1000
    assert total > 10_000


# --- behaviour ----------------------------------------------------------------------------


def test_pending_tool_calls_are_held_back_until_answered() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4000)
    window.add({"role": "user", "content": "weather in Paris and Rome?"})
    window.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
        {"id": "b", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Rome"}'}}]})
    assert [m["role"] for m in window.messages()] == ["user"]
    window.add(result("a", "sunny"))
    assert [m["role"] for m in window.messages()] == ["user"]
    with pytest.raises(MalformedMessageError, match=r"tool calls \['b'\] have no results yet"):
        window.add({"role": "user", "content": "hurry"})
    window.add(result("b", "rain"))
    assert [m["role"] for m in window.messages()] == ["user", "assistant", "tool", "tool"]
    check_valid(window, None)


def test_tool_result_without_call_is_an_error_and_changes_nothing() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4000)
    window.add({"role": "user", "content": "hi"})
    before = window.messages()
    with pytest.raises(MalformedMessageError, match="not an open tool call"):
        window.add(result("nope", "x"))
    assert window.messages() == before


def test_overflow_of_protected_content_says_by_how_much() -> None:
    overflows: list[ContextOverflowError] = []
    with pytest.raises(ContextOverflowError) as info:
        ContextWindow("gpt-4o", max_tokens=50, system="word " * 100)
    assert info.value.needed > info.value.available == 50
    assert isinstance(info.value, CtxWindowError) and isinstance(info.value, ValueError)
    window = ContextWindow("gpt-4o", max_tokens=200, on_overflow=overflows.append)
    window.add({"role": "user", "content": "small"})
    before = window.messages()
    with pytest.raises(ContextOverflowError, match="over") as info:
        window.add({"role": "user", "content": "huge " * 400})
    assert info.value.needed > 200 and info.value.available == 200
    assert window.messages() == before and len(overflows) == 1


def test_record_usage_calibrates_but_never_loosens() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4000)
    window.add({"role": "user", "content": "hello"})
    total = window.usage.total
    window.record_usage(prompt_tokens=total // 2)
    assert window.usage.calibration == 1.0
    window.record_usage(prompt_tokens=total * 10)
    assert 1.0 < window.usage.calibration <= 1.5
    with pytest.raises(InvalidArgumentError):
        window.record_usage(prompt_tokens=-1)


def test_tools_count_as_overhead() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    window = ContextWindow("gpt-4o", max_tokens=2000, tools=tools)
    window.add({"role": "user", "content": "hi"})
    assert window.usage.by_component["tool_definitions"] > 0
    check_valid(window, None)


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ({"content": "x"}, "missing 'role'"),
        ({"role": "bot", "content": "x"}, "unknown role"),
        ({"role": "system", "content": "x"}, "set_system"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": 3}, "content"),
        ("text", "must be a dict"),
        ({"role": "assistant", "tool_calls": [{"type": "function"}]}, "needs a str 'id'"),
    ],
)
def test_malformed_messages_change_nothing(message: Any, match: str) -> None:
    window = ContextWindow("gpt-4o", max_tokens=1000)
    window.add({"role": "user", "content": "hi"})
    before = window.messages()
    with pytest.raises(MalformedMessageError, match=match):
        window.add(message)
    assert window.messages() == before


@given(st.lists(st.sampled_from(["user", "assistant", "tools"]), max_size=60), st.integers(300, 3000))
@settings(max_examples=40, deadline=None)
def test_per_turn_invariants_with_hypothesis(script: list[str], budget: int) -> None:
    window = ContextWindow("gpt-4o", max_tokens=budget, system="sys", preserve_recent=2,
                           strategies=[TruncateToolResults(300), ClearToolResults(keep=2)])
    serial = 0
    for step in script:
        try:
            if step == "user":
                window.add({"role": "user", "content": "question " * 12})
            elif step == "assistant" and len(window):
                window.add({"role": "assistant", "content": "answer " * 12})
            elif step == "tools" and len(window):
                serial += 1
                window.add(call(f"c{serial}"))
                window.add(result(f"c{serial}", "row " * 300))
        except ContextOverflowError:
            break
        check_valid(window, "sys")
