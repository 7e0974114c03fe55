"""A short demo on bundled real data: exact token counts per message of a tau-bench airline
trajectory (GPT-4o, tool calls), then a replay through :class:`ctxwindow.TokenHistory` under a
small budget, printing what is evicted and showing that tool calls leave with their results.

Run with ``python -m ctxwindow.demo [--max-tokens N] [--model M]``.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib import resources
from typing import Any

from ctxwindow import TokenHistory, Tokenizer

Message = dict[str, Any]


def load_trajectory() -> list[Message]:
    """The messages of the bundled tau-bench trajectory."""
    data = resources.files("ctxwindow") / "data" / "tau_bench_airline_trajectory.json"
    record = json.loads(data.read_text(encoding="utf-8"))
    messages: list[Message] = record["traj"]
    return messages


def describe(message: Message, width: int = 60) -> str:
    """A one-line summary of a message."""
    if message.get("tool_calls"):
        calls = ", ".join(call["function"]["name"] for call in message["tool_calls"])
        return f"calls {calls}"
    text = message.get("content") or ""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--max-tokens", type=int, default=2500, help="prompt budget")
    parser.add_argument("--low-watermark", type=float, default=0.8,
                        help="fraction of the budget to evict down to")
    args = parser.parse_args(argv)

    tokenizer = Tokenizer.for_model(args.model)
    messages = load_trajectory()
    conversation = messages[1:]

    started = time.perf_counter()
    counts = [tokenizer.count_message(m) for m in messages]
    elapsed_ms = (time.perf_counter() - started) * 1e3
    print(f"tau-bench airline trajectory: {len(messages)} messages, model {args.model} "
          f"({tokenizer.name})")
    print(f"exact tokens per message (counted in {elapsed_ms:.2f} ms):")
    by_role: dict[str, int] = {}
    for index, (message, tokens) in enumerate(zip(messages, counts)):
        by_role[message["role"]] = by_role.get(message["role"], 0) + tokens
        print(f"  {index:3d} {message['role']:<9} {tokens:5d}  {describe(message)}")
    prompt_total = tokenizer.count_messages(messages)
    roles = ", ".join(f"{role} {tokens}" for role, tokens in by_role.items())
    print(f"total prompt: {prompt_total} tokens ({roles}, reply priming 3)")

    overhead = counts[0] + 3  # the system prompt is never evicted; plus the reply priming
    budget = args.max_tokens
    low_watermark = int(budget * args.low_watermark)
    print(f"\nreplay under a budget of {budget} tokens (system prompt {counts[0]} tokens as "
          f"overhead, evicting down to {low_watermark}):")
    history = TokenHistory()
    peak = 0
    evictions = 0
    for index, (message, tokens) in enumerate(zip(conversation, counts[1:]), start=1):
        history.push(message, tokens, starts_group=message["role"] != "tool")
        evicted = history.evict(budget, overhead, low_watermark)
        total = history.total_tokens + overhead
        peak = max(peak, total)
        if evicted:
            evictions += 1
            print(f"  after message {index:3d}: evicted {len(evicted)} messages, "
                  f"now {len(history)} messages, {total} tokens")
            for message in evicted:
                print(f"      - {message['role']:<9} {describe(message, 56)}")
        orphan = history[0]["role"] == "tool" if len(history) else False
        assert not orphan, "eviction split a tool call from its result"
        assert total <= budget, "the budget was exceeded"
    print(f"done: {evictions} evictions, peak {peak}/{budget} tokens, "
          f"{len(history)} messages kept, no tool result separated from its call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
