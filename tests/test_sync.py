"""``ContextWindow.sync``: the window holds exactly the history it was synced with, whatever the
sequence of growths, edits and cuts, and a failed sync changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwindow import ContextWindow, MalformedMessageError
from ctxwindow.messages import check_history
from ctxwindow.sync import as_message


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}}


def turn(index: int, tool_calls: int, size: int) -> list[dict[str, Any]]:
    """A user message, then either a plain reply or a tool-calling round with its results."""
    out: list[dict[str, Any]] = [{"role": "user", "content": f"question {index} " + "word " * size}]
    if tool_calls:
        ids = [f"c{index}_{k}" for k in range(tool_calls)]
        out.append({"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]})
        out.extend({"role": "tool", "tool_call_id": i, "content": f"result {i} " + "data " * size * 3}
                   for i in ids)
    out.append({"role": "assistant", "content": f"answer {index} " + "text " * size})
    return out


def make_window(**settings: Any) -> ContextWindow:
    settings.setdefault("max_tokens", 1_500)
    return ContextWindow("gpt-4o", system="You help.", **settings)


def fresh(history: list[dict[str, Any]], **settings: Any) -> list[dict[str, Any]]:
    """What a new window fed this history one message at a time sends."""
    window = make_window(**settings)
    systems = [m["content"] for m in history if m["role"] in ("system", "developer")]
    if systems:
        window.set_system("\n\n".join(systems))
    window.extend(m for m in history if m["role"] not in ("system", "developer"))
    return window.messages()


turns = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 60)), min_size=1, max_size=12)


@given(turns, st.lists(st.tuples(st.sampled_from(["grow", "cut", "edit", "same"]), st.integers(0, 10**6)),
                       min_size=1, max_size=8))
def test_sync_equals_a_fresh_window_after_any_growth_cut_or_edit(
        shape: list[tuple[int, int]], operations: list[tuple[str, int]]) -> None:
    window = make_window()
    history = turn(0, *shape[0])
    made = 1
    window.sync(history)
    assert window.messages() == fresh(history)
    for operation, seed in operations:
        if operation == "grow":
            for _ in range(1 + seed % 2):
                history = history + turn(made, *shape[made % len(shape)])
                made += 1
        elif operation == "cut":
            history = history[:1 + seed % len(history)]
            history = history[:next((i for i in range(len(history), 0, -1)
                                     if not check_history(history[:i])), 1)]
        elif operation == "edit":
            position = seed % len(history)
            if history[position]["role"] in ("user", "assistant") and not history[position].get("tool_calls"):
                history = list(history)
                history[position] = {**history[position], "content": f"edited {seed}"}
        window.sync(history)
        assert window.messages() == fresh(history), operation
        assert check_history(window.messages()) == []


def test_growth_by_one_counts_only_the_new_message() -> None:
    counted: list[str] = []

    class Counting:
        """The real tokenizer, recording what it is asked to count."""

        def __init__(self) -> None:
            from ctxwindow import Tokenizer
            self.inner = Tokenizer.for_model("gpt-4o")
            self.name = self.inner.name
            self.exact = True

        def count(self, text: str) -> int:
            return self.inner.count(text)

        def count_many(self, texts: Any) -> Any:
            return self.inner.count_many(texts)

        def count_message(self, message: Any) -> int:
            counted.append(str(message.get("content")))
            return self.inner.count_message(message)

        def count_messages(self, messages: Any) -> int:
            return self.inner.count_messages(messages)

    window = ContextWindow("gpt-4o", max_tokens=100_000, tokenizer=Counting())
    history = [m for i in range(50) for m in turn(i, i % 3, 5)]
    window.sync(history)
    counted.clear()
    history.append({"role": "user", "content": "one more"})
    window.sync(history)
    assert counted == ["one more"]
    counted.clear()
    window.sync(history)  # nothing new: nothing counted
    assert counted == []
    history = history[:-1] + [{"role": "user", "content": "instead"}]
    window.sync(history)  # the edited tail: only it is counted again
    assert counted == ["instead"]
    assert window.messages()[-1]["content"] == "instead"


def test_system_messages_become_the_system_prompt() -> None:
    window = make_window()
    window.sync([{"role": "system", "content": "Rules."}, {"role": "user", "content": "hi"}])
    assert window.messages()[0] == {"role": "system", "content": "Rules."}
    window.sync([{"role": "user", "content": "hi"}])  # none given: the window's own prompt again
    assert window.messages()[0] == {"role": "system", "content": "You help."}
    window.sync([{"role": "user", "content": "hi"}, {"role": "developer", "content": "More rules."}])
    assert window.messages()[0] == {"role": "system", "content": "More rules."}
    assert [m["role"] for m in window.messages()] == ["system", "user"]


def test_a_failed_sync_changes_nothing_and_the_next_one_works() -> None:
    window = make_window()
    history = turn(0, 2, 5)
    window.sync(history)
    before = window.messages()
    bad = history + [{"role": "tool", "tool_call_id": "nope", "content": "orphan"}]
    with pytest.raises(MalformedMessageError, match="nope"):
        window.sync(bad)
    assert window.messages() == before
    with pytest.raises(MalformedMessageError, match="message 5"):
        window.sync(history + [{"content": "no role"}])
    assert window.messages() == before
    history = history + turn(1, 1, 5)
    window.sync(history)
    assert window.messages() == fresh(history)


def test_add_between_syncs_makes_the_next_sync_rebuild() -> None:
    window = make_window()
    history = turn(0, 1, 5)
    window.sync(history)
    window.add({"role": "user", "content": "added behind the sync's back"})
    window.sync(history)
    assert window.messages() == fresh(history)


def test_pending_tool_calls_are_held_back_until_answered() -> None:
    window = make_window()
    history = turn(0, 2, 5)
    window.sync(history[:2])  # user, assistant with two calls
    assert [m["role"] for m in window.messages()] == ["system", "user"]
    window.sync(history[:3])
    assert [m["role"] for m in window.messages()] == ["system", "user"]
    window.sync(history)
    assert window.messages() == fresh(history)


def test_sync_accepts_any_iterable_and_sdk_objects() -> None:
    class Reply:
        def model_dump(self, **options: Any) -> dict[str, Any]:
            return {"role": "assistant", "content": None, "refusal": None, "annotations": [],
                    "tool_calls": [{"id": "a", "type": "function",
                                    "function": {"name": "f", "arguments": "{}", "parsed_arguments": {}}}]}

    window = make_window()
    history: list[Any] = [{"role": "user", "content": "go"}, Reply(),
                             {"role": "tool", "tool_call_id": "a", "content": "done"}]
    window.sync(iter(history))
    sent = window.messages()
    assert sent[2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    assert as_message(history[1]) == sent[2]


def test_add_accepts_openai_sdk_objects() -> None:
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionMessage

    reply = ChatCompletionMessage.model_validate({
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
    window = make_window()
    window.add({"role": "user", "content": "list"})
    window.add(reply)
    window.add({"role": "tool", "tool_call_id": "call_1", "content": "a.txt"})
    assert window.messages()[2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}
    assert check_history(window.messages()) == []


def test_instructions_detected_in_an_edited_message_are_forgotten() -> None:
    window = make_window(max_tokens=4_000)
    history = [{"role": "user", "content": "Always answer in French. What is 2 + 2?"},
               {"role": "assistant", "content": "Quatre."}]
    window.sync(history)
    assert [i.text for i in window.instructions] == ["Always answer in French."]
    history = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "Four."}]
    window.sync(history)
    assert window.instructions == []
    assert window.messages() == fresh(history, max_tokens=4_000)
