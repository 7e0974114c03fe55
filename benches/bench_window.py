"""ContextWindow per-turn cost (add one ~1 KB message, then messages()) with 10^3, 10^4 and 10^5
messages of history, and against LangChain's ``trim_messages`` with an exact tiktoken counter on
the same conversation at 2,000 messages. Texts are real human chat (chitchat), ~1 KB per message.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA, offline_tiktoken, write_results  # noqa: E402

from ctxwindow import ContextWindow  # noqa: E402

MAX_TOKENS = 16_000


def kilobyte_messages(count: int) -> list[dict[str, str]]:
    """`count` alternating user/assistant messages of ~1 KB of real chat text."""
    lines = (SHARED_DATA / "chitchat_byu" / "chitchat_long250.jsonl").read_text().splitlines()
    pieces = [m["content"] for line in lines for m in json.loads(line)["messages"]]
    texts: list[str] = []
    current: list[str] = []
    size = 0
    index = 0
    while len(texts) < min(count, 5000):
        piece = pieces[index % len(pieces)]
        index += 1
        current.append(piece)
        size += len(piece) + 1
        if size >= 1000:
            texts.append("\n".join(current))
            current, size = [], 0
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": texts[i % len(texts)]}
            for i in range(count)]


def per_turn_us(history: int, turns: int = 2000) -> float:
    messages = kilobyte_messages(history + turns)
    window = ContextWindow("gpt-4o", max_tokens=MAX_TOKENS, system="You are a helpful assistant.")
    window.extend(messages[:history])
    started = time.perf_counter()
    for message in messages[history:]:
        window.add(message)
        window.messages()
    return (time.perf_counter() - started) / turns * 1e6


def langchain_per_turn_us(history: int, turns: int = 5) -> tuple[float, int]:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, trim_messages

    encoding = offline_tiktoken().get_encoding("o200k_base")

    def tiktoken_counter(messages: list[BaseMessage]) -> int:
        # The exact counter of LangChain's documentation: 3 per message, role and content, + 3.
        tokens = 3
        for message in messages:
            role = {"human": "user", "ai": "assistant", "system": "system"}[message.type]
            tokens += 3 + len(encoding.encode(role)) + len(encoding.encode(str(message.content)))
        return tokens

    raw = kilobyte_messages(history + turns)
    history_messages: list[Any] = [SystemMessage("You are a helpful assistant.")]
    history_messages += [HumanMessage(m["content"]) if m["role"] == "user" else AIMessage(m["content"])
                         for m in raw[:history]]
    elapsed = 0.0
    kept = 0
    for message in raw[history:]:
        history_messages.append(HumanMessage(message["content"]) if message["role"] == "user"
                                else AIMessage(message["content"]))
        started = time.perf_counter()
        trimmed = trim_messages(history_messages, max_tokens=MAX_TOKENS, token_counter=tiktoken_counter,
                                strategy="last", start_on="human", include_system=True)
        elapsed += time.perf_counter() - started
        kept = len(trimmed)
    return elapsed / turns * 1e6, kept


def main() -> None:
    sizes = [1_000, 10_000, 100_000]
    # Best of five runs of 2,000 turns each, the sizes interleaved so that a noisy moment of the
    # machine does not fall on one size only: the figure is a cost, noise only adds to it.
    runs: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(5):
        for n in sizes:
            runs[n].append(per_turn_us(n))
    ours = {n: min(values) for n, values in runs.items()}
    flatness = max(ours.values()) / min(ours.values())
    ours_2k = min(per_turn_us(2_000) for _ in range(5))
    lang_2k, kept = langchain_per_turn_us(2_000)
    table = [["measure", "ctxwindow", "peer", "ratio"]]
    for n in sizes:
        table.append([f"add + messages() per turn, {n:,} messages of history", f"{ours[n]:.1f} us", "",
                      f"{ours[n] / ours[sizes[0]]:.2f}x of 10^3"])
    table.append(["largest / smallest per-turn cost", f"{flatness:.2f}", "", "target <= 1.5"])
    table.append(["per turn at 2,000 messages vs trim_messages + tiktoken", f"{ours_2k:.1f} us",
                  f"{lang_2k / 1e3:.1f} ms", f"**{lang_2k / ours_2k:,.0f}x** faster"])
    write_results("window", {"per_turn_us": {str(n): v for n, v in ours.items()}, "flatness": flatness,
                             "ours_2k_us": ours_2k, "langchain_2k_us": lang_2k,
                             "langchain_kept": kept, "max_tokens": MAX_TOKENS},
                  table, f"ContextWindow per turn (budget {MAX_TOKENS:,} tokens, ~1 KB messages)")


if __name__ == "__main__":
    main()
