"""Nothing the user said is lost: standing instructions, the fidelity gate, the key-fact matcher.

Data halves (see tests/fidelity_eval.py): the TUNING half (even positions of every data set) is
what the rules were developed against; the HELD-OUT half (odd positions) is what the figures
below are reported on. The floors asserted on the held-out half are the values measured there
(regression guards); where they are under the target, the target is given next to them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import ContextOverflowError, ContextWindow
from ctxwindow.health import HealthMonitor
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.fidelity import extract_key_facts, fact_present, json_values, key_fact_retention
from ctxwindow.gate import KEPT_FACTS
from ctxwindow.instructions import INSTRUCTIONS_HEADER, StandingInstructions, detect_instructions, supersedes
from ctxwindow.messages import check_history, text_of
from ctxwindow.strategies import Summarize

from . import fidelity_eval as fe

# --- the key-fact matcher ----------------------------------------------------------------------


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from([" ", ", ", "(", "\n"]))
def test_a_number_is_present_only_as_a_whole_token(a: int, b: int, sep: str) -> None:
    text = f"total{sep}{b}{sep}end"
    assert fact_present(str(a), text) == (a == b)


@given(st.from_regex(r"[A-Z]{3}[0-9]{2,4}", fullmatch=True), st.from_regex(r"[A-Z0-9]{1,3}", fullmatch=True))
def test_an_identifier_is_not_present_inside_a_longer_one(fact: str, suffix: str) -> None:
    assert not fact_present(fact, f"flight {fact}{suffix} booked")
    assert fact_present(fact, f"flight {fact}, booked")


def test_whole_token_edges() -> None:
    assert not fact_present("42", "1423")
    assert not fact_present("42", "4.2") and not fact_present("42", "42.5")
    assert fact_present("42", "it is 42.") and fact_present("./run.sh", "call ./run.sh now")
    assert key_fact_retention("order 42 shipped", "order 1423").score == 0.0


def test_json_facts_are_its_values_not_its_keys() -> None:
    text = json.dumps({"reservation_id": "ZFA04Y", "flights": [{"flight_number": "HAT170", "date": "2024-05-20"}]})
    facts = extract_key_facts(json_values(text))
    assert facts["identifier"] == ["ZFA04Y", "HAT170"] and facts["date"] == ["2024-05-20"]
    assert "reservation_id" not in json_values(text)
    assert json_values("not json {") == "not json {"


# --- standing instructions --------------------------------------------------------------------


@pytest.mark.parametrize("which", [fe.TUNING, fe.HELD_OUT])
def test_detection_on_both_halves(which: int) -> None:
    """Recall of the written instructions and no false positive on the negatives. Measured:
    tuning 30/30; held-out 28/30 (missed: a bare imperative restricted by "only" and a
    preference phrased "My favourite kind of ... is"), 0/30 false positives on either half."""
    found = sum(1 for texts in fe.instructions(which).values() for t in texts if detect_instructions(t) == [t])
    assert found >= (30 if which == fe.TUNING else 28)
    assert [t for t in fe.negatives(which) if detect_instructions(t)] == []


def test_supersession_rules() -> None:
    assert supersedes("Reply in English from now on.", "Reply in French.")
    assert supersedes("Always include my name in replies.", "Never include my name in replies.")
    assert supersedes("I prefer window seats.", "I prefer aisle seats.")
    assert not supersedes("Always include the booking id.", "Never include my name in replies.")
    assert not supersedes("I prefer quiet hotels.", "I prefer aisle seats.")


_TEXTS = st.sampled_from([
    "Reply in French.", "Reply in English.", "Never include my name.", "Always include my name.",
    "I prefer aisle seats.", "I prefer window seats.", "Use metric units.", "Keep answers short.",
    "Do not use emojis.", "Use emojis in every reply.", "Always confirm before you cancel anything."])


@given(st.lists(st.tuples(st.sampled_from(["add", "pin", "remove", "unpin"]), _TEXTS, st.integers(0, 20)),
                max_size=30), st.integers(8, 80))
@settings(max_examples=150, deadline=None)
def test_instruction_invariants(ops: list[tuple[str, str, int]], cap: int) -> None:
    block = StandingInstructions(max_tokens=cap)
    for op, text, index in ops:
        pinned_before = {i.id for i in block.current if i.pinned}
        try:
            if op == "add":
                block.add(text, pinned=index % 3 == 0)
            elif op == "pin":
                block.pin(index)
            elif op == "unpin":
                block.pin(index, False)
            else:
                block.remove(index)
        except InvalidArgumentError:
            pass
        current = block.current
        keys = [" ".join(i.text.lower().split()) for i in current]
        assert len(keys) == len(set(keys)), "two identical instructions in force"
        assert all(i.id == n for n, i in enumerate(block.history)), "ids are positions in the history"
        if op == "add":  # adding never supersedes a pinned instruction
            assert pinned_before <= {i.id for i in current}
        text_block = block.render(len)
        shown = [line[2:] for line in (text_block or "").splitlines()[1:]]
        assert all(i.text in shown for i in current if i.pinned), "a pinned instruction is always carried"
        unpinned = sum(len("- " + t + "\n") for t in shown if t not in {i.text for i in current if i.pinned})
        assert unpinned <= cap
        assert set(block.omitted) == {i.id for i in current if i.text not in shown}


def test_bad_instruction_calls_are_typed_and_change_nothing() -> None:
    window = ContextWindow("gpt-4o", max_tokens=600, system="sys")
    window.add_instruction("Use metric units.")
    before = (window.messages(), list(window.standing_instructions.history))
    bad: Any = 3
    calls: list[Callable[[], object]] = [
        lambda: window.add_instruction(""), lambda: window.add_instruction(bad),
        lambda: window.pin_instruction(7), lambda: window.remove_instruction(bad + 0.5),
        lambda: window.add_instruction("x " * 2000, pinned=True)]
    for call in calls:
        with pytest.raises((InvalidArgumentError, InvalidTypeError, ContextOverflowError)):
            call()
        assert (window.messages(), list(window.standing_instructions.history)) == before
    with pytest.raises(InvalidTypeError):
        ContextWindow("gpt-4o", max_tokens=600, instructions="yes")
    with pytest.raises(InvalidArgumentError):
        StandingInstructions(max_tokens=0)


def test_the_block_carries_what_left_the_conversation_once() -> None:
    window = ContextWindow("gpt-4o", max_tokens=900, system="sys", preserve_recent=2,
                           strategies=[Summarize(preserve_recent=2)])
    window.add({"role": "user", "content": "Hi. Never include my home address in any reply. Book a table for two."})
    assert [i.text for i in window.instructions] == ["Never include my home address in any reply."]
    # While its message is in the conversation, the instruction is not repeated.
    assert not any(INSTRUCTIONS_HEADER in text_of(m) for m in window.messages())
    for i in range(30):
        window.add({"role": "assistant", "content": f"Step {i}: " + "working on the booking details. " * 8})
        window.add({"role": "user", "content": f"ok {i}"})
    out = window.messages()
    assert check_history(out) == []
    assert out[1]["role"] == "system" and out[1]["content"] == (
        INSTRUCTIONS_HEADER + "\n- Never include my home address in any reply.")
    added = window.add_instruction("Reply in French.", pinned=True)
    assert added is not None and added.pinned
    window.add({"role": "user", "content": "Reply in English from now on."})
    texts = [i.text for i in window.instructions]
    assert "Reply in French." in texts and "Reply in English from now on." in texts  # pinned: not superseded
    window.remove_instruction(added.id)
    assert "Reply in French." not in [i.text for i in window.instructions]
    # A checkpoint carries the instructions, superseded and removed ones included.
    restored = ContextWindow("gpt-4o", max_tokens=900, system="sys", preserve_recent=2,
                             strategies=[Summarize(preserve_recent=2)])
    restored.restore(window.checkpoint("goal"))
    assert restored.standing_instructions.history == window.standing_instructions.history
    assert restored.messages() == window.messages()


def test_a_later_instruction_supersedes_an_earlier_one_in_the_prompt() -> None:
    window = ContextWindow("gpt-4o", max_tokens=700, system="sys", preserve_recent=2)
    window.add({"role": "user", "content": "Always reply in French."})
    for i in range(20):
        window.add({"role": "assistant", "content": "D'accord. " * 20})
        window.add({"role": "user", "content": f"next {i}"})
    window.add({"role": "user", "content": "Reply in English from now on."})
    for i in range(20):
        window.add({"role": "assistant", "content": "Sure. " * 20})
        window.add({"role": "user", "content": f"more {i}"})
    prompt = "\n".join(text_of(m) for m in window.messages())
    assert "Reply in English from now on." in prompt and "Always reply in French." not in prompt
    history = window.standing_instructions.history
    assert history[0].superseded_by == history[1].id


@pytest.mark.parametrize("which", [fe.TUNING, fe.HELD_OUT])
def test_spliced_instructions_survive_compactions(shared_data: Path, which: int) -> None:
    """Survival per kind after 1, 3 and 5 compactions. Measured: tuning half 100% for every
    kind; held-out half action 80% (4/5) and preference 83% (5/6), the other kinds 100%, the
    same after 1, 3 and 5 compactions (target 95%: the misses are detection misses, see
    test_detection_on_both_halves); runs whose protected content overflows are left out."""
    result = fe.splice_survival(shared_data, which)
    floors = {"action": 0.75, "preference": 0.83} if which == fe.HELD_OUT else {}
    for kind in result.survival:
        for rounds in fe.ROUNDS:
            assert result.rate(kind, rounds) >= floors.get(kind, 1.0), (kind, rounds, result.survival)
    assert result.overflowed <= 3


# --- canaries, tau-bench ids, compression -----------------------------------------------------


def test_canaries_survive_five_rounds_on_both_halves(shared_data: Path) -> None:
    """All 20 canaries (tuning: even, held-out: odd) after each of 5 compaction rounds."""
    survival = fe.canary_survival(shared_data)
    for round_, canaries in survival.items():
        lost = [name for name, kept in canaries.items() if not all(kept)]
        assert lost == [], (round_, lost)


@pytest.mark.parametrize(("budget", "floor"), [(2000, 0.73), (4000, 0.98)])
def test_tau_bench_ground_truth_ids_on_the_held_out_half(shared_data: Path, budget: int, floor: float) -> None:
    """Held-out half. Measured: 4k 99.5% (192/193, no run overflows); 2k 73.4% (113/154, 18 runs overflow
    and are excluded) -- the target is 90%: at 2k the 1.3k-token policy leaves ~600 tokens for
    the recent messages, the summary and its kept facts. Tuning half: 4k 100%, 2k 68%."""
    result = fe.tau_ids(shared_data, budget, fe.HELD_OUT)
    assert result.total > 100
    assert result.rate >= floor, result


def test_summaries_compress_at_least_twice(shared_data: Path) -> None:
    """Held-out chitchat at 2k: measured 2.4x (tuning half 2.3x)."""
    assert fe.summary_compression(shared_data, fe.HELD_OUT) >= 2.0


# --- the fidelity gate ------------------------------------------------------------------------


def _user_facts_window(**settings: Any) -> ContextWindow:
    window = ContextWindow("gpt-4o", max_tokens=1200, system="sys", preserve_recent=2, **settings)
    window.add({"role": "user", "content": "My order is QX71B2 and the invoice is INV-88123, see /srv/orders/q.csv."})
    for i in range(25):
        window.add({"role": "assistant", "content": f"Looking into it, part {i}. " + "Checking the records. " * 10})
        window.add({"role": "user", "content": f"Still waiting, {i}."})
    return window


def test_the_gate_keeps_what_the_user_wrote_when_summaries_fail() -> None:
    def failing(system: str, user: str) -> str:
        raise RuntimeError("down")

    window = _user_facts_window(strategies=[Summarize(failing, preserve_recent=2)])
    result = window.last_compaction
    assert result is not None and result.gate is not None
    prompt = "\n".join(text_of(m) for m in window.messages())
    for fact in ("QX71B2", "INV-88123", "/srv/orders/q.csv"):
        assert fact_present(fact, prompt), fact
    assert KEPT_FACTS in prompt
    assert result.fidelity == result.gate.score
    plain = _user_facts_window(strategies=[Summarize(failing, preserve_recent=2)], fidelity_gate=False)
    assert plain.last_compaction is not None and plain.last_compaction.gate is None
    assert not fact_present("QX71B2", "\n".join(text_of(m) for m in plain.messages()))


def forget(messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """A strategy that drops the oldest messages for a summary that keeps none of their facts."""
    return [{"role": "user", "content": "Earlier: the user asked about an order."}] + messages[-6:]


def test_what_a_plan_loses_is_reinjected() -> None:
    window = _user_facts_window(strategies=[forget])
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


def test_the_health_monitor_reports_the_gate() -> None:
    window = _user_facts_window(strategies=[Summarize(preserve_recent=2)])
    monitor = HealthMonitor(window)
    window.add({"role": "user", "content": "and now? " + "more detail " * 200})
    snapshot = monitor.collect()
    last = window.last_compaction
    assert last is not None and last.gate is not None
    assert snapshot.fidelity == last.gate.score and snapshot.facts_lost == len(last.gate.lost)


# --- regressions ---------------------------------------------------------------------------------


def _order(o: str, z: str, u: str, n: int, extra: str = "") -> dict[str, str]:
    return {"role": "user", "content": " ".join([f"Please look up order {o} and {z} for /home/{u}/f.txt."] * n) + extra}


def test_the_gate_never_makes_a_window_overflow_that_fits_without_it() -> None:
    from ctxwindow.strategies import DropOldest

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
    from ctxwindow.strategies import DropOldest

    goal = "I want to plan my daughter's wedding in Tuscany next spring"
    window = ContextWindow("gpt-4o", max_tokens=1500, system="S", strategies=[DropOldest()])
    window.add({"role": "user", "content": goal + ". Can you help?"})
    for i in range(150):
        window.add({"role": "assistant", "content": f"Let me think about venue {i}; there are many villas here."})
        window.add({"role": "user", "content": f"ok, go on with venue {i + 1} please"})
    assert window.compactions >= 3
    assert goal in "\n".join(text_of(m) for m in window.messages())


def test_more_kinds_of_key_facts() -> None:
    facts = extract_key_facts("Mail jane.doe@example.com about JIRA-4821 (v2.3.1): ValueError: bad checksum "
                              "in \u201cblue harbour\u201d")
    assert {"jane.doe@example.com", "JIRA-4821", "v2.3.1"} <= set(facts["identifier"])
    assert facts["quoted"] == ["blue harbour"] and len(facts["error"]) == 1


def test_pin_and_restore_refuse_malformed_values() -> None:
    window = ContextWindow("gpt-4o", max_tokens=600, system="sys")
    window.add_instruction("Use metric units.")
    bad: Any = "no"
    with pytest.raises(InvalidTypeError):
        window.pin_instruction(0, pinned=bad)
    with pytest.raises(InvalidTypeError):
        window.add_instruction("!!!")
    state = window.checkpoint("goal")
    assert state.window_state is not None
    state.window_state["instructions"][0]["turn"] = "abc"
    with pytest.raises(InvalidArgumentError):
        ContextWindow("gpt-4o", max_tokens=600, system="sys").restore(state)
