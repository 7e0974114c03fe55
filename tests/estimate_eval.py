"""Claude's token estimate against what Anthropic billed, shared by tests/test_estimate.py and
benches/bench_estimate.py.

The calls are recorded Messages API requests with the usage Anthropic returned
(``tests/data/anthropic_usage/``; source and license in its NOTES.md). They are split into two
halves by recording (every call of one recorded session lands in the same half): the claude
profile of ``ctxwindow-core`` (``estimate.rs``: ratio, tool overhead, margin) is fitted on the
tuning half by :func:`fit`, and the errors are reported on the held-out half.
"""

from __future__ import annotations

import json
import math
import statistics
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxwindow import ContextWindow, Tokenizer
from ctxwindow.messages import from_anthropic
from ctxwindow.tools import count_tools, tools_json

DATA = Path(__file__).resolve().parent / "data" / "anthropic_usage" / "anthropic_usage.jsonl"

#: The share of tuning calls the margin must keep from being under-counted.
COVERED = 0.95


@dataclass(frozen=True)
class Call:
    """One recorded request and what Anthropic billed for its prompt."""

    source: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    billed: int


def _system(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return system
    return "\n".join(str(block.get("text", "")) for block in system if block.get("type") == "text")


def load() -> list[Call]:
    """Every recorded call, in recording order. ``billed`` is the whole prompt: input tokens plus
    the tokens read from and written to the prompt cache."""
    calls = []
    for line in DATA.read_text().splitlines():
        record = json.loads(line)
        messages = from_anthropic(record["messages"], system=_system(record["system"]))
        billed = (record["input_tokens"] + record["cache_read_input_tokens"]
                  + record["cache_creation_input_tokens"])
        calls.append(Call(record["source"], record["model"], messages, record["tools"] or None, billed))
    return calls


def halves(calls: list[Call]) -> tuple[list[Call], list[Call]]:
    """``(tuning, held_out)``: a recording's calls go to the half the CRC-32 of its name picks."""
    tuning = [c for c in calls if zlib.crc32(c.source.encode()) % 2 == 0]
    held_out = [c for c in calls if zlib.crc32(c.source.encode()) % 2 == 1]
    return tuning, held_out


def base_counts(call: Call, tokenizer: Tokenizer) -> tuple[int, int]:
    """``(messages, tools)``: the exact counts the estimate scales, the tools as the estimate
    counts them (their JSON)."""
    tools = tokenizer.count(tools_json(call.tools)) if call.tools else 0
    return tokenizer.count_messages(call.messages), tools


@dataclass(frozen=True)
class Fit:
    ratio: float
    tool_overhead: int
    margin: float


def fit(tuning: list[Call], encoding: str) -> Fit:
    """The claude profile from the tuning half, counting with ``encoding`` (the profile's base):
    ``ratio`` is billed over counted tokens, summed
    over the calls without tools; ``tool_overhead`` the median of what calls with tools were
    billed beyond their scaled count (the hidden tool-use system prompt); ``margin`` the
    smallest (in steps of 0.01) that keeps :data:`COVERED` of the calls from being under-counted."""
    tokenizer = Tokenizer(encoding)
    counted = [(c, sum(base_counts(c, tokenizer))) for c in tuning]
    plain = [(c, n) for c, n in counted if not c.tools]
    ratio = round(sum(c.billed for c, _ in plain) / sum(n for _, n in plain), 2)
    residuals = [c.billed - ratio * n for c, n in counted if c.tools]
    overhead = round(statistics.median(residuals)) if residuals else 0
    margin = 0.0
    while True:
        covered = sum(math.ceil(n * ratio * (1 + margin)) + (overhead if c.tools else 0) >= c.billed
                      for c, n in counted)
        if covered >= COVERED * len(counted):
            return Fit(ratio, overhead, round(margin, 2))
        margin += 0.01


def estimate(call: Call, tokenizer: Any) -> int:
    """What a window counting with ``tokenizer`` counts for the call's prompt."""
    return int(tokenizer.count_messages(call.messages)) + count_tools(call.tools, tokenizer)


def calibrated(calls: list[Call]) -> list[tuple[Call, int, int]]:
    """``(call, estimate, calibrated estimate)`` for each call, replayed through one window per
    recorded session that reports each call's billed count with ``record_usage`` after it: what
    the window keeps within the budget before the call, uncalibrated and calibrated by the
    session's earlier calls."""
    windows: dict[str, ContextWindow] = {}
    out = []
    for call in calls:
        window = windows.get(call.source)
        if window is None:
            window = windows[call.source] = ContextWindow(call.model, max_tokens=200_000)
        window.set_tools(call.tools)
        window.sync(call.messages)
        usage = window.usage
        out.append((call, usage.total, math.ceil(usage.total * usage.calibration)))
        window.record_usage(call.billed)
    return out
