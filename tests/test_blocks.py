"""The prompt's blocks (``ctxwindow.blocks``): ``messages()`` is the blocks plus the conversation,
and one accounting by component adds up to the prompt the window sends."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import ContextWindow, Recall, Tokenizer
from ctxwindow.blocks import BLOCK_ORDER, REPLY_PRIMING, PromptBlocks
from ctxwindow.errors import CtxWindowError, InvalidTextError, InvalidTypeError
from ctxwindow.messages import PLACEHOLDER_USER

TOKENIZER = Tokenizer("o200k_base")


def check_blocks(window: ContextWindow) -> None:
    """The invariants of the blocks against what the window sends."""
    sent = window.messages()
    blocks = list(window.blocks.messages)
    assert sent[:len(blocks)] == blocks
    assert all(m["role"] == "system" for m in blocks)
    kinds = [kind for kind in BLOCK_ORDER if kind in window.blocks.state.blocks]
    assert [window.blocks.state.blocks[k].message for k in kinds] == blocks
    rest = sent[len(blocks):]
    assert all(m["role"] != "system" for m in rest)
    placeholder = TOKENIZER.count_message(PLACEHOLDER_USER) if rest and rest[0] == PLACEHOLDER_USER else 0
    usage = window.usage
    components = {k: v for k, v in usage.by_component.items() if k != "output_reserved"}
    assert sum(components.values()) + REPLY_PRIMING + placeholder == usage.total
    assert usage.total == TOKENIZER.count_messages(sent) + components["tool_definitions"]
    assert usage.by_component["output_reserved"] == window.reserve_output
    budget = window.budget
    assert all(budget.used[k] == v for k, v in components.items())


words = st.sampled_from(["Always answer in French.", "From now on, sign as Bob.", "The build failed on line 12.",
                         "Never delete the backups.", "What is the weather in Oslo?", "ok", "Thanks!"])


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["user", "assistant", "note", "context", "system", "instruction",
                                                 "remove", "tools"]), words), max_size=30))
def test_messages_are_the_blocks_then_the_conversation(steps: list[tuple[str, str]]) -> None:
    window = ContextWindow("gpt-4o", max_tokens=900, system="You are terse.", recall=Recall(max_tokens=120))
    for action, text in steps:
        try:
            if action in ("user", "assistant"):
                window.add({"role": action, "content": text * 3})
            elif action == "note":
                window.write_note("decisions", text)
            elif action == "context":
                window.set_context(text)
            elif action == "system":
                window.set_system(text or None)
            elif action == "instruction":
                window.add_instruction(text)
            elif action == "remove" and window.instructions:
                window.remove_instruction(window.instructions[0].id)
            elif action == "tools":
                window.set_tools([{"type": "function", "function": {"name": "lookup", "description": text,
                                                                     "parameters": {"type": "object"}}}])
        except CtxWindowError:
            pass  # refused, nothing changed: the invariants still hold
        check_blocks(window)


def test_blocks_are_sent_most_stable_first() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000, system="S", context="C")
    window.write_note("decisions", "N")
    window.add_instruction("Always answer in French.")
    kinds = [k for k in BLOCK_ORDER if k in window.blocks.state.blocks]
    assert kinds == ["system", "instructions", "context", "notes"]
    assert [m["content"] for m in window.messages()][0] == "S"


def test_a_savepoint_restores_the_blocks() -> None:
    blocks = PromptBlocks(TOKENIZER)
    blocks.set_text("system", "one")
    saved = blocks.savepoint()
    blocks.set_text("system", "two")
    blocks.set_text("context", "more")
    blocks.rollback(saved)
    assert blocks.text("system") == "one" and blocks.text("context") is None


@pytest.mark.parametrize("value, error", [(5, InvalidTypeError), ({"a": 1}, InvalidTypeError),
                                          ("bad \udc80", InvalidTextError)])
def test_bad_block_text_is_refused_and_changes_nothing(value: Any, error: type[Exception]) -> None:
    blocks = PromptBlocks(TOKENIZER)
    blocks.set_text("system", "kept")
    with pytest.raises(error):
        blocks.set_text("system", value)
    assert blocks.text("system") == "kept"
    with pytest.raises(InvalidTypeError, match="made by the window"):
        blocks.set_text("notes", "x")
