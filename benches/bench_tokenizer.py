"""Token counting throughput (MB/s of UTF-8) against Python tiktoken on the same texts:
prose (human chats), JSON tool output (tau-bench tool results), code and terminal output
(SWE-agent observations), one text at a time on one thread, and all texts at once on all cores
(`count_many` against the faster of tiktoken's `encode_ordinary_batch` and a plain loop), plus the
worst case "a" * 10^6.

Counts are checked to be identical before anything is timed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA, best_seconds, offline_tiktoken, write_results  # noqa: E402

from ctxwindow import Tokenizer  # noqa: E402


def corpora() -> dict[str, list[str]]:
    chats = [json.loads(line) for line in
             (SHARED_DATA / "chitchat_byu" / "chitchat_long250.jsonl").read_text().splitlines()]
    prose = [m["content"] for chat in chats for m in chat["messages"]]
    tau = json.loads((SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    tool_json = [m["content"] for r in tau for m in r["traj"] if m["role"] == "tool"]
    code: list[str] = []
    for path in sorted((SHARED_DATA / "swe_agent_trajs").glob("*.traj")):
        trajectory = json.loads(path.read_text())
        code.extend(step["observation"] for step in trajectory["trajectory"] if step.get("observation"))
        code.extend(step["action"] for step in trajectory["trajectory"] if step.get("action"))
    return {"prose (chitchat)": prose, "JSON tool results (tau-bench)": tool_json,
            "code + terminal (SWE-agent)": code}


def megabytes(texts: list[str]) -> float:
    return sum(len(t.encode()) for t in texts) / 1e6


def main() -> None:
    tiktoken = offline_tiktoken()
    results: dict[str, Any] = {}
    table = [["encoding", "corpus", "MB", "ctxwindow count MB/s", "tiktoken MB/s",
              "ratio (1 thread)", "count_many MB/s", "tiktoken best MB/s", "ratio (all cores)"]]
    for encoding in ("o200k_base", "cl100k_base"):
        ours = Tokenizer(encoding)
        reference = tiktoken.get_encoding(encoding)
        for name, texts in corpora().items():
            size = megabytes(texts)
            expected = [len(reference.encode_ordinary(t)) for t in texts]
            assert ours.count_many(texts).tolist() == expected, f"count mismatch on {name}"

            def ours_single() -> None:
                for text in texts:
                    ours.count(text)

            def reference_single() -> None:
                for text in texts:
                    len(reference.encode_ordinary(text))

            t_ours = best_seconds(ours_single, repeat=3, min_time=0.5)
            t_ref = best_seconds(reference_single, repeat=3, min_time=0.5)
            t_many = best_seconds(lambda: ours.count_many(texts), repeat=3, min_time=0.5)
            t_batch = best_seconds(lambda: reference.encode_ordinary_batch(texts), repeat=3,
                                   min_time=0.5)
            # The peer of count_many is tiktoken's faster way on these texts: its threaded
            # encode_ordinary_batch, or a plain loop when the batch overhead loses.
            t_peer = min(t_batch, t_ref)
            row = {"megabytes": size, "ours_mb_s": size / t_ours, "tiktoken_mb_s": size / t_ref,
                   "ratio_single": t_ref / t_ours, "count_many_mb_s": size / t_many,
                   "tiktoken_batch_mb_s": size / t_batch, "tiktoken_best_mb_s": size / t_peer,
                   "ratio_batch": t_peer / t_many}
            results[f"{encoding}/{name}"] = row
            table.append([encoding, name, f"{size:.1f}", f"{row['ours_mb_s']:.1f}",
                          f"{row['tiktoken_mb_s']:.1f}", f"**{row['ratio_single']:.2f}x**",
                          f"{row['count_many_mb_s']:.1f}", f"{row['tiktoken_best_mb_s']:.1f}",
                          f"{row['ratio_batch']:.2f}x"])
        worst = "a" * 1_000_000
        assert ours.count(worst) == len(reference.encode_ordinary(worst))
        t_ours = best_seconds(lambda: ours.count(worst), repeat=3, min_time=0.3)
        t_ref = best_seconds(lambda: reference.encode_ordinary(worst), repeat=3, min_time=0.3)
        results[f"{encoding}/worst case"] = {"ours_s": t_ours, "tiktoken_s": t_ref,
                                             "ratio": t_ref / t_ours}
        table.append([encoding, '"a" * 10^6', "1.0", f"{1 / t_ours:.1f}", f"{1 / t_ref:.1f}",
                      f"**{t_ref / t_ours:.2f}x**", "", "", ""])
    write_results("tokenizer", results, table, "Exact token counting vs Python tiktoken "
                  "(identical counts checked first)")


if __name__ == "__main__":
    main()
