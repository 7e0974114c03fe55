"""How far estimates are from the truth.

1. Claude's estimate (``Tokenizer.for_model("claude-...")``, an ``EstimateTokenizer``) against what
   Anthropic billed for recorded Messages API calls (``tests/data/anthropic_usage``), before and
   after the window's ``record_usage`` calibration, beside two peers: the exact ``cl100k_base``
   count unscaled (what a user of an OpenAI tokenizer gets) and the 4-characters-per-token rule.
   The profile is fitted on the tuning half of the recordings (``tests/estimate_eval.py``); both
   halves are reported, the held-out one is the measure.
2. The CLI's ``--estimate`` (``HeuristicTokenizer``, 4 characters per token) against an exact count,
   per conversation of the shared data: how rough a characters-per-token rule is on agent and
   chat text.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import SHARED_DATA, write_results  # noqa: E402

from ctxwindow import Tokenizer  # noqa: E402
from ctxwindow.cli import ESTIMATE_CHARS_PER_TOKEN, load_conversation  # noqa: E402
from ctxwindow.tokenizer import EstimateTokenizer, HeuristicTokenizer  # noqa: E402
from tests import estimate_eval as ee  # noqa: E402


def conversations() -> dict[str, list[list[dict[str, Any]]]]:
    tau = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline.json"
    chitchat = SHARED_DATA / "chitchat_byu" / "chitchat_long250.jsonl"
    return {
        "tau-bench airline (tool-calling agent)": [load_conversation(tau, i)[1] for i in range(200)],
        "SWE-agent trajectories (coding agent)": [load_conversation(p)[1] for p in
                                                  sorted((SHARED_DATA / "swe_agent_trajs").glob("*.traj"))],
        "chitchat (human chat)": [load_conversation(chitchat, i)[1] for i in range(250)],
    }


def _errors(pairs: list[tuple[int, int]]) -> dict[str, float]:
    """Summary of ``estimate / billed - 1`` over ``(estimate, billed)`` pairs."""
    errors = [e / b - 1 for e, b in pairs]
    return {"calls": len(errors), "median_abs": statistics.median(abs(e) for e in errors),
            "min": min(errors), "max": max(errors), "under": sum(e < 0 for e in errors) / len(errors),
            "total": sum(e for e, _ in pairs) / sum(b for _, b in pairs) - 1}


def _row(half: str, method: str, summary: dict[str, float]) -> list[str]:
    return [half, method, str(int(summary["calls"])), f"{summary['total']:+.1%}", f"{summary['median_abs']:.1%}",
            f"{summary['min']:+.1%} / {summary['max']:+.1%}", f"{summary['under']:.0%}"]


def claude_against_billing() -> None:
    """Table 1: Claude's estimate against Anthropic's billed prompt tokens."""
    tuning, held_out = ee.halves(ee.load())
    claude = EstimateTokenizer("claude-sonnet-4-5")
    fit = ee.fit(tuning, claude.encoding)
    exact = Tokenizer(claude.encoding)
    chars = HeuristicTokenizer(ESTIMATE_CHARS_PER_TOKEN)
    payload: dict[str, Any] = {"fit_on_tuning_half": fit.__dict__, "profile": {
        "ratio": claude.ratio, "tool_overhead": claude.tool_overhead, "margin": claude.margin}, "halves": {}}
    table = [["half", "method", "calls", "all tokens", "median |error|", "min / max error", "calls under-counted"]]
    for half, calls in (("tuning", tuning), ("held-out", held_out)):
        methods = {
            "claude-estimate, before calibration": [(ee.estimate(c, claude), c.billed) for c in calls],
            f"exact {exact.name}, unscaled (peer)": [(ee.estimate(c, exact), c.billed) for c in calls],
            f"{ESTIMATE_CHARS_PER_TOKEN:g} chars/token (peer)": [(ee.estimate(c, chars), c.billed) for c in calls],
        }
        replay = ee.calibrated(calls)
        seen: set[str] = set()
        later = []  # calls after the first of their session: the window has had a report to learn from
        for call, before, after in replay:
            if call.source in seen:
                later.append((call, before, after))
            seen.add(call.source)
        methods["claude-estimate, later calls of a session: before calibration"] = \
            [(b, c.billed) for c, b, _ in later]
        methods["claude-estimate, later calls of a session: calibrated by the earlier ones"] = \
            [(a, c.billed) for c, _, a in later]
        for method, pairs in methods.items():
            summary = _errors(pairs)
            payload["halves"].setdefault(half, {})[method] = summary
            table.append(_row(half, method, summary))
    write_results("estimate_claude", payload, table,
                  "Claude's estimate against the prompt tokens Anthropic billed (recorded Messages API calls; "
                  "error = estimate / billed - 1; the profile is fitted on the tuning half)")


def main() -> None:
    claude_against_billing()
    characters_per_token()


def characters_per_token() -> None:
    """Table 2: ``--estimate`` against exact counts on the shared data."""
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
