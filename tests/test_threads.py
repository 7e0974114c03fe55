"""Threads: 8 threads share one `TokenHistory` and one `Tokenizer` and run mixed operations.

History mutations take a ticket (the order lock) so their order is recorded; everything else
(counting, encoding, chat accounting, embeddings, reads of the history, iteration) runs unordered
and concurrently with them, the tokenizer with the GIL released on long texts. At the end:

- no thread raised anything but the typed errors the operation may raise by design
  (`SnapshotError` for a rollback to a snapshot another thread's rollback made unreachable,
  `HistoryIndexError` for an index that another thread's eviction made stale);
- every count, id list, chat count and embedding seen by a thread equals the serial one;
- a serial replay of the recorded mutations gives the same entries, totals, kept entries, evicted
  lists and rollback outcomes.

The suite runs 8 x 300 operations; `make soak` runs 8 x 10,000 (CTXWINDOW_THREAD_OPS).
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxwindow import TokenHistory, Tokenizer
from ctxwindow.errors import HistoryIndexError, SnapshotError

THREADS = 8
OPS = int(os.environ.get("CTXWINDOW_THREAD_OPS", "300"))

WORDS = ("the", "flight", "reservation", "ABC123", "refund", "{\"id\": 42}", "naïve", "中文",
         "👍🏽", "\n", "  ", "it's", "3.14159", "path/to/file.py:12", "=====", "\t")


def make_text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        # A long single piece: the linear counter of long pieces, possibly built concurrently.
        return rng.choice("ab=é") * rng.randrange(100, 3000)
    if kind < 0.10:
        return "".join(rng.choice("abcdefghij") for _ in range(rng.randrange(100, 1500)))
    return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 40)))


@dataclass
class Log:
    """The mutations in the order they took effect, with what each returned."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ops: list[tuple[Any, ...]] = field(default_factory=list)
    snapshots: dict[int, Any] = field(default_factory=dict)


@dataclass
class Seen:
    """What one thread observed from the tokenizer, checked serially afterwards."""

    counts: list[tuple[str, int]] = field(default_factory=list)
    many: list[tuple[list[str], list[int]]] = field(default_factory=list)
    encoded: list[tuple[str, list[int]]] = field(default_factory=list)
    chats: list[tuple[list[dict[str, str]], int]] = field(default_factory=list)
    embeddings: list[tuple[list[str], Any]] = field(default_factory=list)
    expected_errors: int = 0


def worker(index: int, history: TokenHistory, tokenizer: Tokenizer, log: Log, seen: Seen,
           failures: list[BaseException], start: threading.Barrier) -> None:
    rng = random.Random(1000 + index)
    mine: list[int] = []
    try:
        start.wait()
        for step in range(OPS):
            roll = rng.random()
            if roll < 0.35:
                text = make_text(rng)
                tokens = tokenizer.count(text)
                seen.counts.append((text, tokens))
                item = (index, step, text)
                group = rng.random() < 0.7
                with log.lock:
                    history.push(item, tokens, group)
                    log.ops.append(("push", item, tokens, group))
            elif roll < 0.45:
                max_tokens = rng.randrange(0, 4000)
                overhead = rng.randrange(0, 50)
                low = rng.choice([None, max_tokens // 2])
                with log.lock:
                    evicted = history.evict(max_tokens, overhead, low)
                    log.ops.append(("evict", max_tokens, overhead, low, evicted))
            elif roll < 0.50:
                with log.lock:
                    snapshot = history.snapshot()
                    key = len(log.snapshots)
                    log.snapshots[key] = snapshot
                    log.ops.append(("snapshot", key))
                mine.append(key)
            elif roll < 0.54 and mine:
                with log.lock:
                    # The latest snapshot of any thread, or an older one of this thread (more
                    # likely made unreachable by another thread's rollback).
                    key = len(log.snapshots) - 1 if rng.random() < 0.6 else rng.choice(mine)
                    try:
                        history.rollback(log.snapshots[key])
                        outcome = "ok"
                    except SnapshotError:
                        outcome = "unreachable"
                        seen.expected_errors += 1
                    log.ops.append(("rollback", key, outcome))
            elif roll < 0.55:
                with log.lock:
                    history.clear()
                    log.ops.append(("clear",))
            elif roll < 0.80:
                tokenizer_op(rng, tokenizer, seen)
            else:
                read_history(rng, history, tokenizer, seen)
    except BaseException as exc:  # noqa: BLE001 - reported by the main thread
        failures.append(exc)


def tokenizer_op(rng: random.Random, tokenizer: Tokenizer, seen: Seen) -> None:
    kind = rng.randrange(5)
    if kind == 0:
        text = make_text(rng)
        seen.counts.append((text, tokenizer.count(text)))
    elif kind == 1:
        texts = [make_text(rng) for _ in range(rng.randrange(1, 40))]
        seen.many.append((texts, tokenizer.count_many(texts).tolist()))
    elif kind == 2:
        text = make_text(rng)
        seen.encoded.append((text, tokenizer.encode(text)))
    elif kind == 3:
        chat = [{"role": rng.choice(["user", "assistant", "system"]), "content": make_text(rng)}
                for _ in range(rng.randrange(1, 6))]
        seen.chats.append((chat, tokenizer.count_messages(chat)))
    else:
        texts = [make_text(rng) for _ in range(rng.randrange(1, 8))]
        seen.embeddings.append((texts, tokenizer.embed_many(texts, dim=32)))


def read_history(rng: random.Random, history: TokenHistory, tokenizer: Tokenizer,
                 seen: Seen) -> None:
    kind = rng.randrange(4)
    if kind == 0:
        # One call is one consistent state: each entry's tokens are its text's count.
        for (_, _, text), tokens, _ in history.entries():
            seen.counts.append((text, tokens))
    elif kind == 1:
        total = history.total_tokens
        assert total >= 0 and len(history) >= 0
        assert sum(history.token_counts()) >= 0
    elif kind == 2:
        for item in history:
            assert isinstance(item, tuple) and len(item) == 3
    else:
        length = len(history)
        if length:
            try:
                item, tokens, _ = history.entry(rng.randrange(length))
                seen.counts.append((item[2], tokens))
            except HistoryIndexError:
                seen.expected_errors += 1


def replay(log: Log) -> tuple[TokenHistory, list[Any]]:
    history = TokenHistory()
    snapshots: dict[int, Any] = {}
    outcomes: list[Any] = []
    for op in log.ops:
        if op[0] == "push":
            history.push(op[1], op[2], op[3])
        elif op[0] == "evict":
            outcomes.append(history.evict(op[1], op[2], op[3]))
        elif op[0] == "snapshot":
            snapshots[op[1]] = history.snapshot()
        elif op[0] == "rollback":
            try:
                history.rollback(snapshots[op[1]])
                outcomes.append("ok")
            except SnapshotError:
                outcomes.append("unreachable")
        else:
            history.clear()
    # The snapshots stay alive until the comparison, as the concurrent run's do.
    outcomes.append(snapshots)
    return history, outcomes


def run_threads() -> tuple[TokenHistory, Log, list[Seen]]:
    history = TokenHistory()
    tokenizer = Tokenizer("o200k_base")
    log = Log()
    seen = [Seen() for _ in range(THREADS)]
    failures: list[BaseException] = []
    start = threading.Barrier(THREADS)
    threads = [threading.Thread(target=worker, args=(i, history, tokenizer, log, seen[i],
                                                     failures, start)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return history, log, seen


def test_threads_share_one_history_and_one_tokenizer() -> None:
    history, log, seen = run_threads()
    tokenizer = Tokenizer("o200k_base")
    assert len(log.ops) > THREADS * OPS // 3
    for observed in seen:
        for text, count in observed.counts:
            assert count == tokenizer.count(text)
        for texts, counts in observed.many:
            assert counts == [tokenizer.count(t) for t in texts]
        for text, ids in observed.encoded:
            assert ids == tokenizer.encode(text)
        for chat, count in observed.chats:
            assert count == tokenizer.count_messages(chat)
        for texts, vectors in observed.embeddings:
            assert np.array_equal(vectors, tokenizer.embed_many(texts, dim=32))

    serial, outcomes = replay(log)
    recorded = [op[4] if op[0] == "evict" else op[2] for op in log.ops
                if op[0] in ("evict", "rollback")]
    assert outcomes[:-1] == recorded
    assert serial.entries() == history.entries()
    assert serial.total_tokens == history.total_tokens
    assert len(serial) == len(history)
    assert serial.kept_for_snapshots == history.kept_for_snapshots
    kinds = {op[0] for op in log.ops}
    assert kinds >= {"push", "evict", "snapshot", "rollback"}, kinds
