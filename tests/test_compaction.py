"""Compaction as plan -> check -> apply: the last resort drops whole groups, protected and pinned
messages stay, the one checker refuses an invalid or raising plan and the window is unchanged
by it, ``compact(force=True)`` goes down to the target, calibration holds in the last resort,
summaries are placed after what is pinned, and the fidelity gate keeps what the user wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwindow import ContextOverflowError, ContextWindow, InvalidArgumentError
from ctxwindow.fidelity import fact_present
from ctxwindow.gate import KEPT_FACTS
from ctxwindow.messages import check_history, from_tau_bench, text_of
from ctxwindow.strategies import DropOldest, Summarize
from ctxwindow.summarizers import extractive

from .window_checks import (
    TOKENIZER,
    Message,
    assert_valid,
    call,
    check_valid,
    result,
    state_of,
    step,
    user_facts_window,
)


def tau_bench(shared_data: Path, count: int = 20) -> list[list[Message]]:
    records = json.loads((shared_data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    return [from_tau_bench(r) for r in records[:count]]


# --- the last resort and what it protects ------------------------------------------------------


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


def test_placeholder_user_message_when_the_first_user_message_is_gone() -> None:
    window = ContextWindow("gpt-4o", max_tokens=300, preserve_recent=1)
    window.add({"role": "user", "content": "question " * 30})
    for i in range(6):
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", "answer " * 20))
    out = check_valid(window, None)
    assert out[0]["role"] == "user"


def test_pinned_messages_survive() -> None:
    window = ContextWindow("gpt-4o", max_tokens=500, preserve_recent=1)
    rule = {"role": "user", "content": "RULE: never delete production data."}
    window.add(rule, pinned=True)
    for i in range(30):
        window.add({"role": "user", "content": f"message {i} " + "filler " * 10})
    out = check_valid(window, None)
    assert out[0] == rule


def test_calibration_applies_to_the_last_resort() -> None:
    """After the provider reports 45% more than our count, a window without strategies keeps
    ``count x calibration`` within the budget."""
    window = ContextWindow("gpt-4o", max_tokens=3000, system="sys", preserve_recent=2, strategies=[])
    for turn in range(40):
        window.add({"role": "user", "content": f"question {turn}: " + "word " * 60})
        window.add({"role": "assistant", "content": f"answer {turn}: " + "text " * 60})
        if turn == 5:
            window.record_usage(prompt_tokens=int(window.usage.total * 1.45))
        counted = TOKENIZER.count_messages(window.messages())
        assert counted * window.usage.calibration <= window.prompt_budget
    assert window.usage.calibration > 1.2


def test_compact_force_means_down_to_target_whatever_the_trigger() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2000, system="sys", preserve_recent=1, trigger=0.9, target=0.3)
    for turn in range(10):
        window.add({"role": "user", "content": f"q{turn} " + "x " * 60})
    assert window.usage.utilization < 0.9  # below the trigger
    assert window.compact().applied == []
    result_ = window.compact(force=True)
    assert result_.evicted and result_.tokens_after <= 0.3 * window.prompt_budget
    again = window.compact(force=True)
    assert again.evicted == [] and again.tokens_after == again.tokens_before
    with pytest.raises(InvalidArgumentError, match="target"):
        window.compact(force=True, target=1.5)


# --- the one checker: plans of custom strategies -----------------------------------------------


def test_callable_strategy_and_invalid_results() -> None:
    def keep_last_three(messages: list[Message], budget: int) -> list[Message]:
        return messages[-3:]

    def break_pairs(messages: list[Message], budget: int) -> list[Message]:
        return [m for m in messages if m["role"] != "assistant"]

    # Without the gate (which refuses a plan that loses what the user wrote) the callable's
    # plan is the one applied.
    window = ContextWindow("gpt-4o", max_tokens=800, strategies=[keep_last_three], preserve_recent=1,
                           fidelity_gate=False)
    for i in range(60):
        window.add({"role": "user", "content": f"m{i} " + "text " * 10})
    check_valid(window, None)
    assert window.last_compaction is not None and window.last_compaction.applied == ["keep_last_three"]
    broken = ContextWindow("gpt-4o", max_tokens=800, strategies=[break_pairs], preserve_recent=1)
    broken.add({"role": "user", "content": "start"})
    for i in range(12):
        broken.add(call(f"c{i}"))
        broken.add(result(f"c{i}", "r " * 40))
    check_valid(broken, None)  # the invalid result was refused; the last resort ran
    assert broken.last_compaction is not None and "break_pairs" not in broken.last_compaction.applied
    assert broken.evicted_messages > 0


def test_rewriting_an_assistant_tool_call_keeps_its_results(shared_data: Path) -> None:
    """A custom strategy that shortens old assistant messages carrying ``tool_calls`` must never
    yield a tool call whose result was dropped."""

    def shorten(messages: list[Message], budget: int) -> list[Message]:
        out = []
        for message in messages:
            if message["role"] == "assistant" and message.get("tool_calls"):
                message = {**message, "content": "(shortened)"}
            out.append(message)
        return out

    rewrites = 0
    for conversation in tau_bench(shared_data):
        system, rest = conversation[0]["content"], conversation[1:]
        window = ContextWindow("gpt-4o", max_tokens=4000, system=system, preserve_recent=2,
                               strategies=[shorten])
        for message in rest:
            before = state_of(window)
            try:
                window.add(message)
            except ContextOverflowError:  # the policy and the last messages alone exceed 4k
                assert state_of(window) == before
                break
            assert_valid(window)
        rewrites += sum(1 for e in window.entries if e.original is not None)
    assert rewrites > 0, "the strategy never rewrote a message: the test did not exercise the path"


def test_a_strategy_that_raises_changes_nothing_but_the_last_resort_still_fits() -> None:
    def broken(messages: list[Message], budget: int) -> list[Message]:
        raise ValueError("strategy bug")

    window = ContextWindow("gpt-4o", max_tokens=500, system="sys", preserve_recent=1, strategies=[broken])
    for turn in range(20):
        window.add({"role": "user", "content": f"q{turn} " + "x " * 40})
        assert_valid(window)
    assert window.evicted_messages > 0


def test_custom_strategies_get_copies() -> None:
    def vandal(messages: list[Message], budget: int) -> list[Message]:
        for message in messages:
            for call_ in message.get("tool_calls") or []:
                call_["id"] = "mutated_" + call_["id"]
        raise RuntimeError("and then fails")

    window = ContextWindow("gpt-4o", max_tokens=600, system="sys", preserve_recent=1, strategies=[vandal])
    for turn in range(30):
        window.add({"role": "user", "content": f"q{turn} " + "x " * 20})
        window.add(call(f"c{turn}"))
        window.add(result(f"c{turn}", "r " * 20))
        assert_valid(window)
    # The vandal ran (so the copies were tested) and none of its changes reached the window.
    assert window.evicted_messages > 0
    assert not any(c["id"].startswith("mutated_") for m in window.messages() for c in m.get("tool_calls") or [])


# --- where summaries go -------------------------------------------------------------------------


def test_a_summary_after_a_pinned_first_message_keeps_the_order() -> None:
    window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                           strategies=[Summarize(extractive, preserve_recent=2)])
    window.add({"role": "user", "content": "Always answer in French."}, pinned=True)
    for turn in range(30):
        window.add({"role": "user", "content": step(turn)})
    out = window.messages()
    assert out[1]["content"] == "Always answer in French."
    assert out[2]["content"].startswith("[Conversation Summary]")
    assert_valid(window)


def test_summarize_keeps_working_when_the_newest_user_message_precedes_the_tool_loop(
        caplog: pytest.LogCaptureFixture) -> None:
    window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                           strategies=[Summarize(extractive, preserve_recent=2)])
    window.add({"role": "user", "content": step(0)})
    window.add({"role": "assistant", "content": step(1)})
    window.add({"role": "user", "content": "book the flight"})
    applied: list[list[str]] = []
    with caplog.at_level("WARNING", logger="ctxwindow"):
        for turn in range(40):
            window.add(call(f"c{turn}"))
            window.add(result(f"c{turn}", f"flight HAT{100 + turn} costs {200 + turn} USD, seat {turn}A " * 6))
            assert_valid(window)
            if window.last_compaction is not None:
                applied.append(window.last_compaction.applied)
    assert not any("reordered" in r.getMessage() for r in caplog.records)
    assert applied[-1] == ["summarize"]
    assert sum(1 for m in window.messages() if str(m["content"]).startswith("[Conversation Summary]")) == 1


# --- the fidelity gate --------------------------------------------------------------------------


def test_the_gate_keeps_what_the_user_wrote_when_summaries_fail() -> None:
    def failing(system: str, user: str) -> str:
        raise RuntimeError("down")

    window = user_facts_window(strategies=[Summarize(failing, preserve_recent=2)])
    result = window.last_compaction
    assert result is not None and result.gate is not None
    prompt = "\n".join(text_of(m) for m in window.messages())
    for fact in ("QX71B2", "INV-88123", "/srv/orders/q.csv"):
        assert fact_present(fact, prompt), fact
    assert KEPT_FACTS in prompt
    assert result.fidelity == result.gate.score
    plain = user_facts_window(strategies=[Summarize(failing, preserve_recent=2)], fidelity_gate=False)
    assert plain.last_compaction is not None and plain.last_compaction.gate is None
    assert not fact_present("QX71B2", "\n".join(text_of(m) for m in plain.messages()))


def forget(messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """A strategy that drops the oldest messages for a summary that keeps none of their facts."""
    return [{"role": "user", "content": "Earlier: the user asked about an order."}] + messages[-6:]


def test_what_a_plan_loses_is_reinjected() -> None:
    window = user_facts_window(strategies=[forget])
    result = window.last_compaction
    assert result is not None and result.gate is not None and result.applied == ["forget"]
    assert result.gate.reinjected > 0 and result.gate.lost == ()
    prompt = "\n".join(text_of(m) for m in window.messages())
    assert all(fact_present(f, prompt) for f in ("QX71B2", "INV-88123", "/srv/orders/q.csv"))


def test_a_plan_that_loses_more_than_fits_is_refused() -> None:
    ids = ", ".join(f"ORD{n:05d}X" for n in range(120))  # far more facts than the kept-facts cap holds
    window = ContextWindow("gpt-4o", max_tokens=3000, system="sys", preserve_recent=2,
                           strategies=[forget, Summarize(preserve_recent=2)])
    window.add({"role": "user", "content": f"Track these orders: {ids}."})
    for i in range(30):
        window.add({"role": "assistant", "content": f"Tracking, part {i}. " + "Checking the records. " * 10})
        window.add({"role": "user", "content": f"Still waiting, {i}."})
    result = window.last_compaction
    assert result is not None and result.gate is not None
    assert "forget" in result.gate.refused and "forget" not in result.applied
    assert check_history(window.messages()) == []


def _order(o: str, z: str, u: str, n: int, extra: str = "") -> dict[str, str]:
    return {"role": "user", "content": " ".join([f"Please look up order {o} and {z} for /home/{u}/f.txt."] * n) + extra}


def test_the_gate_never_makes_a_window_overflow_that_fits_without_it() -> None:
    for gate in (True, False):
        window = ContextWindow("gpt-4o", max_tokens=300, system="S", strategies=[DropOldest()], preserve_recent=1,
                               fidelity_gate=gate)
        window.add(_order("W7297654", "ZX26558", "u0", 2), pinned=True)
        for message in [_order("W9495317", "ZX37446", "u1", 4), {"role": "assistant", "content": "Step 2 " + "detail " * 73},
                        _order("W7755912", "ZX21739", "u3", 4, " Always reply in French."),
                        {"role": "assistant", "content": "Step 4 " + "detail " * 48},
                        {"role": "assistant", "content": "Step 5 " + "detail " * 33},
                        _order("W2058452", "ZX60642", "u6", 4, " Always reply in French."),
                        {"role": "assistant", "content": "Step 7 " + "detail " * 66}]:
            window.add(message)
        window.compact(force=True)
        window.add({"role": "assistant", "content": "Step 9 " + "detail " * 77})
        assert window.usage.total <= window.prompt_budget and check_history(window.messages()) == []
        result = window.last_compaction
        if result is not None and result.gate is not None:
            prompt = "\n".join(text_of(m) for m in window.messages())
            assert result.gate.reinjected == 0 or KEPT_FACTS in prompt


def test_the_goal_survives_repeated_compactions() -> None:
    goal = "I want to plan my daughter's wedding in Tuscany next spring"
    window = ContextWindow("gpt-4o", max_tokens=1500, system="S", strategies=[DropOldest()])
    window.add({"role": "user", "content": goal + ". Can you help?"})
    for i in range(150):
        window.add({"role": "assistant", "content": f"Let me think about venue {i}; there are many villas here."})
        window.add({"role": "user", "content": f"ok, go on with venue {i + 1} please"})
    assert window.compactions >= 3
    assert goal in "\n".join(text_of(m) for m in window.messages())
