"""The fidelity evaluations shared by tests/test_fidelity.py, tests/test_instructions.py and
benches/bench_fidelity.py.

Every data set is split in two halves, by position: the TUNING half (even positions) is the one
the summarizer's rules, the instruction detector and the gate were developed against; the
HELD-OUT half (odd positions) is the one the targets are reported on. Nothing in the library
was written from the held-out half.

- standing instructions: tests/data/standing_instructions.json (written for this project, five
  kinds), spliced into real tau-bench and chitchat conversations at random positions;
- canaries: ../shared/data/conformance_canaries (20 typed canaries of one seeded session);
- tau-bench ground-truth ids: ../shared/data/tau_bench_airline (200 runs).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxwindow import ContextOverflowError, ContextWindow
from ctxwindow.messages import from_tau_bench, text_of
from ctxwindow.strategies import Summarize

HERE = Path(__file__).resolve().parent
TUNING, HELD_OUT = 0, 1
ROUNDS = (1, 3, 5)
Message = dict[str, Any]


def half(items: Sequence[Any], which: int) -> list[Any]:
    """The items at even (TUNING) or odd (HELD_OUT) positions."""
    return [item for index, item in enumerate(items) if index % 2 == which]


def instructions(which: int) -> dict[str, list[str]]:
    """The standing instructions of one half, by kind."""
    data = json.loads((HERE / "data" / "standing_instructions.json").read_text())
    return {kind: half(items, which) for kind, items in data["instructions"].items()}


def negatives(which: int) -> list[str]:
    """Sentences that are not standing instructions (one-off requests, questions, statements)."""
    data = json.loads((HERE / "data" / "standing_instructions.json").read_text())
    return half(data["negatives"], which)


def _normalized(text: str) -> str:
    return " ".join(text.split())


def prompt_text(window: ContextWindow) -> str:
    """Everything the window sends, whitespace-normalized, tool-call arguments included."""
    return _normalized("\n".join(text_of(m) + json.dumps(m.get("tool_calls") or "") for m in window.messages()))


def _conversations(data: Path, which: int) -> list[tuple[str, list[Message]]]:
    """(system prompt, conversation) pairs from tau-bench and chitchat, of one half."""
    records = json.loads((data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    tau = [from_tau_bench(r) for r in half(records, which)[:15]]
    out = [(m[0]["content"], m[1:]) for m in tau if m and m[0]["role"] == "system"]
    lines = (data / "chitchat_byu" / "chitchat_long250.jsonl").read_text().splitlines()
    for line in half(lines, which)[:15]:
        record = json.loads(line)
        chat = [{"role": m["role"], "content": m["content"]} for m in record["messages"][:80] if m["content"].strip()]
        out.append(("You are a friendly conversation partner.", chat))
    return out


@dataclass(frozen=True)
class SpliceResult:
    """Survival per kind after each number of compactions (kind -> rounds -> (kept, total)),
    and the runs left out because protected content overflowed."""

    survival: dict[str, dict[int, tuple[int, int]]]
    overflowed: int

    def rate(self, kind: str, rounds: int) -> float:
        kept, total = self.survival[kind][rounds]
        return kept / total if total else 1.0


def splice_survival(data: Path, which: int, budget: int = 3000, seed: int = 7) -> SpliceResult:
    """Each instruction of the half is spliced into a user message (random position) of a real
    conversation, which is replayed into a window with the default summarizer; after the replay
    the window is compacted 5 times (a few turns between rounds), and the instruction must
    still be in the prompt, verbatim, after 1, 3 and 5 compactions."""
    rng = random.Random(seed)
    conversations = _conversations(data, which)
    survival: dict[str, dict[int, tuple[int, int]]] = {}
    overflowed = 0
    counter = 0
    for kind, texts in instructions(which).items():
        survival[kind] = {r: (0, 0) for r in ROUNDS}
        for text in texts:
            system, conversation = conversations[counter % len(conversations)]
            counter += 1
            users = [i for i, m in enumerate(conversation) if m["role"] == "user" and isinstance(m["content"], str)]
            spliced = [dict(m) for m in conversation]
            position = users[rng.randrange(len(users) // 2 + 1)]  # in the first half of the conversation
            spliced[position]["content"] = spliced[position]["content"].rstrip() + " " + text
            window = ContextWindow("gpt-4o", max_tokens=budget, system=system, preserve_recent=2,
                                   strategies=[Summarize(preserve_recent=4)])
            try:
                window.extend(spliced)
                for round_ in range(1, max(ROUNDS) + 1):
                    window.compact(force=True, target=0.5)
                    for i in range(3):
                        window.add({"role": "user", "content": f"Round {round_}, question {i}: what else?"})
                        window.add({"role": "assistant", "content": f"Round {round_}, answer {i}: nothing else."})
                    if round_ in ROUNDS:
                        kept, total = survival[kind][round_]
                        survival[kind][round_] = (kept + (_normalized(text) in prompt_text(window)), total + 1)
            except ContextOverflowError:
                overflowed += 1
    return SpliceResult(survival, overflowed)


def canary_survival(data: Path, rounds: int = 5) -> dict[int, dict[str, list[bool]]]:
    """The canaries of the seeded session after each of ``rounds`` compactions: canary index ->
    type -> survived (all its required tokens in the prompt)."""
    seeded = json.loads((data / "conformance_canaries" / "seeded_session.json").read_text())
    turns = [{"role": t["role"], "content": t["text"]} for t in seeded["session_turns"]]
    system = next(t["content"] for t in turns if t["role"] == "system")
    window = ContextWindow("gpt-4o", max_tokens=1600, system=system, preserve_recent=2,
                           strategies=[Summarize(preserve_recent=4)])
    window.extend([t for t in turns if t["role"] != "system"])
    out: dict[int, dict[str, list[bool]]] = {}
    for round_ in range(1, rounds + 1):
        window.compact(force=True)
        for i in range(6):
            window.add({"role": "user", "content": f"round {round_} filler question {i}: what next?"})
            window.add({"role": "assistant", "content": f"round {round_} filler answer {i}: continuing."})
        text = prompt_text(window).lower()
        out[round_] = {}
        for index, canary in enumerate(seeded["canaries"]):
            kept = all(token.lower() in text for token in canary["required_tokens"])
            out[round_].setdefault(f"{index}:{canary['type']}", []).append(kept)
    return out


@dataclass(frozen=True)
class IdResult:
    kept: int
    total: int
    overflowed: int

    @property
    def rate(self) -> float:
        return self.kept / self.total if self.total else 1.0


def tau_ids(data: Path, budget: int, which: int) -> IdResult:
    """The ids (values with a digit) of each task's ground-truth actions that appear in the
    conversation, still in the prompt after replaying it with the default summarizer. Runs whose
    protected content alone overflows the budget are left out and counted."""
    records = json.loads((data / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    kept = total = overflowed = 0
    for record in half(records, which):
        messages = from_tau_bench(record)
        ids = {str(v) for action in record["info"]["task"]["actions"] for v in action["kwargs"].values()
               if isinstance(v, str) and re.search(r"\d", v)}
        original = "\n".join(text_of(m) + json.dumps(m.get("tool_calls") or "") for m in messages)
        ids = {i for i in ids if i in original}
        window = ContextWindow("gpt-4o", max_tokens=budget, system=messages[0]["content"],
                               preserve_recent=1, strategies=[Summarize(preserve_recent=2)])
        try:
            window.extend(messages[1:])
        except ContextOverflowError:
            overflowed += 1
            continue
        text = "\n".join(text_of(m) + json.dumps(m.get("tool_calls") or "") for m in window.messages())
        kept += sum(1 for i in ids if i in text)
        total += len(ids)
    return IdResult(kept, total, overflowed)


def summary_compression(data: Path, which: int) -> float:
    """Tokens replaced over tokens of the summaries written, over the Summarize compactions of
    chitchat conversations of one half replayed into 2k windows."""
    lines = (data / "chitchat_byu" / "chitchat_long250.jsonl").read_text().splitlines()
    replaced = written = 0
    for line in half(lines, which)[:20]:
        record = json.loads(line)
        chat = [{"role": m["role"], "content": m["content"]} for m in record["messages"] if m["content"].strip()]
        results: list[Any] = []
        window = ContextWindow("gpt-4o", max_tokens=2000, system="You are a friendly conversation partner.",
                               preserve_recent=2, strategies=[Summarize(preserve_recent=4)],
                               on_compact=results.append)
        window.extend(chat)
        for result in results:
            for report in result.reports:
                if report.name == "summarize" and report.evicted:
                    replaced += sum(window.tokenizer.count_message(m) for m in report.evicted)
                    written += max(report.tokens_after - (report.tokens_before - sum(
                        window.tokenizer.count_message(m) for m in report.evicted)), 1)
    return replaced / written if written else float("inf")
