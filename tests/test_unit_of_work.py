"""The unit of work (``ctxwindow.unit_of_work``): an operation completes or changes nothing,
deferred effects run in one fixed order, and events only after commit."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import ContextWindow, WindowBusyError
from ctxwindow.errors import InvalidArgumentError
from ctxwindow.unit_of_work import PHASES, Savepoints, UnitOfWork


class Cell:
    def __init__(self) -> None:
        self.value = 0

    def savepoint(self) -> int:
        return self.value

    def rollback(self, savepoint: int) -> None:
        self.value = savepoint


@settings(max_examples=100, deadline=None)
@given(operations=st.lists(st.tuples(st.lists(st.integers(0, 2), max_size=4), st.booleans(),
                                     st.sampled_from(PHASES + ("body",))), max_size=12))
def test_an_operation_completes_or_changes_nothing(operations: list[tuple[list[int], bool, str]]) -> None:
    cells = [Cell(), Cell(), Cell()]
    log: list[str] = []
    unit = UnitOfWork()
    for cell in cells:
        unit.register(cell)
    released: list[int] = []
    unit.register(Savepoints(lambda: None, lambda _: None, lambda: released.append(1)))
    for changes, fails, where in operations:
        before = [c.value for c in cells]

        def body() -> None:
            for index in changes:
                cells[index].value += 1
            for phase in PHASES:
                unit.defer(phase, functools.partial(log.append, phase))
            if fails and where != "body":
                unit.defer(where, lambda: (_ for _ in ()).throw(RuntimeError("deferred failure")))
            if fails and where == "body":
                raise RuntimeError("body failure")

        logged = len(log)
        commits = len(released)
        try:
            unit.run(body)
        except RuntimeError:
            if where != "events":  # a failed event does not undo the committed operation
                assert [c.value for c in cells] == before
                assert "events" not in log[logged:]
                assert len(released) == commits
                continue
        expected = [before[i] + changes.count(i) for i in range(3)]
        assert [c.value for c in cells] == expected
        assert log[logged:] == list(PHASES)
        assert len(released) == commits + 1
        assert not unit.busy


def test_a_call_during_an_operation_is_refused_and_events_come_after_commit() -> None:
    window = ContextWindow("gpt-4o", max_tokens=2_000)
    seen: list[Any] = []

    def strategy(messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        try:
            window.add({"role": "user", "content": "inside"})
        except WindowBusyError:
            seen.append("busy")
        return messages

    def on_turn_start(turn: int) -> None:  # the operation has committed: the window is free
        seen.append([m["content"] for m in window.messages()])

    window.events.on("on_turn_start", on_turn_start)
    window.add({"role": "user", "content": "hi"})
    assert seen == [["hi"]]
    busy = ContextWindow("gpt-4o", max_tokens=400, strategies=[strategy], fidelity_gate=False)
    window = busy
    for index in range(12):
        busy.add({"role": "user" if index % 2 == 0 else "assistant", "content": "word " * 40})
    assert "busy" in seen and all("inside" not in str(m["content"]) for m in busy.messages())

    unit = UnitOfWork()
    with pytest.raises(WindowBusyError):
        unit.run(lambda: unit.run(lambda: None))
    assert not unit.busy


def test_unknown_phase_is_refused() -> None:
    unit = UnitOfWork()
    with pytest.raises(InvalidArgumentError, match="unknown phase"):
        unit.defer("later", lambda: None)


def test_the_async_loop_awaits_then_plans_again() -> None:
    from ctxwindow.strategies.base import NeedsAwait

    unit = UnitOfWork()
    runs: list[Any] = []

    def body() -> str:
        runs.append(dict(unit.answers))
        key = (0, "k", "")
        if key not in unit.answers:
            raise NeedsAwait(key, lambda: "summary", None, is_async=False)
        return str(unit.answers[key])

    assert asyncio.run(unit.arun(body)) == "summary"
    assert runs == [{}, {(0, "k", ""): "summary"}]
    assert not unit.busy and not unit.awaiting
