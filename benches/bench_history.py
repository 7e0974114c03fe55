"""TokenHistory benchmarks.

1. `evict` of k = 100 entries at n = 10^3, 10^5 and 10^6 entries: the cost must not grow with n
   (target: largest / smallest <= 1.5).
2. push + evict per message from Python, against a reference written with `collections.deque`
   and a running total (the usual pure-Python way).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median, write_results  # noqa: E402

from ctxwindow import TokenHistory  # noqa: E402

K = 100
ROUNDS = 2_000


def evict_cost(n: int) -> float:
    """Median seconds of one evict() removing exactly K entries from a history of n."""
    history = TokenHistory()
    payload = object()
    for _ in range(n):
        history.push(payload, 1)
    samples = []
    for _ in range(ROUNDS):
        budget = history.total_tokens - K
        started = time.perf_counter_ns()
        evicted = history.evict(budget)
        samples.append((time.perf_counter_ns() - started) / 1e9)
        assert len(evicted) == K
        for _ in range(K):
            history.push(payload, 1)
    return median(samples)


class DequeHistory:
    """Reference: deque of (item, tokens, starts_group) with a running total."""

    def __init__(self) -> None:
        self.entries: deque[tuple[object, int, bool]] = deque()
        self.total = 0

    def push(self, item: object, tokens: int, starts_group: bool = True) -> None:
        self.entries.append((item, tokens, starts_group))
        self.total += tokens

    def evict(self, max_tokens: int) -> list[object]:
        evicted: list[object] = []
        while self.entries and self.total > max_tokens:
            item, tokens, _ = self.entries.popleft()
            self.total -= tokens
            evicted.append(item)
            while self.entries and not self.entries[0][2]:
                item, tokens, _ = self.entries.popleft()
                self.total -= tokens
                evicted.append(item)
        return evicted


def push_evict_ns(history: TokenHistory | DequeHistory, messages: int, budget: int) -> float:
    payload = object()
    started = time.perf_counter_ns()
    for i in range(messages):
        history.push(payload, 10 + i % 50, i % 4 != 3)
        history.evict(budget)
    return (time.perf_counter_ns() - started) / messages


def main() -> None:
    sizes = [1_000, 100_000, 1_000_000]
    evict_us = {n: evict_cost(n) * 1e6 for n in sizes}
    flatness = max(evict_us.values()) / min(evict_us.values())
    messages = 200_000
    native = min(push_evict_ns(TokenHistory(), messages, 20_000) for _ in range(3))
    reference = min(push_evict_ns(DequeHistory(), messages, 20_000) for _ in range(3))
    table = [["measure", "value", "ratio"]]
    for n in sizes:
        table.append([f"evict k={K} at n={n:,}", f"{evict_us[n]:.2f} us",
                      f"{evict_us[n] / evict_us[sizes[0]]:.2f}x of n={sizes[0]:,}"])
    table.append(["largest / smallest evict cost", f"{flatness:.2f}", "target <= 1.5"])
    table.append(["push+evict per message, TokenHistory", f"{native:.0f} ns",
                  f"{reference / native:.2f}x faster than deque"])
    table.append(["push+evict per message, deque reference", f"{reference:.0f} ns", "1.00x"])
    write_results(
        "history",
        {"k": K, "evict_us": {str(n): v for n, v in evict_us.items()},
         "evict_flatness": flatness, "push_evict_ns": {"ctxwindow": native, "deque": reference}},
        table,
        "TokenHistory",
    )


if __name__ == "__main__":
    main()
