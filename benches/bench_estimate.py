"""How far the CLI's ``--estimate`` (``HeuristicTokenizer``, 4 characters per token) is from an
exact count, per conversation of the shared data.

Claude's and Gemini's tokenizers are not public and no provider-billed counts are recorded in the
shared data, so the peer here is the exact o200k_base (and cl100k_base) count of the same
messages with the same chat accounting: a measure of how rough a characters-per-token estimate is
on agent and chat text, not of how far it is from what Anthropic or Google bill.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA, write_results  # noqa: E402

from ctxwindow import Tokenizer  # noqa: E402
from ctxwindow.cli import ESTIMATE_CHARS_PER_TOKEN, load_conversation  # noqa: E402
from ctxwindow.tokenizer import HeuristicTokenizer  # noqa: E402


def conversations() -> dict[str, list[list[dict[str, Any]]]]:
    tau = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline.json"
    chitchat = SHARED_DATA / "chitchat_byu" / "chitchat_long250.jsonl"
    return {
        "tau-bench airline (tool-calling agent)": [load_conversation(tau, i)[1] for i in range(200)],
        "SWE-agent trajectories (coding agent)": [load_conversation(p)[1] for p in
                                                  sorted((SHARED_DATA / "swe_agent_trajs").glob("*.traj"))],
        "chitchat (human chat)": [load_conversation(chitchat, i)[1] for i in range(250)],
    }


def main() -> None:
    estimate = HeuristicTokenizer(ESTIMATE_CHARS_PER_TOKEN)
    exact = {name: Tokenizer(name) for name in ("o200k_base", "cl100k_base")}
    payload: dict[str, Any] = {"chars_per_token": ESTIMATE_CHARS_PER_TOKEN, "datasets": {}}
    table = [["data (conversations)", "peer", "estimate / exact, all tokens", "per conversation: min / median / max",
              "conversations under-counted"]]
    for dataset, convs in conversations().items():
        guessed = [estimate.count_messages(c) for c in convs]
        for name, tokenizer in exact.items():
            counted = [tokenizer.count_messages(c) for c in convs]
            ratios = [g / c for g, c in zip(guessed, counted)]
            total = sum(guessed) / sum(counted)
            under = sum(r < 1 for r in ratios) / len(ratios)
            payload["datasets"].setdefault(dataset, {})[name] = {
                "conversations": len(convs), "estimate_tokens": sum(guessed), "exact_tokens": sum(counted),
                "ratio_total": total, "ratio_min": min(ratios), "ratio_median": statistics.median(ratios),
                "ratio_max": max(ratios), "under_counted_share": under}
            table.append([f"{dataset} ({len(convs)})", name, f"{total:.3f}x",
                          f"{min(ratios):.3f}x / {statistics.median(ratios):.3f}x / {max(ratios):.3f}x",
                          f"{under:.0%}"])
    write_results("estimate", payload, table,
                  f"--estimate ({ESTIMATE_CHARS_PER_TOKEN:g} characters per token) against exact counts")


if __name__ == "__main__":
    main()
