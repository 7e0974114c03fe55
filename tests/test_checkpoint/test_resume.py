"""The resume prompt: ordered by importance, bounded in tokens, never presenting planned work as done."""

from __future__ import annotations

import pytest

from ctxwindow import InvalidArgumentError, Tokenizer
from ctxwindow.checkpoint import Subtask, TaskCheckpoint, bootstrap_prompt


def test_bootstrap_prompt_is_ordered_and_bounded() -> None:
    checkpoint = TaskCheckpoint(
        goal="Migrate auth to OAuth", constraints=["Never push to main without review."],
        subtasks=[Subtask("inventory endpoints", "done"), Subtask("token refresh", "in_progress"),
                  Subtask("rollout", "planned")],
        decisions=["Use PKCE for the mobile client."], open_issues=["Refresh fails on Safari"],
        learnings=["Staging tokens expire after 5 minutes."] * 20, summary="Long story " * 100)
    text = bootstrap_prompt(checkpoint)
    order = ["Goal:", "Constraints (verbatim):", "Current subtask:", "Remaining (not started):", "Last done:",
             "Open issues:", "Decisions:", "Learnings:", "Previous summary:"]
    positions = [text.index(title) for title in order]
    assert positions == sorted(positions)
    assert "- rollout" in text.split("Remaining (not started):")[1].split("Last done:")[0]
    assert "rollout" not in text.split("Last done:")[1].split("Open issues:")[0]
    bounded = bootstrap_prompt(checkpoint, max_tokens=80)
    assert Tokenizer("o200k_base").count(bounded) <= 80
    assert "Migrate auth to OAuth" in bounded and "Never push to main without review." in bounded
    assert "Previous summary" not in bounded


def test_bootstrap_prompt_leaves_the_checkpoint_unchanged_and_cuts_a_long_goal() -> None:
    checkpoint = TaskCheckpoint(goal="Migrate auth to OAuth " * 50, learnings=["a lesson"] * 5)
    before = TaskCheckpoint.from_dict(checkpoint.to_dict())
    text = bootstrap_prompt(checkpoint, max_tokens=20)
    assert Tokenizer("o200k_base").count(text) <= 20 and text.startswith("[Resuming task")
    assert checkpoint == before  # dropping lines never edits the checkpoint's own lists
    with pytest.raises(InvalidArgumentError, match="max_tokens"):
        bootstrap_prompt(checkpoint, max_tokens=0)
