"""The window as a transaction: regression tests for the paths that once broke its promises (a
failed ``add`` that emptied the pending group, a raising callback that left a half-made state,
periodic checkpoints refused), atomic ``add``/``extend``, the window's own copies, ``restore``
that refuses a bad state and changes nothing, and the async path (a summarizer that times out,
a sync summarizer that must not block the loop)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxwindow import ContextOverflowError, ContextWindow, InvalidArgumentError, MalformedMessageError
from ctxwindow.checkpoint import FileCheckpointStore, SQLiteCheckpointStore
from ctxwindow.events import CallbackError
from ctxwindow.strategies import Summarize
from ctxwindow.summarizers import extractive

from .window_checks import Message, assert_valid, call, result, state_of, step

# --- the symptoms ------------------------------------------------------------------------------


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


def test_aadd_awaits_a_timed_out_summarizer_and_falls_back() -> None:
    async def agent() -> tuple[int, ContextWindow]:
        never_set = asyncio.Event()  # the summarizer answers only after its timeout
        started = 0

        async def slow(system: str, user: str) -> str:
            nonlocal started
            started += 1
            await never_set.wait()
            return "never"

        window = ContextWindow("gpt-4o", max_tokens=900, system="sys", preserve_recent=2,
                               strategies=[Summarize(slow, preserve_recent=2, timeout=0.01)])
        for turn in range(30):
            await window.aadd({"role": "user", "content": f"q{turn} " + "x " * 40})
        return started, window

    started, window = asyncio.run(agent())
    assert started > 0  # the summarizer was awaited ...
    assert window.evicted_messages > 0  # ... and the last resort ran after it timed out
    assert_valid(window)


# --- found by review: copies, the archive, the loop, placement -------------------------------


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
    release = threading.Event()
    released: list[bool] = []

    def slow(system: str, user: str) -> str:
        # Holds until the loop proves it kept running; False when it was not released (a
        # blocked loop), after a bound that keeps a failing run short.
        released.append(release.wait(10))
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
    assert released and all(released), "the summarizer ran while the loop was blocked"
    assert window.messages()[1]["content"].startswith("[Conversation Summary]")


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
