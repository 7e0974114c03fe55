"""Fidelity of compaction on both data halves (tuning: even positions; held-out: odd), and the
cost of standing-instruction detection and of the fidelity gate, each against the same window
without it, measured in the same run.

    python benches/bench_fidelity.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import SHARED_DATA, write_results  # noqa: E402

from ctxwindow import ContextOverflowError, ContextWindow  # noqa: E402
from ctxwindow.messages import from_tau_bench  # noqa: E402
from ctxwindow.strategies import Summarize  # noqa: E402
from tests import fidelity_eval as fe  # noqa: E402

HALVES = {"tuning": fe.TUNING, "held-out": fe.HELD_OUT}


def _replay_seconds(conversations: list[tuple[str, list[dict[str, Any]]]], **settings: Any) -> tuple[float, int]:
    """Seconds to replay every conversation into a fresh 4k window, and the messages added."""
    started = time.perf_counter()
    added = 0
    for system, messages in conversations:
        window = ContextWindow("gpt-4o", max_tokens=4000, system=system, preserve_recent=2,
                               strategies=[Summarize(preserve_recent=4)], **settings)
        try:
            window.extend(messages)
        except ContextOverflowError:
            continue
        added += len(messages)
    return time.perf_counter() - started, added


def costs() -> dict[str, float]:
    """Per-add cost of detection (instructions on vs off, gate off in both) and per-message cost
    of the gate (on vs off, detection on in both), best of 3 replays of 100 tau-bench runs."""
    records = json.loads((SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    conversations = [(m[0]["content"], m[1:]) for m in (from_tau_bench(r) for r in records[:100])]
    users = [m for _, c in conversations for m in c if m["role"] == "user"]

    def best(**settings: Any) -> float:
        rounds = [_replay_seconds(conversations, **settings) for _ in range(3)]
        seconds, added = min(rounds)
        return seconds / added * 1e6

    plain = best(instructions=False, fidelity_gate=False)
    detecting = best(instructions=True, fidelity_gate=False)
    gated = best(instructions=True, fidelity_gate=True)
    started = time.perf_counter()
    from ctxwindow.instructions import detect_instructions
    for _ in range(5):
        for message in users:
            detect_instructions(str(message["content"]))
    per_user = (time.perf_counter() - started) / (5 * len(users)) * 1e6
    return {"add_us_plain": plain, "add_us_detecting": detecting, "add_us_gated": gated,
            "detect_us_per_user_message": per_user}


def main() -> None:
    payload: dict[str, Any] = {}
    rows = [["measure", "tuning half", "held-out half", "target"]]
    splice = {name: fe.splice_survival(SHARED_DATA, which) for name, which in HALVES.items()}
    for kind in splice["tuning"].survival:
        for rounds in fe.ROUNDS:
            cells = []
            for name in HALVES:
                kept, total = splice[name].survival[kind][rounds]
                cells.append(f"{kept}/{total} ({kept / total:.0%})" if total else "-")
            rows.append([f"instruction survival, {kind}, after {rounds}", *cells, ">= 95% (held-out)"])
    payload["instruction_survival"] = {name: {kind: {str(r): v for r, v in per.items()}
                                              for kind, per in result.survival.items()}
                                       for name, result in splice.items()}
    rows.append(["spliced runs left out (protected content overflows)",
                 *[str(splice[name].overflowed) for name in HALVES], "counted"])
    canaries = fe.canary_survival(SHARED_DATA)
    for name, which in HALVES.items():
        survived = [all(v) for key, v in canaries[5].items() if int(key.split(":")[0]) % 2 == which]
        payload.setdefault("canaries_after_5", {})[name] = [sum(survived), len(survived)]
    rows.append(["canaries after 5 rounds", *[f"{a}/{b}" for a, b in payload["canaries_after_5"].values()], "100%"])
    for budget, target in ((2000, "90%"), (4000, "98%")):
        results = {name: fe.tau_ids(SHARED_DATA, budget, which) for name, which in HALVES.items()}
        payload[f"tau_ids_{budget}"] = {name: [r.kept, r.total, r.overflowed] for name, r in results.items()}
        rows.append([f"tau-bench ground-truth ids at {budget // 1000}k",
                     *[f"{r.kept}/{r.total} ({r.rate:.1%}), {r.overflowed} runs overflow" for r in results.values()],
                     f">= {target} (held-out)"])
    compression = {name: fe.summary_compression(SHARED_DATA, which) for name, which in HALVES.items()}
    payload["summary_compression"] = compression
    rows.append(["summary compression (chitchat, 2k)", *[f"{v:.2f}x" for v in compression.values()], ">= 2x"])
    cost = costs()
    payload["costs_us"] = cost
    rows.append(["add, tau-bench replay at 4k, no detection, no gate", f"{cost['add_us_plain']:.1f} us/message", "", ""])
    rows.append(["add with instruction detection", f"{cost['add_us_detecting']:.1f} us/message "
                 f"({cost['add_us_detecting'] / cost['add_us_plain']:.2f}x)", "", ""])
    rows.append(["add with detection and the fidelity gate", f"{cost['add_us_gated']:.1f} us/message "
                 f"({cost['add_us_gated'] / cost['add_us_plain']:.2f}x)", "", ""])
    rows.append(["detection alone, per user message", f"{cost['detect_us_per_user_message']:.1f} us", "", ""])
    write_results("fidelity", payload, rows, "Fidelity of compaction and its cost")


if __name__ == "__main__":
    main()
