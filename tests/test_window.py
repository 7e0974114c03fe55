"""ContextWindow: a stateful Hypothesis test of its invariants, replays of every real trajectory
at small budgets, strategies, events, configuration and bad input."""

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
    InvalidTypeError,
    MalformedMessageError,
    Tokenizer,
)
from ctxwindow.messages import check_history, from_swe_agent, from_tau_bench
from ctxwindow.strategies import (
    Cascade,
    ClearToolResults,
    DropOldest,
    MicroCompact,
    ScoredEviction,
    SlidingWindow,
    TruncateToolResults,
)

TOKENIZER = Tokenizer("o200k_base")
Message = dict[str, Any]


def check_valid(window: ContextWindow, system: str | None) -> list[Message]:
    """The invariants every output must satisfy (the provider rules by the package's one checker,
    ``check_history``); returns messages()."""
    out = window.messages()
    recount = TOKENIZER.count_messages(out)
    tools = window.usage.by_component["tool_definitions"]
    assert window.usage.total == recount + tools, "usage disagrees with a from-scratch recount"
    assert recount + tools <= window.prompt_budget, "the prompt does not fit the budget"
    if system is not None:
        assert out[0] == {"role": "system", "content": system}
    assert check_history(out) == [], check_history(out)
    return out


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
    for path in sorted((shared_data / "swe_agent_trajs").glob("*.traj")):
        replay(from_swe_agent(json.loads(path.read_text())), budget)


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


def call(call_id: str, name: str = "lookup") -> Message:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}


def result(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_fifo_drops_whole_groups_and_reports_them_once() -> None:
    evicted: list[Message] = []
    window = ContextWindow("gpt-4o", max_tokens=300, system="sys", preserve_recent=1,
                           on_evict=lambda e, u: evicted.extend(e))
    window.add({"role": "user", "content": "first " * 20})
    window.add(call("c1"))
    window.add(result("c1", "data " * 150))
    window.add({"role": "assistant", "content": "done " * 20})
    window.add({"role": "user", "content": "second " * 20})
    out = check_valid(window, "sys")
    assert evicted and all(m not in out for m in evicted)
    roles = [m["role"] for m in evicted]
    assert ("assistant" in roles) == ("tool" in roles)  # the call left with its result


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


def test_placeholder_user_message_when_the_first_user_message_is_gone() -> None:
    window = ContextWindow("gpt-4o", max_tokens=300, preserve_recent=1)
    window.add({"role": "user", "content": "question " * 30})
    for i in range(6):
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", "answer " * 20))
    out = check_valid(window, None)
    assert out[0]["role"] == "user"


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


def test_pinned_messages_survive() -> None:
    window = ContextWindow("gpt-4o", max_tokens=500, preserve_recent=1)
    rule = {"role": "user", "content": "RULE: never delete production data."}
    window.add(rule, pinned=True)
    for i in range(30):
        window.add({"role": "user", "content": f"message {i} " + "filler " * 10})
    out = check_valid(window, None)
    assert out[0] == rule


def tool_heavy_window(strategy: object) -> ContextWindow:
    window = ContextWindow("gpt-4o", max_tokens=1500, preserve_recent=2, strategies=[strategy])
    window.add({"role": "user", "content": "go"})
    for i in range(4):
        window.add(call(f"c{i}", name="search"))
        window.add(result(f"c{i}", f"result {i} " + "lorem ipsum " * 200))
    window.add({"role": "user", "content": "summarize"})
    check_valid(window, None)
    return window


def test_truncate_tool_results() -> None:
    window = tool_heavy_window(TruncateToolResults(100))
    tools = [m for m in window.messages() if m["role"] == "tool"]
    truncated = [m for m in tools if "\n\n[Truncated: " in m["content"]]
    assert truncated
    for message in truncated:
        head, marker = message["content"].split("\n\n[Truncated: ")
        assert len(head) == 100 and head.startswith("result")
        assert marker == f"{len('result 0 ' + 'lorem ipsum ' * 200)} chars total, showing first 100]"
    assert window.last_compaction is not None and "truncate_tool_results" in window.last_compaction.applied


def test_clear_tool_results_and_retrieve() -> None:
    window = tool_heavy_window(ClearToolResults(keep=1))
    tools = [m for m in window.messages() if m["role"] == "tool"]
    cleared = [m for m in tools if m["content"].startswith("[Tool result cleared: search at turn 1; retrieval id ")]
    assert cleared
    for message in cleared:
        retrieval_id = message["content"].rsplit("retrieval id ", 1)[1].rstrip("]")
        original = window.retrieve(retrieval_id)
        assert original is not None and original[0]["content"].startswith("result")
        assert original[0]["tool_call_id"] == message["tool_call_id"]
    assert window.retrieve("ctx-999") is None


def test_cascade_runs_cheapest_first_and_stops_at_target() -> None:
    calls: list[str] = []

    class Recorder:
        def __init__(self, name: str, cost: str) -> None:
            self.name, self.cost = name, cost

        def apply(self, state: Any) -> Any:
            calls.append(self.name)
            return DropOldest().apply(state)

    cascade = Cascade([Recorder("llm-summary", "llm"), Recorder("free-drop", "free"), Recorder("free-2", "free")])
    assert [s.name for s in cascade.strategies] == ["free-drop", "free-2", "llm-summary"]
    window = ContextWindow("gpt-4o", max_tokens=600, strategies=[cascade], preserve_recent=1)
    for i in range(40):
        window.add({"role": "user", "content": f"m{i} " + "text " * 10})
    assert calls and set(calls) == {"free-drop"}
    check_valid(window, None)


def test_callable_strategy_and_invalid_results() -> None:
    def keep_last_three(messages: list[Message], budget: int) -> list[Message]:
        return messages[-3:]

    def break_pairs(messages: list[Message], budget: int) -> list[Message]:
        return [m for m in messages if m["role"] != "assistant"]

    window = ContextWindow("gpt-4o", max_tokens=800, strategies=[keep_last_three], preserve_recent=1)
    for i in range(30):
        window.add({"role": "user", "content": f"m{i} " + "text " * 10})
    check_valid(window, None)
    broken = ContextWindow("gpt-4o", max_tokens=800, strategies=[break_pairs], preserve_recent=1)
    broken.add({"role": "user", "content": "start"})
    for i in range(12):
        broken.add(call(f"c{i}"))
        broken.add(result(f"c{i}", "r " * 40))
    check_valid(broken, None)  # the invalid result was refused; the last resort ran


def test_scored_eviction_and_sliding_window() -> None:
    for strategy in (ScoredEviction("hybrid"), SlidingWindow(6), MicroCompact()):
        window = ContextWindow("gpt-4o", max_tokens=900, strategies=[strategy], preserve_recent=2)
        window.add({"role": "user", "content": "start"})
        for i in range(15):
            window.add(call(f"c{i}"))
            window.add(result(f"c{i}", "value   \t  " * 40 + "\n\n\n\nend"))
            window.add({"role": "user", "content": f"next {i}"})
        check_valid(window, None)


def test_callbacks_that_raise_do_not_corrupt() -> None:
    def boom(*args: Any) -> None:
        raise RuntimeError("callback failure")

    window = ContextWindow("gpt-4o", max_tokens=400, on_evict=boom, on_compact=boom, on_status=boom,
                           on_turn_start=boom, preserve_recent=1)
    for i in range(20):
        window.add({"role": "user", "content": f"m{i} " + "text " * 12})
    check_valid(window, None)
    assert window.events.errors and all(isinstance(e.error, RuntimeError) for e in window.events.errors)
    strict = ContextWindow("gpt-4o", max_tokens=4000, on_turn_start=boom, raise_callback_errors=True)
    with pytest.raises(RuntimeError):
        strict.add({"role": "user", "content": "hi"})
    check_valid(strict, None)


def test_events_status_zone_and_usage() -> None:
    statuses: list[str] = []
    zones: list[tuple[str, str]] = []
    window = ContextWindow("gpt-4o", max_tokens=1000, reserve_output=100, system="s",
                           on_status=lambda e: statuses.append(e.message),
                           on_zone_change=lambda old, new, r: zones.append((old, new)))
    for i in range(40):
        window.add({"role": "user", "content": f"turn {i} " + "word " * 15})
        window.add({"role": "assistant", "content": "ok " * 10})
    usage = window.usage
    assert usage.budget == 900 and usage.available == 900 - usage.total
    assert set(usage.by_component) == {"system_prompt", "tool_definitions", "message_history",
                                       "tool_results", "memory_injection", "output_reserved"}
    assert usage.by_component["output_reserved"] == 100
    assert statuses and statuses[0].startswith("context window at ") and "/900 tokens)" in statuses[0]
    assert zones and zones[0][0] == "green"
    # The zone is the last turn's reading, by the design's thresholds.
    reading = window.pressure_reading()
    assert reading is not None and reading.utilization == pytest.approx(reading.tokens / 900)
    u = reading.utilization
    assert window.usage.zone == ("red" if u >= 0.9 else "orange" if u >= 0.75 else "yellow" if u >= 0.5 else "green")
    assert window.usage.zone != "green"  # 40 turns of ~25 tokens fill most of 900 tokens


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
    ("kwargs", "error", "match"),
    [
        ({"max_tokens": 0}, InvalidArgumentError, "max_tokens must be >= 1"),
        ({"max_tokens": 10.5}, InvalidTypeError, "max_tokens must be an int"),
        ({"max_tokens": 100, "reserve_output": 100}, InvalidArgumentError, "reserve_output"),
        ({"max_tokens": 100, "trigger": 0}, InvalidArgumentError, r"trigger must be in \(0, 1\]"),
        ({"max_tokens": 100, "trigger": 1.5}, InvalidArgumentError, "trigger"),
        ({"max_tokens": 100, "target": 0.9, "trigger": 0.8}, InvalidArgumentError, "must not exceed trigger"),
        ({"max_tokens": 100, "preserve_recent": -1}, InvalidArgumentError, "preserve_recent must be >= 0"),
        ({"max_tokens": 100, "colour": "red"}, InvalidArgumentError, "unknown ContextWindow settings"),
        ({"max_tokens": 100, "profile": "gaming"}, InvalidArgumentError, "unknown profile"),
        ({"max_tokens": 100, "strategies": [42]}, InvalidTypeError, "a strategy must"),
    ],
)
def test_invalid_settings(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ContextWindow("gpt-4o", **kwargs)


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


def test_toml_profiles(tmp_path: Path) -> None:
    config = tmp_path / "window.toml"
    config.write_text(
        '[window]\nmodel = "gpt-4o"\nmax_tokens = 8000\nreserve_output = 1000\nprofile = "customer_support"\n'
        'system = "Be kind."\n[[window.strategies]]\ntype = "truncate_tool_results"\nmax_chars = 500\n')
    window = ContextWindow.from_toml(config)
    assert window.profile == "customer_support" and window.prompt_budget == 7000
    assert [s.name for s in window.cascade.strategies] == ["truncate_tool_results"]
    assert window.budget.allocations["system_prompt"] == 0.12
    for profile in ("default", "code_review", "research", "customer_support"):
        assert ContextWindow.from_toml(config, profile=profile).profile == profile
    bad = tmp_path / "bad.toml"
    bad.write_text('[window]\nmax_tokens = 100\ncolour = "red"\n')
    with pytest.raises(InvalidArgumentError, match="unknown settings"):
        ContextWindow.from_toml(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("[window\n")
    with pytest.raises(InvalidArgumentError, match="invalid TOML"):
        ContextWindow.from_toml(broken)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('[window]\nmax_tokens = 1000\n[[window.strategies]]\ntype = "magic"\n')
    with pytest.raises(InvalidArgumentError, match="unknown strategy type 'magic'"):
        ContextWindow.from_toml(unknown)


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
