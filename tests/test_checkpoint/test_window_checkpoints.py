"""A window's checkpoint and resume through the database stores, and placeholders whose
retrieval ids resolve from a store's archive after a restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ctxwindow import ContextWindow, InvalidArgumentError
from ctxwindow.checkpoint import TaskCheckpoint
from ctxwindow.strategies import Summarize

from ..window_checks import call, check_valid, result
from .stores import DatabaseStore


def test_window_checkpoint_and_resume_round_trip(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    evicted: list[Any] = []

    def build() -> ContextWindow:
        return ContextWindow("gpt-4o", max_tokens=1400, preserve_recent=2,
                             strategies=[Summarize(preserve_recent=3)])

    window = build()
    window.set_system("You are a travel agent.")
    window.events.on("on_evict", store.archiver("trip"))
    window.events.on("on_evict", lambda e, u: evicted.extend(e))
    window.write_note("constraints", "Never book basic economy.", "critical")
    window.add({"role": "user", "content": "Find me a flight to Denver (reservation ZFA04Y)."}, pinned=True)
    for i in range(12):
        window.add({"role": "user", "content": f"question {i} " + "details " * 30})
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", f"flight HAT{100 + i} costs {200 + i} USD " * 10))
    window.add(call("pending"))  # a call still waiting for its result
    checkpoint = window.checkpoint("Book a trip", constraints=["Never book basic economy."])
    store.save(checkpoint, "trip")

    resumed = build()
    assert resumed.resume(store, "trip") is not None
    assert resumed.messages() == window.messages()
    assert resumed.usage.total == window.usage.total
    assert resumed.pending_messages() == window.pending_messages()
    resumed.add(result("pending", "done"))
    window.add(result("pending", "done"))
    assert resumed.messages() == window.messages()
    check_valid(resumed, "You are a travel agent.")
    summary = next(m["content"] for m in resumed.messages() if str(m["content"]).startswith("[Conversation Summary]"))
    retrieval_id = summary.rsplit("retrieval id ", 1)[1].rstrip(")")
    assert resumed.retrieve(retrieval_id)
    assert evicted and store.search("trip", "HAT100")
    assert store.get(store.search("trip", "question")[0][0]) is not None
    with pytest.raises(InvalidArgumentError, match="no window state"):
        build().restore(TaskCheckpoint(goal="x"))


def test_placeholder_ids_resolve_from_the_archive_after_a_restart(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    window = ContextWindow("gpt-4o", max_tokens=1400, preserve_recent=2,
                           strategies=[Summarize(preserve_recent=3)], archive=store.session_archive("trip"))
    for i in range(12):
        window.add({"role": "user", "content": f"question {i} " + "details " * 30})
        window.add(call(f"c{i}"))
        window.add(result(f"c{i}", f"flight HAT{100 + i} costs {200 + i} USD " * 10))
    ids = [m["content"].split("retrieval id ", 1)[1].split("]")[0].split(")")[0]
           for m in window.messages() if isinstance(m.get("content"), str) and "retrieval id " in m["content"]]
    assert ids
    reopened = open_database().session_archive("trip")
    for group_id in ids:
        originals = window.retrieve(group_id)
        assert originals and reopened.get(group_id) == originals
