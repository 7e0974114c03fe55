"""The archive of evicted messages in the SQLite and PostgreSQL stores: the MessageArchive
protocol, search, bad input, any text round-tripping."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwindow import InvalidArgumentError, InvalidTypeError
from ctxwindow.archive import Archive, MessageArchive, retrieval_id

from ..window_checks import call, result
from .stores import DatabaseStore, archive_rows, close, texts


def test_session_archive_is_a_message_archive(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    archive = store.session_archive("s")
    assert isinstance(archive, MessageArchive)
    group = [call("c1"), result("c1", "flight HAT100 costs 200 USD")]
    group_id = archive.put(group)
    assert group_id == retrieval_id(group) == Archive().put(group)  # the same id in every archive
    assert archive.put(group) == group_id and len(store.search("s", "HAT100")) == 1  # stored once
    other = store.session_archive("t").put([{"role": "user", "content": "HAT100 elsewhere"}])
    assert archive.get(group_id) == group and archive.get("ctx-0000000000000000") is None
    assert archive.get(other) is None  # each session archive resolves its own groups
    assert archive.search("HAT100") == [(group_id, group)] and archive.search("nothing") == []
    assert open_database().session_archive("s").get(group_id) == group


def test_groups_and_put_many_keep_the_order_stored(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    archive = store.session_archive("s")
    first, second = [call("c1"), result("c1", "one")], [{"role": "user", "content": "two"}]
    assert archive.put_many([first, second, first]) == [retrieval_id(first), retrieval_id(second),
                                                        retrieval_id(first)]
    assert archive.put_many([]) == []
    assert archive.groups() == [(retrieval_id(first), first), (retrieval_id(second), second)]
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        archive.put_many([second, []])
    assert archive.groups() == [(retrieval_id(first), first), (retrieval_id(second), second)]


def test_archive_bad_input_raises_typed_errors_and_changes_nothing(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    archive = store.session_archive("s")
    archive.put([{"role": "user", "content": "kept"}])

    def rows() -> list[Any]:
        return archive_rows(store)

    before = rows()
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        archive.put([])
    with pytest.raises(InvalidTypeError, match="message dicts"):
        archive.put([{"role": "user", "content": "a"}, "not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError, match="JSON-serializable"):
        archive.put([{"role": "user", "content": "a"}, {"role": "user", "content": object()}])
    with pytest.raises(InvalidTypeError, match="message dicts"):
        store.archive("s", [{"role": "user", "content": "a"}, 42])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="query"):
        archive.search("  ")
    with pytest.raises(InvalidArgumentError, match="limit"):
        archive.search("kept", limit=-1)
    with pytest.raises(InvalidTypeError, match="retrieval id"):
        archive.get(7)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="session_id"):
        store.session_archive("../etc")
    assert rows() == before
    assert archive.search("!!!") == []


def test_archive_search_matches_words_and_phrases_and_ranks(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    messages = [
        {"role": "user", "content": "the flight HAT100 HAT100 HAT100 to Denver"},
        {"role": "user", "content": "a flight to Denver, then many other words, and HAT100 once among them all"},
        {"role": "tool", "tool_call_id": "c1", "content": "deployed to eu-west-1 today"},
        {"role": "user", "content": "eu and west and 1, apart"},
        {"role": "user", "content": "a NUL \x00 inside, reservation HAT999"},
    ]
    ids = store.archive("s", messages)
    store.archive("t", [{"role": "user", "content": "HAT100 in another session"}])
    assert [rid for rid, _ in store.search("s", "HAT100")] == [ids[0], ids[1]]  # more mentions rank first
    assert [rid for rid, _ in store.search("s", "hat100 denver")] == [ids[0], ids[1]]  # every word, any case
    assert store.search("s", "HAT100 nowhere") == []
    assert store.search("s", "eu-west-1") == [(ids[2], messages[2])]  # a phrase, not three words
    assert store.get(ids[4]) == messages[4]  # NUL kept exactly
    archive = store.session_archive("s")
    found = archive.search("nowhere HAT999 eu-west-1")  # any word
    assert sorted(group[0]["content"] for _, group in found) == sorted([messages[2]["content"], messages[4]["content"]])
    assert archive.search("HAT100", limit=1) == [(retrieval_id([messages[0]]), [messages[0]])]
    assert store.session_archive("t").search("Denver") == []


def test_archiver_archives_what_a_window_evicts(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    on_evict = store.archiver("s")
    evicted = [{"role": "user", "content": "an evicted question about HAT100"}]
    on_evict(evicted, None)
    assert [message for _, message in store.search("s", "HAT100")] == evicted
    assert store.archive("s", evicted) == ["s:1"]  # archived once, keeps its id
    with pytest.raises(InvalidArgumentError, match="session_id"):
        store.archiver("a b")


@given(before=texts, word=st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True), after=st.lists(texts, max_size=3))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_archive_round_trips_any_text_and_finds_its_words_property(
        open_database: Callable[[], DatabaseStore], before: str, word: str, after: list[str]) -> None:
    """Any text (NUL characters included) comes back exactly; a word it contains finds it."""
    store = open_database()
    session = f"s{uuid.uuid4().hex}"
    group = [{"role": "user", "content": f"{before} {word} {before}"}, *[{"role": "assistant", "content": a}
                                                                        for a in after]]
    archive = store.session_archive(session)
    group_id = archive.put(group)
    assert group_id == retrieval_id(group) and archive.get(group_id) == group
    assert (group_id, group) in archive.search(word)
    row_ids = store.archive(session, group[:1])
    assert store.get(row_ids[0]) == group[0] and store.search(session, word)
    close(store)
