"""Standing instructions: detection, supersession, the protected block and its invariants, the
window's instruction calls, and survival through compactions.

Data halves (see tests/fidelity_eval.py): the TUNING half (even positions) is what the detector
was developed against; the HELD-OUT half (odd positions) is what the figures below are reported
on. The floors asserted on the held-out half are the values measured there (regression guards)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import ContextOverflowError, ContextWindow
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.instructions import INSTRUCTIONS_HEADER, StandingInstructions, detect_instructions, supersedes
from ctxwindow.messages import check_history, text_of
from ctxwindow.strategies import Summarize

from . import fidelity_eval as fe

# --- detection and supersession ---------------------------------------------------------------


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


# --- the block ----------------------------------------------------------------------------------

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


# --- the window's instruction calls -------------------------------------------------------------


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
    not_a_bool: Any = "yes"
    with pytest.raises(InvalidTypeError):
        ContextWindow("gpt-4o", max_tokens=600, instructions=not_a_bool)
    with pytest.raises(InvalidArgumentError):
        StandingInstructions(max_tokens=0)


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


# --- survival through compactions ---------------------------------------------------------------


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
