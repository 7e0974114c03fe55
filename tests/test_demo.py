"""The demo runs on the bundled trajectory and shows evictions by whole groups."""

from __future__ import annotations

import pytest

from ctxwindow import Tokenizer, TokenHistory
from ctxwindow.demo import load_trajectory, main


def test_demo_prints_counts_and_evictions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--max-tokens", "2500"]) == 0
    out = capsys.readouterr().out
    messages = load_trajectory()
    total = Tokenizer.for_model("gpt-4o").count_messages(messages)
    assert f"total prompt: {total} tokens" in out
    assert "evicted" in out
    assert "no tool result separated from its call" in out


def test_bundled_trajectory_replays_without_splitting_pairs() -> None:
    tokenizer = Tokenizer.for_model("gpt-4o")
    messages = load_trajectory()
    assert messages[0]["role"] == "system"
    history = TokenHistory()
    overhead = tokenizer.count_message(messages[0]) + 3
    for message in messages[1:]:
        history.push(message, tokenizer.count_message(message), message["role"] != "tool")
        history.evict(1800, overhead)
        kept = list(history)
        call_ids = {c["id"] for m in kept for c in m.get("tool_calls") or []}
        assert all(m["tool_call_id"] in call_ids for m in kept if m["role"] == "tool")
        assert history.total_tokens + overhead <= 1800 or len(history) == 0
