"""TokenBudget, PressureMonitor and the message adapters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwindow import InvalidArgumentError, MalformedMessageError, Tokenizer
from ctxwindow.budget import COMPONENTS, PROFILES, TokenBudget
from ctxwindow.messages import from_anthropic, from_swe_agent, from_tau_bench, tool_call_ids, validate_message
from ctxwindow.pressure import PressureMonitor, zone_of


def test_budget_allocations_limits_and_checks() -> None:
    budget = TokenBudget(100_000)
    assert budget.limit("message_history") == 65_000
    assert budget.soft("message_history") == 52_000
    assert budget.check_before_add("tool_results", 9_000).level == "ok"
    soft = budget.check_before_add("tool_results", 10_000)
    assert soft.allowed and soft.level == "soft"
    hard = budget.check_before_add("tool_results", 12_001)
    assert not hard.allowed and hard.level == "hard" and "hard limit" in hard.message
    assert budget.output_reserve == 5_000


@given(st.integers(min_value=1, max_value=10**7))
def test_output_reserve_floor(max_tokens: int) -> None:
    budget = TokenBudget(max_tokens, {**PROFILES["default"], "output_reserved": 0.0})
    assert budget.output_reserve == min(4000, max_tokens // 10)


def test_budget_profiles_and_burn_rate() -> None:
    for name, allocations in PROFILES.items():
        assert set(allocations) == set(COMPONENTS)
        assert abs(sum(allocations.values()) - 1.0) < 1e-9, name
        assert TokenBudget.for_profile(8000, name).allocations == allocations
    budget = TokenBudget(10_000)
    assert budget.turns_until_exhausted() is None
    for total in (1000, 1500, 2000, 2500):
        budget.record_turn(total)
    assert budget.burn_rate == 500
    assert budget.turns_until_exhausted() == (10_000 - budget.output_reserve - 2500) / 500


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens must be > 0"),
        ({"max_tokens": 10, "allocations": {"memory": 0.5}}, "unknown budget components"),
        ({"max_tokens": 10, "allocations": {"system_prompt": 0.7, "message_history": 0.7}}, "more than the window"),
        ({"max_tokens": 10, "soft_limit": 0}, "soft_limit"),
        ({"max_tokens": 10, "soft_limit": 0.9, "hard_limit": 0.8}, "hard_limit"),
    ],
)
def test_budget_rejects_bad_settings(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        TokenBudget(**kwargs)


def test_zones() -> None:
    assert [zone_of(u) for u in (0.0, 0.49, 0.5, 0.74, 0.75, 0.89, 0.9, 1.2)] == [
        "green", "green", "yellow", "yellow", "orange", "orange", "red", "red"]


def test_pressure_velocity_spike_and_turns_until_red() -> None:
    changes: list[tuple[str, str]] = []
    spikes: list[float] = []
    monitor = PressureMonitor(10_000, on_zone_change=lambda a, b, r: changes.append((a, b)),
                              on_velocity_spike=lambda r: spikes.append(r.velocity))
    for total in (1000, 1100, 1200, 1300, 1400, 1500):
        reading = monitor.observe(total)
    assert reading.velocity == pytest.approx(100)
    assert reading.turns_until_red == pytest.approx((9000 - 1500) / 100)
    assert not spikes
    reading = monitor.observe(6000)  # a huge tool output
    assert reading.spike and spikes
    assert changes == [("green", "yellow")]
    reported = monitor.report(9500)
    assert reported.reported and reported.zone == "red" and reported.turns_until_red == 0.0
    with pytest.raises(InvalidArgumentError):
        PressureMonitor(0)


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
