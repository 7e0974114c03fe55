"""The built-in strategies and the cascade, each run by a window: truncation and clearing of
tool results (with retrieval of the originals), scored eviction, the sliding window, micro
compaction, and the cascade's cost order. The summarizing strategies are in test_summaries.py."""

from __future__ import annotations

from typing import Any

from ctxwindow import ContextWindow
from ctxwindow.strategies import (
    Cascade,
    ClearToolResults,
    DropOldest,
    MicroCompact,
    ScoredEviction,
    SlidingWindow,
    TruncateToolResults,
)

from .window_checks import call, check_valid, result


def tool_heavy_window(strategy: object) -> ContextWindow:
    window = ContextWindow("gpt-4o", max_tokens=1500, preserve_recent=2, strategies=[strategy])
    window.add({"role": "user", "content": "go"})
    for i in range(4):
        window.add(call(f"c{i}", name="search"))
        window.add(result(f"c{i}", f"result {i} " + "lorem ipsum " * 200))
    window.add({"role": "user", "content": "summarize"})
    check_valid(window, None)
    return window


def test_truncate_tool_results() -> None:
    window = tool_heavy_window(TruncateToolResults(100))
    tools = [m for m in window.messages() if m["role"] == "tool"]
    truncated = [m for m in tools if "\n\n[Truncated: " in m["content"]]
    assert truncated
    for message in truncated:
        head, marker = message["content"].split("\n\n[Truncated: ")
        assert len(head) == 100 and head.startswith("result")
        assert marker == f"{len('result 0 ' + 'lorem ipsum ' * 200)} chars total, showing first 100]"
    assert window.last_compaction is not None and "truncate_tool_results" in window.last_compaction.applied


def test_clear_tool_results_and_retrieve() -> None:
    window = tool_heavy_window(ClearToolResults(keep=1))
    tools = [m for m in window.messages() if m["role"] == "tool"]
    cleared = [m for m in tools if m["content"].startswith("[Tool result cleared: search at turn 1; retrieval id ")]
    assert cleared
    for message in cleared:
        retrieval_id = message["content"].rsplit("retrieval id ", 1)[1].rstrip("]")
        original = window.retrieve(retrieval_id)
        assert original is not None and original[0]["content"].startswith("result")
        assert original[0]["tool_call_id"] == message["tool_call_id"]
    assert window.retrieve("ctx-999") is None


def test_cascade_runs_cheapest_first_and_stops_at_target() -> None:
    calls: list[str] = []

    class Recorder:
        def __init__(self, name: str, cost: str) -> None:
            self.name, self.cost = name, cost

        def apply(self, state: Any) -> Any:
            calls.append(self.name)
            return DropOldest().apply(state)

    cascade = Cascade([Recorder("llm-summary", "llm"), Recorder("free-drop", "free"), Recorder("free-2", "free")])
    assert [s.name for s in cascade.strategies] == ["free-drop", "free-2", "llm-summary"]
    window = ContextWindow("gpt-4o", max_tokens=600, strategies=[cascade], preserve_recent=1)
    for i in range(40):
        window.add({"role": "user", "content": f"m{i} " + "text " * 10})
    assert calls and set(calls) == {"free-drop"}
    check_valid(window, None)


def test_scored_eviction_and_sliding_window() -> None:
    for strategy in (ScoredEviction("hybrid"), SlidingWindow(6), MicroCompact()):
        window = ContextWindow("gpt-4o", max_tokens=900, strategies=[strategy], preserve_recent=2)
        window.add({"role": "user", "content": "start"})
        applied: set[str] = set()
        for i in range(15):
            window.add(call(f"c{i}"))
            window.add(result(f"c{i}", "value   \t  " * 40 + "\n\n\n\nend"))
            window.add({"role": "user", "content": f"next {i}"})
            if window.last_compaction is not None:
                applied.update(window.last_compaction.applied)
        check_valid(window, None)
        assert strategy.name in applied, (strategy.name, applied)
