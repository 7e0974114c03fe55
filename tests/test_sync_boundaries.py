"""The window's boundaries: ``sync`` and the settings refuse bad input with the typed error that
says what was wrong and change nothing; standing-instruction decisions survive a ``sync`` rebuild."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import ContextWindow, InvalidTextError, InvalidTypeError, MalformedMessageError
from ctxwindow.errors import CtxWindowError


def state(window: ContextWindow) -> tuple[Any, ...]:
    return (window.messages(), window.usage, [i.text for i in window.instructions], window.revision,
            [n.text for n in window.notes.notes])


def conversation() -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a travel agent."},
            {"role": "user", "content": "Always book aisle seats. Find me a flight to Oslo."},
            {"role": "assistant", "content": "Found one."},
            {"role": "user", "content": "From now on, reply in French."}]


def rebuilt(window: ContextWindow, history: list[dict[str, Any]]) -> None:
    """Syncs an edited history (the last message changed), which rebuilds the conversation."""
    edited = [*history[:-1], {"role": "user", "content": history[-1]["content"] + " Merci."}]
    window.sync(edited)


def test_a_removed_instruction_stays_removed_after_a_sync_rebuild() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000)
    history = conversation()
    window.sync(history)
    aisle = next(i for i in window.instructions if "aisle" in i.text)
    window.remove_instruction(aisle.id)
    rebuilt(window, history)
    assert all("aisle" not in i.text for i in window.instructions)
    assert any("French" in i.text for i in window.instructions)
    assert all("aisle" not in str(m["content"]) for m in window.messages() if m["role"] == "system")


def test_a_pinned_instruction_stays_pinned_after_a_sync_rebuild() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000)
    history = conversation()
    window.sync(history)
    french = next(i for i in window.instructions if "French" in i.text)
    window.pin_instruction(french.id)
    rebuilt(window, history)
    assert [i.pinned for i in window.instructions if "French" in i.text] == [True]
    assert [i.pinned for i in window.instructions if "aisle" in i.text] == [False]


def test_instructions_added_by_the_program_survive_a_rebuild() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000)
    history = conversation()
    window.sync(history)
    window.add_instruction("Sign every email as Bob.")
    rebuilt(window, history)
    assert "Sign every email as Bob." in [i.text for i in window.instructions]


@pytest.mark.parametrize("content", [5, {"text": "x"}, None, [{"type": "image_url", "image_url": {"url": "x"}}]])
def test_a_system_message_that_is_not_text_is_refused(content: object) -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000, system="Be brief.")
    window.sync(conversation()[1:2])
    before = state(window)
    with pytest.raises(MalformedMessageError, match="message 0"):
        window.sync([{"role": "system", "content": content}, *conversation()[1:2]])
    assert state(window) == before
    assert window.system_prompt == "Be brief."


def test_a_system_message_without_content_is_refused() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000, system="Be brief.")
    with pytest.raises(MalformedMessageError, match="needs a content"):
        window.sync([{"role": "system"}, {"role": "user", "content": "hi"}])
    assert window.system_prompt == "Be brief."


def test_an_incremental_sync_error_names_the_message_by_its_place_in_the_history() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "thanks"},
    ]
    window.sync(history)
    before = state(window)
    history.append({"role": "tool", "tool_call_id": "c1", "content": "sunny again"})
    with pytest.raises(MalformedMessageError, match="message 5"):
        window.sync(history)
    assert state(window) == before
    history.pop()
    history.append({"role": "assistant", "content": "You're welcome."})
    window.sync(history)  # the refused item was not taken as synced
    assert window.messages()[-1]["content"] == "You're welcome."


@pytest.mark.parametrize("value", [None, 5, "hello", {"role": "user", "content": "hi"}, b"x"])
def test_sync_takes_a_list(value: object) -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000)
    with pytest.raises(InvalidTypeError, match="list of messages"):
        window.sync(value)  # type: ignore[arg-type]
    assert window.messages() == []


@pytest.mark.parametrize("value", [5, "drop_oldest", {"type": "drop_oldest"}])
def test_strategies_must_be_a_list(value: object) -> None:
    with pytest.raises(InvalidTypeError, match="strategies must be a list"):
        ContextWindow("gpt-4o", max_tokens=4_000, strategies=value)  # type: ignore[arg-type]


def test_unknown_settings_are_named() -> None:
    with pytest.raises(CtxWindowError, match="colour"):
        ContextWindow("gpt-4o", max_tokens=4_000, colour="blue")  # type: ignore[call-arg]


LONE = "rule \ud800 here"


@pytest.mark.parametrize("call", [
    lambda w: w.set_system(LONE),
    lambda w: w.set_context(LONE),
    lambda w: w.add_instruction(LONE),
    lambda w: w.write_note("decisions", LONE),
    lambda w: w.add({"role": "user", "content": LONE}),
    lambda w: w.sync([{"role": "system", "content": LONE}, {"role": "user", "content": "hi"}]),
])
def test_lone_surrogates_are_invalid_text(call: Any) -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000, system="Be brief.")
    window.add({"role": "user", "content": "hello"})
    before = state(window)
    with pytest.raises(InvalidTextError):
        call(window)
    assert state(window) == before


_values = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8), st.binary(max_size=4),
                    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


CALLS: dict[str, Any] = {
    name: (lambda name: lambda w, v: getattr(w, name)(v))(name)
    for name in ("add", "extend", "sync", "set_system", "set_context", "set_tools", "add_instruction",
                 "record_usage", "compact", "remove_instruction", "pin_instruction", "handle_recall_call",
                 "restore", "retrieve")}
CALLS.update({
    "write_note category": lambda w, v: w.write_note(v, "text"),
    "write_note text": lambda w, v: w.write_note("decisions", v),
    "write_note importance": lambda w, v: w.write_note("decisions", "text", v),
    "add pinned": lambda w, v: w.add({"role": "user", "content": "hi"}, pinned=v),
    "add message": lambda w, v: w.add({"role": "user", "content": v}),
    "compact target": lambda w, v: w.compact(force=True, target=v),
    "record_usage completion": lambda w, v: w.record_usage(10, v),
    "sync item": lambda w, v: w.sync([v]),
    "sync content": lambda w, v: w.sync([{"role": "user", "content": v}]),
})


@settings(max_examples=120, deadline=None)
@given(method=st.sampled_from(sorted(CALLS)), value=_values)
def test_malformed_values_raise_typed_errors_and_change_nothing(method: str, value: object) -> None:
    window = ContextWindow("gpt-4o", max_tokens=4_000, system="Be brief.")
    window.add({"role": "user", "content": "Always answer in English. What is 2 + 2?"})
    before = state(window)
    try:
        CALLS[method](window, value)
    except CtxWindowError:
        assert state(window) == before
    else:  # accepted: the window still sends a valid prompt
        assert window.usage.total <= window.prompt_budget
