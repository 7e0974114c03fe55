"""Recall: evicted messages come back, within the memory_injection budget."""

from __future__ import annotations

import gc
import gzip
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import ContextOverflowError, ContextWindow, InvalidArgumentError, InvalidTypeError, Recall
from ctxwindow._native import Bm25Index
from ctxwindow.checkpoint import SQLiteCheckpointStore
from ctxwindow.messages import check_history
from ctxwindow.recall import RECALL_HEADER, parse_recall_arguments, render_group
from tests.conftest import require_shared_data
from tests.test_checkpoint.stores import DatabaseStore, open_database  # noqa: F401 (a fixture)

LOCKER = {"role": "user", "content": "My locker code is 4417, please remember the locker code."}


def recall_window(max_tokens: int = 700, recall_tokens: int = 200, **more: Any) -> ContextWindow:
    more.setdefault("recall", Recall(max_tokens=recall_tokens))
    return ContextWindow("gpt-4o", max_tokens=max_tokens, reserve_output=0, preserve_recent=2, strategies=[],
                         instructions=False, **more)


def chatter(window: ContextWindow, rounds: int, start: int = 0) -> None:
    for i in range(start, start + rounds):
        window.add({"role": "user", "content": f"Tell me owl fact {i}, briefly."})
        window.add({"role": "assistant", "content": f"Owl fact {i}: owls turn their heads far. " * 3})


def inventory_exchange(window: ContextWindow) -> None:
    """A question answered through a tool call."""
    window.add({"role": "user", "content": "Look up the warehouse inventory."})
    window.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "inventory", "arguments": '{"site": "warehouse"}'}}]})
    window.add({"role": "tool", "tool_call_id": "c1", "content": "warehouse holds 312 crates of lanterns"})
    window.add({"role": "assistant", "content": "312 crates."})


def block_of(window: ContextWindow) -> str | None:
    for message in window.messages():
        if message["role"] == "system" and str(message["content"]).startswith(RECALL_HEADER):
            return str(message["content"])
    return None


# --- the native index --------------------------------------------------------------------------

def test_bm25_terms_stem_and_drop_function_words() -> None:
    assert Bm25Index.terms("The Flights to Paris, 2 cities!") == ["flight", "pari", "2", "city"]
    assert Bm25Index.terms("The Flights", stem=False) == ["flights"]
    with pytest.raises(InvalidTypeError):
        Bm25Index.terms(3)  # type: ignore[arg-type]


@given(st.lists(st.lists(st.sampled_from("alpha beta gamma delta eps zeta eta theta".split()), max_size=8),
                min_size=1, max_size=30),
       st.lists(st.sampled_from("alpha beta gamma delta eps zeta eta theta".split()), min_size=1, max_size=4),
       st.integers(0, 30), st.integers(1, 40))
def test_bm25_search_returns_documents_sharing_a_term_best_first_and_truncation_undoes(
        documents: list[list[str]], query: list[str], keep: int, limit: int) -> None:
    index, kept = Bm25Index(), Bm25Index()
    for i, words in enumerate(documents):
        index.add(" ".join(words))
        if i < keep:
            kept.add(" ".join(words))
    hits = index.search(" ".join(query), limit)
    matching = {i for i, words in enumerate(documents) if set(words) & set(query)}
    assert {doc for doc, _, _ in hits} <= matching
    assert len(hits) == min(limit, len(matching))
    scores = [score for _, score, _ in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)
    wanted = set(query)
    for doc, _, coverage in hits:
        assert 0 < coverage <= 1
        assert (coverage > 1 - 1e-5) == (wanted <= set(documents[doc]))
    index.truncate(keep)
    assert len(index) == min(keep, len(documents))
    assert index.search(" ".join(query), limit) == kept.search(" ".join(query), limit)


# --- the window -------------------------------------------------------------------------------

def test_an_evicted_message_comes_back_for_the_question_that_needs_it() -> None:
    window = recall_window()
    window.add(LOCKER)
    window.add({"role": "assistant", "content": "Noted: 4417."})
    chatter(window, 12)
    assert all("4417" not in str(m["content"]) for m in window.messages())
    window.add({"role": "user", "content": "What was my locker code?"})
    block = block_of(window)
    assert block is not None and "4417" in block
    assert LOCKER["content"] in block and "Noted: 4417." in block  # the question with its answer
    usage = window.usage
    assert usage.by_component["memory_injection"] == window.tokenizer.count_message(
        {"role": "system", "content": block}) <= 200
    assert window.budget.used["memory_injection"] == usage.by_component["memory_injection"]
    assert usage.total <= usage.budget
    assert check_history(window.messages()) == []


def test_the_block_follows_system_notes_and_comes_before_the_conversation() -> None:
    window = recall_window(system="You are terse.", context="Today is Monday.")
    window.write_note("decisions", "use owls")
    window.add(LOCKER)
    chatter(window, 12)
    window.add({"role": "user", "content": "locker code?"})
    roles = [(m["role"], str(m["content"])[:20]) for m in window.messages()]
    systems = [i for i, (role, _) in enumerate(roles) if role == "system"]
    assert systems == list(range(len(systems)))
    assert str(window.messages()[systems[-1]]["content"]).startswith(RECALL_HEADER)


def test_tool_groups_come_back_whole_and_the_block_is_stable_in_a_tool_loop() -> None:
    window = recall_window(max_tokens=900, recall_tokens=300)
    inventory_exchange(window)
    chatter(window, 12)
    window.add({"role": "user", "content": "How many lantern crates were in the warehouse inventory?"})
    block = block_of(window)
    assert block is not None
    assert "assistant calls inventory(" in block and "312 crates of lanterns" in block
    for i in range(6):  # a tool loop: the block does not change
        window.add({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"t{i}", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})
        window.add({"role": "tool", "tool_call_id": f"t{i}", "content": f"nothing {i} " * 20})
        assert block_of(window) in (block, None)
        assert window.usage.total <= window.usage.budget


def test_nothing_in_the_window_is_injected() -> None:
    window = recall_window(max_tokens=2_000)
    window.add(LOCKER)
    window.add({"role": "assistant", "content": "Noted."})
    window.add({"role": "user", "content": "locker code again?"})
    assert block_of(window) is None  # nothing was evicted
    assert window.recall is not None and len(window.recall) == 0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["chat", "tool", "ask"]), st.integers(0, 40), st.integers(1, 60)),
                min_size=1, max_size=40))
def test_budget_validity_and_no_duplicates_hold_for_any_conversation(
        steps: list[tuple[str, int, int]]) -> None:
    window = recall_window(max_tokens=800, recall_tokens=250)
    for n, (kind, topic, length) in enumerate(steps):
        words = f"topic{topic} " + " ".join(f"w{(topic * 7 + j) % 50}" for j in range(length))
        if kind == "tool":
            window.add({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps(words)}}]})
            before = block_of(window)
            window.add({"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}: {words}"})
            assert block_of(window) in (before, None)  # only a user message changes the block
        else:
            window.add({"role": "user", "content": f"message {n} {words}" + ("?" if kind == "ask" else "")})
            window.add({"role": "assistant", "content": f"reply {n} about {words}"})
        messages = window.messages()
        usage = window.usage
        assert usage.total <= usage.budget
        assert usage.by_component["memory_injection"] <= 250
        assert check_history(messages) == []
        block = block_of(window)
        if block is not None:
            conversation = [str(m["content"]) for m in messages if m["role"] != "system" and m["content"]]
            assert not any(f": {content}\n" in block + "\n" for content in conversation)


def test_a_failed_operation_leaves_window_and_recall_unchanged() -> None:
    down = {"now": False}

    def embedder(texts: list[str]) -> Any:
        if down["now"]:
            raise RuntimeError("embedding service down")
        return np.ones((len(texts), 4))

    window = recall_window(recall=Recall(max_tokens=200, embedder=embedder))
    window.add(LOCKER)
    chatter(window, 12)
    window.add({"role": "user", "content": "locker code?"})
    assert window.recall is not None and block_of(window) is not None
    down["now"] = True
    archived, block, messages = len(window.recall), block_of(window), window.messages()
    with pytest.raises(RuntimeError):
        chatter(window, 3, start=50)
    assert len(window.recall) == archived and block_of(window) == block and window.messages() == messages


def test_recall_yields_its_room_to_protected_content() -> None:
    window = recall_window(max_tokens=600, recall_tokens=300)
    window.add({"role": "user", "content": "short"})
    window.add({"role": "assistant", "content": "x " * 200})  # protected needs more than budget - reserve
    window.add({"role": "user", "content": "y " * 150})
    usage = window.usage
    assert usage.total <= usage.budget


def test_tool_schema_and_handle_recall_call() -> None:
    schema = Recall.tool_schema()
    assert schema["type"] == "function" and schema["function"]["name"] == "recall"
    assert set(schema["function"]["parameters"]["properties"]) == {"query", "id"}
    window = recall_window()
    window.add(LOCKER)
    window.add({"role": "assistant", "content": "Noted."})
    chatter(window, 12)
    answer = window.handle_recall_call('{"query": "locker code"}')
    assert "4417" in answer
    rid = answer.split("\n")[0].removeprefix("--- ")
    assert rid.startswith("ctx-")
    assert "4417" in window.handle_recall_call({"id": rid})
    assert window.handle_recall_call({"id": "ctx-0000000000000000"}).startswith("No archived messages")
    assert window.handle_recall_call({"query": "zebra"}).startswith("Nothing archived")
    before = window.messages()
    for bad in ("not json", "[1]", '{"query": ""}', '{"query": "a", "id": "b"}', "{}", '{"q": "a"}',
                {"query": 3}):
        with pytest.raises(InvalidArgumentError):
            window.handle_recall_call(bad)
    assert window.messages() == before
    assert parse_recall_arguments(b'{"id": "ctx-1"}') == (None, "ctx-1")


def test_placeholder_ids_resolve_through_the_recall_tool() -> None:
    window = ContextWindow("gpt-4o", max_tokens=700, reserve_output=0, instructions=False)
    window.archive.put([LOCKER])
    from ctxwindow.archive import retrieval_id
    assert "4417" in window.handle_recall_call({"id": retrieval_id([LOCKER])})
    with pytest.raises(InvalidArgumentError, match="no recall"):
        window.handle_recall_call({"query": "locker"})


def test_validation() -> None:
    bad: dict[str, Any]
    for bad in ({"max_tokens": 0}, {"max_tokens": 100, "k": 0}, {"max_tokens": 100, "min_overlap": 2},
                {"max_tokens": 100, "candidates": 0}, {"max_tokens": 100, "session_id": ""}):
        with pytest.raises(InvalidArgumentError):
            Recall(**bad)
    for bad in ({"max_tokens": True}, {"max_tokens": "200"}, {"max_tokens": 100, "session_id": None},
                {"max_tokens": 100, "min_overlap": "x"}, {"max_tokens": 100, "lexical": 3}):
        with pytest.raises(InvalidTypeError):
            Recall(**bad)
    with pytest.raises(InvalidTypeError):
        Recall(100).search(3)  # type: ignore[arg-type]
    for name in ("has space!", "", "x" * 65):
        with pytest.raises(InvalidArgumentError):
            Recall.tool_schema(name)
    with pytest.raises(InvalidArgumentError):
        parse_recall_arguments("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InvalidTypeError):
        Recall(100, embedder=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        Recall(100, store=object())
    not_a_recall: Any = 3
    with pytest.raises(InvalidTypeError):
        ContextWindow("gpt-4o", max_tokens=1000, recall=not_a_recall)
    shared = Recall(100)
    first = ContextWindow("gpt-4o", max_tokens=1000, recall=shared)
    with pytest.raises(InvalidArgumentError, match="another window"):
        ContextWindow("gpt-4o", max_tokens=1000, recall=shared)
    del first
    gc.collect()
    ContextWindow("gpt-4o", max_tokens=1000, recall=shared)  # the first window is gone
    with pytest.raises(ContextOverflowError, match="recall"):
        ContextWindow("gpt-4o", max_tokens=1000, reserve_output=0, recall=Recall(2_000))
    with pytest.raises(InvalidArgumentError):
        Recall(100).search("")
    with pytest.raises(InvalidArgumentError, match="lexical"):
        Recall(100, lexical="vector")
    with pytest.raises(InvalidArgumentError, match="SQLiteCheckpointStore"):
        Recall(100, lexical="fts5")
    bad_shape = Recall(100, embedder=lambda texts: np.ones(3))
    with pytest.raises(InvalidArgumentError, match="shape"):
        bad_shape.ingest([([LOCKER], None, None)])
    assert len(bad_shape) == 0 and bad_shape.search("locker") == []
    with pytest.raises(InvalidArgumentError, match="at least one message"):
        Recall(100).ingest([([], None, None)])
    assert "Recall(max_tokens=100" in repr(Recall(100))


def test_a_semantic_embedder_finds_what_shares_no_word_and_fusion_off_is_lexical() -> None:
    meanings = {"automobile": 0, "car": 0, "vehicle": 0, "parked": 1, "garage": 1, "owl": 2}

    def embedder(texts: list[str]) -> Any:
        vectors = np.zeros((len(texts), 3))
        for row, text in enumerate(texts):
            for word, axis in meanings.items():
                if word in text.lower():
                    vectors[row, axis] += 1.0
        return vectors + 1e-3

    recall = Recall(200, embedder=embedder)
    recall.ingest([([{"role": "user", "content": "My automobile is parked in the garage."}], 1, 1),
                   ([{"role": "user", "content": "Owls hunt at night."}], 2, 1)])
    hits = recall.search("where is my car?")
    assert hits and "automobile" in hits[0].messages[0]["content"]
    lexical = Recall(200, fusion=False)
    lexical.ingest([([{"role": "user", "content": "blue lantern"}], 1, 1),
                    ([{"role": "user", "content": "blue lantern lantern"}], 2, 1)])
    assert [h.messages[0]["content"] for h in lexical.search("lantern")][0] == "blue lantern lantern"
    with pytest.raises(InvalidArgumentError, match="fusion"):
        Recall(200, embedder=embedder, fusion=False)
    changing = {"dim": 3}
    grows = Recall(200, embedder=lambda texts: np.ones((len(texts), changing["dim"])))
    grows.ingest([([LOCKER], 1, 1)])
    changing["dim"] = 4
    with pytest.raises(InvalidArgumentError, match="dimension"):
        grows.ingest([([{"role": "user", "content": "other"}], 2, 1)])
    with pytest.raises(InvalidArgumentError, match="dimension"):
        grows.search("locker")
    changing["dim"] = 3
    assert len(grows) == 1 and grows.get(grows.search("locker")[0].retrieval_id) == [LOCKER]


def test_render_group() -> None:
    text = render_group([{"role": "assistant", "content": "checking", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "done"}]}])
    assert text == "assistant: checking\nassistant calls f({})\ntool (a): done"


# --- stores --------------------------------------------------------------------------------------

def test_recall_survives_a_restart_with_a_store(open_database: Callable[[], DatabaseStore]) -> None:
    store = open_database()
    window = recall_window(recall=Recall(max_tokens=200, store=store, session_id="s1"))
    window.add(LOCKER)
    window.add({"role": "assistant", "content": "Noted."})
    chatter(window, 12)
    window.save_checkpoint(store, "owls", session_id="s1")
    archived = len(window.recall) if window.recall is not None else 0
    assert archived > 0
    if isinstance(store, SQLiteCheckpointStore):
        assert store.session_archive("s1.recall").groups()
    again = open_database()  # a restart
    restored = recall_window(recall=Recall(max_tokens=200, store=again, session_id="s1"))
    assert restored.recall is not None and len(restored.recall) == archived
    restored.resume(again, "s1")
    restored.add({"role": "user", "content": "What is my locker code?"})
    block = block_of(restored)
    assert block is not None and "4417" in block
    conversation = [str(m["content"]) for m in restored.messages() if m["role"] != "system"]
    assert not any(f": {c}\n" in block + "\n" for c in conversation)  # not what the window holds
    other = recall_window(recall=Recall(max_tokens=200, store=again, session_id="other"))
    assert other.recall is not None and len(other.recall) == 0


# --- LongMemEval ---------------------------------------------------------------------------------

def test_recall_brings_back_longmemeval_evidence_that_fifo_lost() -> None:
    data = require_shared_data() / "longmemeval" / "longmemeval_s_subset.json.gz"
    with gzip.open(data, "rt", encoding="utf-8") as handle:
        questions = json.load(handle)[:4]
    found = {"fifo": 0, "recall": 0}
    for question in questions:
        evidence = [t["content"] for s in question["haystack_sessions"] for t in s if t.get("has_answer")]
        for name in found:
            window = ContextWindow("gpt-4o", max_tokens=8_000, reserve_output=500, strategies=[], preserve_recent=2,
                                   instructions=False, recall=Recall(1_875) if name == "recall" else None)
            for session in question["haystack_sessions"]:
                for turn in session:
                    try:
                        window.add({"role": turn["role"], "content": turn["content"]})
                    except ContextOverflowError:
                        pass
            window.add({"role": "user", "content": question["question"]})
            text = "\n".join(str(m["content"]) for m in window.messages())
            found[name] += sum(content in text for content in evidence)
            assert window.usage.total <= window.usage.budget
    assert found["recall"] > found["fifo"]


def test_fts5_lexical_search_of_a_sqlite_store(tmp_path: Any) -> None:
    store = SQLiteCheckpointStore(tmp_path / "recall.db")
    window = recall_window(recall=Recall(max_tokens=200, store=store, lexical="fts5"))
    window.add(LOCKER)
    window.add({"role": "assistant", "content": "Noted."})
    chatter(window, 12)
    window.add({"role": "user", "content": "What was my locker code?"})
    block = block_of(window)
    assert block is not None and "4417" in block


# --- regressions -----------------------------------------------------------------------------------

def test_what_a_rebuilt_or_reused_window_holds_is_not_injected() -> None:
    ack = {"role": "assistant", "content": "Noted: 4417."}
    history: list[dict[str, Any]] = [LOCKER, ack]
    for i in range(12):
        history += [{"role": "user", "content": f"Tell me owl fact {i}, briefly."},
                    {"role": "assistant", "content": f"Owl fact {i}: owls turn their heads far. " * 3}]
    window = recall_window()
    window.sync(history + [{"role": "user", "content": "anything"}])
    window.sync([LOCKER, ack, {"role": "user", "content": "What was my locker code?"}])  # a rebuild
    block = block_of(window) or ""
    assert LOCKER["content"] in [m["content"] for m in window.messages()] and LOCKER["content"] not in block
    # The same question again, verbatim: it is in the window, so it is not injected.
    window = recall_window()
    window.add(LOCKER)
    window.add(ack)
    chatter(window, 12)
    window.add(dict(LOCKER))
    assert f"user: {LOCKER['content']}" not in (block_of(window) or "")
    # A Recall handed on to a new window (the first is gone): its groups come back there.
    recall = Recall(250)
    first = recall_window(recall=recall)
    first.add(LOCKER)
    first.add(ack)
    chatter(first, 12)
    del first
    gc.collect()
    second = recall_window(recall=recall)
    second.add({"role": "user", "content": "Hello there."})
    second.add({"role": "assistant", "content": "Hi."})
    second.add({"role": "user", "content": "What was my locker code?"})
    assert "4417" in (block_of(second) or "")


def test_neighbours_are_of_the_same_exchange_and_the_block_is_oldest_first() -> None:
    window = recall_window(max_tokens=700, recall_tokens=250)
    window.add(LOCKER)
    window.add({"role": "assistant", "content": "Sure."}, pinned=True)
    window.add({"role": "user", "content": "Which colour should the kitchen be?"}, pinned=True)
    window.add({"role": "assistant", "content": "Paint the kitchen a deep green, it suits oak."})
    chatter(window, 12)
    window.add({"role": "user", "content": "What was my locker code?"})
    block = block_of(window) or ""
    assert "4417" in block and "deep green" not in block  # another turn's answer is no neighbour
    turns = [int(t) for t in re.findall(r"\(turn (\d+)\)", block)]
    assert turns == sorted(turns)


def test_recall_groups_live_apart_from_the_archiver_in_a_store(tmp_path: Any) -> None:
    path = tmp_path / "s.db"
    store = SQLiteCheckpointStore(path)
    window = recall_window(max_tokens=900, recall_tokens=300, recall=Recall(300, store=store, session_id="s1"))
    window.events.on("on_evict", store.archiver("s1"))  # the README's archiver, same session
    inventory_exchange(window)
    chatter(window, 14)
    window.save_checkpoint(store, "goal", session_id="s1")
    archived = len(window.recall) if window.recall is not None else 0
    again = SQLiteCheckpointStore(path)
    restarted = recall_window(max_tokens=900, recall_tokens=300, recall=Recall(300, store=again, session_id="s1"))
    assert restarted.recall is not None and len(restarted.recall) == archived
    restarted.resume(again, "s1")
    restarted.add({"role": "user", "content": "How many lantern crates were in the warehouse inventory?"})
    block = block_of(restarted) or ""
    assert block.count("assistant calls inventory(") == 1 and block.count("312 crates of lanterns") == 1


def test_the_recall_tool_answer_is_capped() -> None:
    window = recall_window(max_tokens=2_000, recall_tokens=120)
    window.add({"role": "user", "content": "lantern " * 300})
    window.add({"role": "assistant", "content": "ok"})
    window.add({"role": "user", "content": "short lantern note"})
    window.add({"role": "assistant", "content": "ok"})
    window.compact(force=True, target=0.05)
    answer = window.handle_recall_call({"query": "lantern"})
    assert "too long to show here" in answer and window.tokenizer.count(answer) < 300
    assert window.handle_recall_call({"query": "zebra " * 1000}).endswith("...'.")
