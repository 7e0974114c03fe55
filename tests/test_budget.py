"""TokenBudget: allocations by component, soft and hard limits, checks before adding, the output
reserve's floor, the profiles, burn rate and turns until exhausted, and bad settings."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwindow import InvalidArgumentError
from ctxwindow.budget import COMPONENTS, PROFILES, TokenBudget


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
