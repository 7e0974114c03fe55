"""The window as a transaction: regression tests for the paths that once broke its promises
(a rewritten tool call separated from its results, a failed ``add`` that emptied the pending
group, a raising callback that left a half-made state, calibration ignored by the last resort,
periodic checkpoints refused), atomic ``add``/``extend``, the async path, and the one checker
(``check_history``) with ``repair_history``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import (
    ContextOverflowError,
    ContextWindow,
    InvalidArgumentError,
    MalformedMessageError,
    Tokenizer,
)
from ctxwindow.checkpoint import FileCheckpointStore, SQLiteCheckpointStore
from ctxwindow.events import CallbackError
from ctxwindow.messages import MISSING_RESULT, PLACEHOLDER_USER, check_history, from_tau_bench, repair_history
from ctxwindow.strategies import Summarize
from ctxwindow.summarizers import extractive

from .test_window import call, result

TOKENIZER = Tokenizer("o200k_base")
Message = dict[str, Any]


def tau_bench(shared_data: Path, count: int = 20) -> list[list[Message]]:
    records = json.loads((shared_data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    return [from_tau_bench(r) for r in records[:count]]


def state_of(window: ContextWindow) -> tuple[Any, ...]:
    """Everything a failed operation must leave as it was."""
    return (window.messages(), window.pending_messages(), window.usage, window.turn, len(window),
            window.tokens_added, window.compactions, window.evicted_messages, list(window.entries))


def assert_valid(window: ContextWindow) -> None:
    out = window.messages()
    assert check_history(out) == []
    tools = window.usage.by_component["tool_definitions"]
    counted = TOKENIZER.count_messages(out) + tools
    assert counted == window.usage.total
    assert counted * window.usage.calibration <= window.prompt_budget + 1e-9


# --- the five symptoms -----------------------------------------------------------------------


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


def test_a_tool_result_that_overflows_leaves_the_pending_group_as_it_was() -> None:
    window = ContextWindow("gpt-4o", max_tokens=400, system="sys", preserve_recent=2)
    window.add({"role": "user", "content": "look these up"})
    window.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    window.add(result("a", "small"))
    before = state_of(window)
    with pytest.raises(ContextOverflowError) as caught:
        window.add(result("b", "huge " * 2000))
    assert caught.value.needed > caught.value.available
    assert state_of(window) == before
    assert [m.get("tool_call_id") for m in window.pending_messages()[1:]] == ["a"]
    window.add(result("b", "fits"))  # the group completes normally afterwards
    assert window.pending_messages() == []
    assert_valid(window)


def test_a_raising_on_evict_leaves_the_new_state_complete() -> None:
    def on_evict(evicted: list[Message], usage: Any) -> None:
        raise RuntimeError("callback bug")

    window = ContextWindow("gpt-4o", max_tokens=300, system="sys", preserve_recent=1,
                           on_evict=on_evict, raise_callback_errors=True)
    window.add({"role": "user", "content": "first " * 40})
    window.add(call("c1"))
    window.add(result("c1", "data " * 150))
    message = {"role": "user", "content": "second " * 80}
    with pytest.raises(RuntimeError, match="callback bug"):
        window.add(message)  # triggers an eviction; the callback raises after the state is final
    assert window.messages()[-1] == message
    assert window.turn == 2
    assert window.evicted_messages > 0
    assert isinstance(window.events.errors[-1], CallbackError)
    assert_valid(window)
    window.add(call("c2"))  # the next add works: nothing is left half-made
    window.add(result("c2", "ok"))
    assert_valid(window)


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


@pytest.mark.parametrize("make_store", [
    lambda path: FileCheckpointStore(path / "files"),
    lambda path: SQLiteCheckpointStore(path / "db.sqlite"),
], ids=["file", "sqlite"])
def test_periodic_checkpoints_of_a_window_are_saved(tmp_path: Path, make_store: Any) -> None:
    store = make_store(tmp_path)
    window = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    versions = []
    for turn in range(3):
        window.add({"role": "user", "content": f"step {turn}"})
        versions.append(store.save(window.checkpoint("finish the task")))
    assert versions == [1, 2, 3]
    resumed = ContextWindow("gpt-4o", max_tokens=2000)
    resumed.resume(store)
    resumed.add({"role": "assistant", "content": "continuing"})
    assert resumed.save_checkpoint(store, "finish the task") == 4


# --- atomic add / extend ---------------------------------------------------------------------


def test_extend_is_atomic_and_names_the_failing_message() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    window.add({"role": "user", "content": "hello"})
    before = state_of(window)
    with pytest.raises(MalformedMessageError, match="message 2"):
        window.extend([{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"},
                       {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert state_of(window) == before
    with pytest.raises(MalformedMessageError, match="message 1: missing 'role'"):
        window.extend([{"role": "assistant", "content": "a"}, {"content": "b"}])
    assert state_of(window) == before


def test_add_errors_say_message_not_message_0() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2000)
    with pytest.raises(MalformedMessageError) as caught:
        window.add({"content": "x"})
    assert "message 0" not in str(caught.value)


def test_a_keyboard_interrupt_inside_a_summarizer_changes_nothing() -> None:
    interrupt = [False]

    def summarizer(system: str, user: str) -> str:
        if interrupt[0]:
            raise KeyboardInterrupt
        return extractive(system, user)

    window = ContextWindow("gpt-4o", max_tokens=1200, system="sys", preserve_recent=2,
                           strategies=[Summarize(summarizer, preserve_recent=2)])
    for turn in range(8):
        window.add({"role": "user", "content": f"step {turn}: " + "detail " * 30})
        window.add({"role": "assistant", "content": f"done {turn}"})
    interrupt[0] = True
    before = state_of(window)
    archived = len(window.archive)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        for turn in range(8, 30):
            window.add({"role": "user", "content": f"step {turn}: " + "detail " * 30})
            before = state_of(window)
            archived = len(window.archive)  # type: ignore[arg-type]
    assert state_of(window) == before
    assert len(window.archive) == archived  # type: ignore[arg-type]
    interrupt[0] = False
    window.add({"role": "user", "content": "and now?"})
    assert_valid(window)


def test_a_strategy_that_raises_changes_nothing_but_the_last_resort_still_fits() -> None:
    def broken(messages: list[Message], budget: int) -> list[Message]:
        raise ValueError("strategy bug")

    window = ContextWindow("gpt-4o", max_tokens=500, system="sys", preserve_recent=1, strategies=[broken])
    for turn in range(20):
        window.add({"role": "user", "content": f"q{turn} " + "x " * 40})
        assert_valid(window)
    assert window.evicted_messages > 0


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


def test_aadd_awaits_a_timed_out_summarizer_and_falls_back() -> None:
    async def slow(system: str, user: str) -> str:
        await asyncio.sleep(3600)
        return "never"

    async def agent() -> ContextWindow:
        window = ContextWindow("gpt-4o", max_tokens=900, system="sys", preserve_recent=2,
                               strategies=[Summarize(slow, preserve_recent=2, timeout=0.01)])
        for turn in range(30):
            await window.aadd({"role": "user", "content": f"q{turn} " + "x " * 40})
        return window

    window = asyncio.run(agent())
    assert window.evicted_messages > 0  # the last resort ran after the summarizer timed out
    assert_valid(window)


# --- the one checker and repair --------------------------------------------------------------

tool_ids = st.sampled_from(["a", "b", "c"])
raw_message = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=5)),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.text(max_size=5)),
    st.builds(lambda ids: {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]},
        st.lists(tool_ids, min_size=1, max_size=3, unique=True)),
    st.builds(lambda i: {"role": "tool", "tool_call_id": i, "content": "r"}, tool_ids),
    st.just({"role": "system", "content": "s"}),
    st.just({"content": "no role"}),
)


@given(st.lists(raw_message, max_size=25), st.booleans())
@settings(max_examples=300)
def test_repair_history_always_gives_a_valid_history(messages: list[Message], keep_pending: bool) -> None:
    copies = json.loads(json.dumps(messages))
    fixed, changes = repair_history(messages, keep_pending_tail=keep_pending)
    assert check_history(fixed, pending_tail=keep_pending) == []
    assert messages == copies, "repair_history changed its input"
    if check_history(messages, pending_tail=keep_pending) == []:
        assert fixed == messages and changes == []
    else:
        assert changes
    again, more = repair_history(fixed, keep_pending_tail=keep_pending)
    assert again == fixed and more == []
    for message in fixed:
        if message.get("content") == MISSING_RESULT:
            assert message["role"] == "tool"


def test_check_history_names_each_problem() -> None:
    assert check_history([{"role": "assistant", "content": "hi"}]) == [
        "message 0: the conversation starts with a assistant message, not a user message"]
    problems = check_history([{"role": "user", "content": "q"}, call("x"), {"role": "user", "content": "next"}])
    assert problems == ["message 1: tool calls ['x'] have no results before message 2"]
    assert check_history([{"role": "user", "content": "q"}, {"role": "system", "content": "late"}]) == [
        "message 1: a system message after the conversation started"]
    assert check_history([{"role": "user", "content": "q"}, call("x"), result("x", "1"), result("x", "2")]) == [
        "message 3: a second result for call 'x'"]
    assert check_history([PLACEHOLDER_USER, call("x")], pending_tail=True) == []


# --- found by review: copies, the archive, the loop, placement -------------------------------


def step(turn: int) -> str:
    return (f"Step {turn}: we decided to set port {8000 + turn} in /srv/app/config_{turn}.yaml. "
            + "The rest of this message is ordinary discussion. " * 25)


def test_the_window_keeps_its_own_copies() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    part = {"type": "text", "text": "hi"}
    window.add({"role": "user", "content": [part]})
    part["text"] = "Y " * 5000  # the caller changes its own message afterwards
    out = window.messages()
    out[0]["content"] = "changed"  # the system prompt is a fresh dict on every call
    del out[1]
    assert window.messages() == [{"role": "system", "content": "sys"},
                                 {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert_valid(window)


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


def test_a_failed_extend_leaves_the_archive_as_it_was() -> None:
    window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=1,
                           strategies=[Summarize(extractive, preserve_recent=2)])
    for turn in range(6):
        window.add({"role": "user", "content": f"q{turn} " + "detail " * 80})
        window.add({"role": "assistant", "content": f"a{turn}"})
    archive = window.archive.to_dict()  # type: ignore[attr-defined]
    before = state_of(window)
    batch = [{"role": "user", "content": f"more {i} " + "detail " * 80} for i in range(10)]
    with pytest.raises(MalformedMessageError, match="message 10"):
        window.extend([*batch, {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert state_of(window) == before
    assert window.archive.to_dict() == archive  # type: ignore[attr-defined]
    window.extend(batch)  # the same messages succeed, and then the originals are archived
    assert len(window.archive) > len(archive["items"])  # type: ignore[arg-type]


def test_a_sync_summarizer_does_not_block_the_event_loop() -> None:
    import threading

    release = threading.Event()

    def slow(system: str, user: str) -> str:
        release.wait(10)  # holds until the loop proves it kept running
        return extractive(system, user)

    async def agent() -> tuple[int, ContextWindow]:
        window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                               strategies=[Summarize(slow, preserve_recent=2, timeout=10)])
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while ticks < 3:
                await asyncio.sleep(0)
                ticks += 1
            release.set()

        task = asyncio.create_task(ticker())
        await window.aextend([{"role": "user", "content": step(i)} for i in range(12)])
        await task
        return ticks, window

    ticks, window = asyncio.run(agent())
    assert ticks == 3
    assert window.messages()[1]["content"].startswith("[Conversation Summary]")


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


def test_restore_refuses_an_invalid_state_and_changes_nothing() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    window.add({"role": "user", "content": "hello"})
    checkpoint = window.checkpoint("goal")
    state = checkpoint.window_state
    assert state is not None
    before = state_of(window)
    for change in ({"calibration": 0.0}, {"calibration": float("nan")},
                   {"entries": [*state["entries"],
                                {"message": call("x"), "seq": 2, "group": 2, "turn": 1, "pinned": False}],
                    "seq": 2}):
        broken = type(checkpoint)(goal="goal", window_state={**state, **change})
        with pytest.raises(InvalidArgumentError, match="window state"):
            window.restore(broken)
        assert state_of(window) == before


def test_repair_moves_a_late_result_up_to_its_call() -> None:
    fixed, changes = repair_history([{"role": "user", "content": "q"}, call("a"),
                                     {"role": "user", "content": "wait"}, result("a", "REAL")])
    assert fixed == [{"role": "user", "content": "q"}, call("a"), result("a", "REAL"),
                     {"role": "user", "content": "wait"}]
    assert changes == ["moved message 3, the result of call 'a', up to its call"]


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


def test_restore_refuses_open_calls_that_do_not_match_the_pending_group() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    window.add({"role": "user", "content": "hello"})
    window.add(call("real"))
    checkpoint = window.checkpoint("goal")
    assert checkpoint.window_state is not None
    broken = type(checkpoint)(goal="goal", window_state={**checkpoint.window_state, "open_calls": ["bogus"]})
    fresh = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    with pytest.raises(InvalidArgumentError, match="open calls"):
        fresh.restore(broken)
    fresh.restore(checkpoint)
    fresh.add(result("real", "done"))
    assert_valid(fresh)


def test_checkpoints_do_not_share_messages_with_windows() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    window.add({"role": "user", "content": "hello"})
    checkpoint = window.checkpoint("goal")
    assert checkpoint.window_state is not None
    restored = ContextWindow("gpt-4o", max_tokens=2000, system="sys")
    restored.restore(checkpoint)
    checkpoint.window_state["entries"][0]["message"]["content"] = "changed"
    assert window.messages()[1]["content"] == "hello"
    assert restored.messages()[1]["content"] == "hello"
