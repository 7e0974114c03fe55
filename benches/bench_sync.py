"""``ContextWindow.sync`` of a history that grew by one message against ``add`` of that message.

A framework hands the window its whole history before every model call. Both windows hold the
same 2,000-message history (~1 KB real chat messages, 16,000-token budget, so compaction runs as
in a real session); then, per turn, one message is appended and either the whole list is synced
(``sync``) or the message is added (``add``, the peer). Three ways the history comes back are
measured: the same objects (LangChain, Pydantic AI, a plain list), equal copies (the OpenAI Agents
SDK rebuilds its input items each call), and an edit in the middle (a rebuild from the first
difference).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_results  # noqa: E402
from bench_window import MAX_TOKENS, kilobyte_messages  # noqa: E402

from ctxwindow import ContextWindow  # noqa: E402

HISTORY = 2_000
TURNS = 400


def window() -> ContextWindow:
    # Standing-instruction detection off on both sides: it runs on every user message however
    # the message arrives, so it adds the same to sync and add and is measured elsewhere.
    return ContextWindow("gpt-4o", max_tokens=MAX_TOKENS, system="You are a helpful assistant.",
                         instructions=False)


def add_us(messages: list[dict[str, Any]]) -> float:
    peer = window()
    peer.extend(messages[:HISTORY])
    started = time.perf_counter()
    for message in messages[HISTORY:]:
        peer.add(message)
    return (time.perf_counter() - started) / TURNS * 1e6


def sync_us(messages: list[dict[str, Any]], copies: bool) -> float:
    ours = window()
    history = list(messages[:HISTORY])
    ours.sync(history)
    elapsed = 0.0
    for message in messages[HISTORY:]:
        history.append(message)
        given = [dict(m) for m in history] if copies else history
        started = time.perf_counter()
        ours.sync(given)
        elapsed += time.perf_counter() - started
    return elapsed / TURNS * 1e6


def rebuild_us(messages: list[dict[str, Any]], repeat: int = 20) -> float:
    ours = window()
    history = list(messages[:HISTORY])
    ours.sync(history)
    elapsed = 0.0
    for index in range(repeat):
        history[HISTORY // 2] = {"role": "assistant", "content": f"edited {index}"}
        started = time.perf_counter()
        ours.sync(history)
        elapsed += time.perf_counter() - started
    return elapsed / repeat * 1e6


def main() -> None:
    messages = kilobyte_messages(HISTORY + TURNS)
    # Best of five interleaved runs: noise only adds to a cost.
    adds, same, copies = [], [], []
    for _ in range(5):
        adds.append(add_us(messages))
        same.append(sync_us(messages, copies=False))
        copies.append(sync_us(messages, copies=True))
    add, synced, copied = min(adds), min(same), min(copies)
    rebuild = rebuild_us(messages)
    table = [["measure (2,000 messages of history, grown by one)", "sync", "add (peer)", "ratio"],
             ["same message objects handed back", f"{synced:.1f} us", f"{add:.1f} us",
              f"**{synced / add:.2f}x** (target <= 2x)"],
             ["equal copies handed back (deep comparison)", f"{copied:.1f} us", f"{add:.1f} us",
              f"{copied / add:.2f}x"],
             ["edit in the middle: rebuild from the first difference", f"{rebuild / 1e3:.2f} ms",
              f"{add:.1f} us", f"{rebuild / add:.0f}x"]]
    write_results("sync", {"history": HISTORY, "turns": TURNS, "max_tokens": MAX_TOKENS, "add_us": add,
                           "sync_same_objects_us": synced, "sync_equal_copies_us": copied,
                           "rebuild_us": rebuild, "ratio": synced / add},
                  table, f"ContextWindow.sync vs add (budget {MAX_TOKENS:,} tokens, ~1 KB messages)")


if __name__ == "__main__":
    main()
