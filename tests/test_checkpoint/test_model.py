"""The checkpoint model: validation, the stored document, the progress file, the protocol every
store implements."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from ctxwindow import CheckpointCorruptError, InvalidArgumentError, InvalidTypeError
from ctxwindow.checkpoint import CheckpointStore, FileCheckpointStore, SQLiteCheckpointStore, Subtask, TaskCheckpoint

from .stores import checkpoints


def test_validation() -> None:
    with pytest.raises(InvalidArgumentError, match="needs a goal"):
        TaskCheckpoint(goal="  ")
    with pytest.raises(InvalidArgumentError, match="window_id"):
        TaskCheckpoint(goal="g", window_id="bad id!")
    with pytest.raises(InvalidArgumentError, match="version"):
        TaskCheckpoint(goal="g", version=-1)
    with pytest.raises(InvalidArgumentError, match="status 'maybe'"):
        TaskCheckpoint(goal="g", subtasks=[Subtask("a", "maybe")])
    with pytest.raises(InvalidTypeError, match="learnings must be a list of str"):
        TaskCheckpoint(goal="g", learnings=["ok", 3])  # type: ignore[list-item]
    warnings = TaskCheckpoint(goal="g", subtasks=[Subtask("a", "done"), Subtask("b")]).validate()
    assert warnings and "no current subtask" in warnings[0]


@given(checkpoint=checkpoints)
def test_document_round_trip(checkpoint: TaskCheckpoint) -> None:
    document = checkpoint.to_dict()
    assert document["schema"] == "ctxwindow.checkpoint/1"
    assert TaskCheckpoint.from_dict(document) == checkpoint


@pytest.mark.parametrize("document", [
    {"goal": "no schema"}, {"schema": "something/else", "goal": "x"}, {"schema": "ctxwindow.checkpoint/1"},
    {"schema": "ctxwindow.checkpoint/1", "goal": "g", "unknown": 1},
    {"schema": "ctxwindow.checkpoint/1", "goal": "g", "subtasks": [{"title": "t", "status": "maybe"}]},
    {"schema": "ctxwindow.checkpoint/1", "goal": "g", "decisions": "not a list"}, [1, 2, 3],
], ids=["no-schema", "other-schema", "no-goal", "unknown-field", "bad-status", "bad-list", "not-a-dict"])
def test_from_dict_of_anything_else_is_corrupt(document: object) -> None:
    with pytest.raises(CheckpointCorruptError):
        TaskCheckpoint.from_dict(document)  # type: ignore[arg-type]


def test_progress_file_marks_each_subtask() -> None:
    checkpoint = TaskCheckpoint(goal="ship", subtasks=[Subtask("a", "done"), Subtask("b", "in_progress", "half"),
                                                       Subtask("c")], summary="so far")
    text = checkpoint.to_markdown()
    assert text.startswith("# ship\n")
    assert "- [x] a\n- [~] b: half\n- [ ] c\n" in text and text.endswith("## Summary\nso far\n")


def test_every_store_implements_the_protocol(tmp_path: Path) -> None:
    stores: list[CheckpointStore] = [FileCheckpointStore(tmp_path / "files"),
                                     SQLiteCheckpointStore(tmp_path / "c.db")]
    assert all(isinstance(store, CheckpointStore) for store in stores)
    assert not isinstance(object(), CheckpointStore)
