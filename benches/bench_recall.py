"""Recall on LongMemEval: is the evidence in the prompt when the question is asked?

Each of the 64 questions' histories (41-55 sessions, about 115k tokens) is replayed into windows
of 4k, 8k and 16k tokens; then the question is added as the newest user message and we look at
``messages()``:

- **turn presence**: the share of questions all of whose evidence turns (``has_answer``) are in
  the prompt verbatim (as a conversation message or inside the recall block);
- **session presence**: the share of questions each of whose answer sessions has at least one
  turn in the prompt;
- **precision**: the share of the recall block's tokens that belong to evidence turns (and,
  looser, to answer sessions);
- abstention questions (the answer was never said): how many tokens recall injects.

Configurations: FIFO (no strategies), FIFO + recall, and at 8k: the cascade (SemanticMerge, then
the offline extractive Summarize) + recall, BM25 alone (no fusion), and SQLite's FTS5 as the
lexical search (``lexical="fts5"``).
Recall's ``max_tokens`` is a quarter of the prompt budget. The settings of recall (``min_overlap``,
``k``, the block share, fusion) were chosen on the even-numbered questions; the figures that count are
those of the odd-numbered ones (``held-out``), shown next to all 64. The oracle file (evidence
sessions only) is the control: a window large enough for it keeps 100%.

Second part: the cost of recall per user message at 10^3, 10^4 and 10^5 archived messages
(median and p99), and of the same turn without recall.

    python benches/bench_recall.py            # everything (~10 min)
    python benches/bench_recall.py --quick    # 16 questions, 8k only
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from _common import RESULTS, SHARED_DATA, machine, write_results  # noqa: E402

from ctxwindow import ContextOverflowError, ContextWindow, Recall, Tokenizer  # noqa: E402
from ctxwindow.checkpoint import SQLiteCheckpointStore  # noqa: E402
from ctxwindow.strategies import SemanticMerge, Summarize  # noqa: E402
from ctxwindow.recall import RECALL_HEADER  # noqa: E402

DATA = SHARED_DATA / "longmemeval"
SIZES = (4_000, 8_000, 16_000)
RECALL_SHARE = 0.25
TITLE = "Recall on LongMemEval (64 questions, ~115k-token histories)"
CONFIGS = ("fifo", "fifo+recall", "cascade+recall", "fifo+recall-bm25", "fifo+recall-fts5")
#: Configurations measured at 8k only (the relevance ablations, and the cascade, which is slower).
ABLATIONS = ("cascade+recall", "fifo+recall-bm25", "fifo+recall-fts5")


def load(name: str) -> list[dict[str, Any]]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as handle:
        data: list[dict[str, Any]] = json.load(handle)
    return data


def kind(question: dict[str, Any]) -> str:
    return "abstention" if str(question["question_id"]).endswith("_abs") else str(question["question_type"])


def make_window(config: str, size: int, **recall_settings: Any) -> ContextWindow:
    budget = size - 500
    recall = None
    if "recall" in config:
        if config.endswith("bm25"):  # ablation: the lexical rank alone
            recall_settings = {**recall_settings, "fusion": False}
        if config.endswith("fts5"):  # the archive in a SQLite store, searched with FTS5
            directory = tempfile.mkdtemp(prefix="ctxwindow-recall-")
            recall_settings = {**recall_settings, "store": SQLiteCheckpointStore(Path(directory) / "s.db"),
                               "lexical": "fts5"}
        recall = Recall(max_tokens=int(budget * RECALL_SHARE), **recall_settings)
    # The cascade: near-duplicate merging, then the offline extractive summary (originals archived,
    # so recall can bring them back).
    strategies: list[Any] = [] if config.startswith("fifo") else [SemanticMerge(), Summarize()]
    return ContextWindow("gpt-4o", max_tokens=size, reserve_output=500, strategies=strategies, recall=recall,
                         preserve_recent=2,
                         instructions=False, fidelity_gate=config.startswith("fifo") is False)


def evaluate(question: dict[str, Any], window: ContextWindow) -> dict[str, Any]:
    """Replays the history, asks the question, and measures presence and precision."""
    sessions = question["haystack_sessions"]
    refused = 0
    for session in sessions:
        for turn in session:
            try:
                window.add({"role": turn["role"], "content": turn["content"]})
            except ContextOverflowError:  # one message larger than the window: left out, as an agent must
                refused += 1
    window.add({"role": "user", "content": question["question"]})
    messages = window.messages()
    conversation = {m["content"] for m in messages if m["role"] != "system"}
    block = next((m["content"] for m in messages if m["role"] == "system"
                  and str(m["content"]).startswith(RECALL_HEADER)), "")

    def present(content: str) -> bool:
        return content in conversation or (bool(block) and content in block)

    answer_sessions = set()
    for index, session in enumerate(sessions):
        if any(t.get("has_answer") for t in session) or question["haystack_session_ids"][index] in set(
                question["answer_session_ids"]):
            answer_sessions.add(index)
    evidence = [t["content"] for s in sessions for t in s if t.get("has_answer")]
    turns_ok = all(present(c) for c in evidence) if evidence else None
    sessions_ok = all(any(present(t["content"]) for t in sessions[i]) for i in answer_sessions) \
        if answer_sessions else None
    block_tokens = window.usage.by_component["memory_injection"]
    evidence_tokens = session_tokens = 0
    if block:
        count = window.tokenizer.count
        evidence_tokens = sum(count(c) for c in set(evidence) if c in block)
        session_tokens = sum(count(t["content"]) for i in answer_sessions for t in sessions[i]
                             if t["content"] in block)
    return {"turns": turns_ok, "sessions": sessions_ok, "block_tokens": block_tokens,
            "evidence_tokens": evidence_tokens, "session_tokens": session_tokens,
            "within_budget": window.usage.total <= window.usage.budget, "refused": refused}


def summarize(rows: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for k, row in rows:
        by_kind[k].append(row)
        by_kind["overall"].append(row)

    def share(values: list[bool | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    out: dict[str, Any] = {}
    for k, items in sorted(by_kind.items()):
        answered = [r for r in items]
        injected = sum(r["block_tokens"] for r in answered)
        out[k] = {
            "questions": len(items),
            "turns": share([r["turns"] for r in items]),
            "sessions": share([r["sessions"] for r in items]),
            "precision_turns": sum(r["evidence_tokens"] for r in answered) / injected if injected else None,
            "precision_sessions": sum(r["session_tokens"] for r in answered) / injected if injected else None,
            "injected_tokens_mean": injected / len(items),
            "within_budget": all(r["within_budget"] for r in items),
            "refused_messages": sum(r["refused"] for r in items),
        }
    return out


def presence(questions: list[dict[str, Any]], sizes: tuple[int, ...], configs: tuple[str, ...],
             recall_settings: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for size in sizes:
        for config in configs:
            if config in ABLATIONS and size != 8_000:
                continue
            started = time.perf_counter()
            rows = {"all": [], "held_out": [], "tuning": []}  # type: dict[str, list[tuple[str, dict[str, Any]]]]
            for position, question in enumerate(questions):
                row = evaluate(question, make_window(config, size, **(recall_settings if "recall" in config else {})))
                rows["all"].append((kind(question), row))
                rows["held_out" if position % 2 else "tuning"].append((kind(question), row))
            results[f"{size}/{config}"] = {part: summarize(r) for part, r in rows.items()}
            overall = results[f"{size}/{config}"]["all"]["overall"]
            log(f"{size:>6} {config:<16} turns {overall['turns']:.1%} sessions {overall['sessions']:.1%} "
                f"({time.perf_counter() - started:.0f} s)")
    return results


def oracle_control(log: Callable[[str], None]) -> dict[str, Any]:
    questions = load("longmemeval_oracle_subset.json.gz")
    rows = [(kind(q), evaluate(q, make_window("fifo", 64_000))) for q in questions]
    result: dict[str, Any] = summarize(rows)["overall"]
    log(f"oracle control at 64k, FIFO: turns {result['turns']:.1%} sessions {result['sessions']:.1%}")
    return result


def cost(log: Callable[[str], None]) -> dict[str, Any]:
    """Per user message: the window's add with and without recall, at 10^3..10^5 archived, with
    the archive in memory, in a SQLite store (native BM25 either way), and searched with FTS5."""
    questions = load("longmemeval_s_subset.json.gz")
    turns = [{"role": t["role"], "content": t["content"]} for q in questions for s in q["haystack_sessions"] for t in s]
    # Every query new (a cache of per-group work would flatter repeated ones): the questions, then
    # the histories' short user messages.
    queries = [q["question"] for q in questions] + [t["content"] for t in turns
                                                   if t["role"] == "user" and len(t["content"]) < 400]
    out: dict[str, Any] = {}
    for backend in ("memory", "sqlite", "sqlite-fts5"):
        for archived in (1_000, 10_000, 100_000):
            if backend == "sqlite-fts5" and archived > 10_000:
                continue  # too slow to be an option at this size (see 10^4)
            store = SQLiteCheckpointStore(Path(tempfile.mkdtemp(prefix="ctxwindow-recall-")) / "s.db") \
                if backend.startswith("sqlite") else None
            recall = Recall(max_tokens=1_875, store=store, lexical="fts5" if backend.endswith("fts5") else "native")
            # Distinct groups: the history's turns, repeated with a number where there are fewer.
            groups = [([turns[i % len(turns)] | {"content": f"{turns[i % len(turns)]['content']} #{i}"}], i, i)
                      for i in range(archived)]
            # As a window archives what it evicts: block sections counted on the way in.
            recall.ingest(groups, Tokenizer.for_model("gpt-4o").count_many)
            window = ContextWindow("gpt-4o", max_tokens=8_000, reserve_output=500, strategies=[], recall=recall,
                                   instructions=False)
            plain = ContextWindow("gpt-4o", max_tokens=8_000, reserve_output=500, strategies=[], instructions=False)
            timings: dict[str, list[float]] = {"recall": [], "plain": []}
            for round_ in range(400):
                query = queries[round_]
                for name, target in (("recall", window), ("plain", plain)):
                    started = time.perf_counter()
                    target.add({"role": "user", "content": query})
                    timings[name].append(time.perf_counter() - started)
                    target.add({"role": "assistant", "content": "ok"})
            row: dict[str, Any] = {}
            for name, values in timings.items():
                values.sort()
                row[name] = {"median_ms": statistics.median(values) * 1e3,
                             "p99_ms": values[int(0.99 * len(values))] * 1e3}
            out[f"{backend}/{archived}"] = row
            log(f"{backend:>6} {archived:>7} archived: add with recall median {row['recall']['median_ms']:.3f} ms "
                f"p99 {row['recall']['p99_ms']:.3f} ms; without {row['plain']['median_ms']:.3f} ms")
    return out


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def table(report: dict[str, Any]) -> list[list[str]]:
    rows = [["measure", "all 64 questions", "held-out 32 (odd)", "note"]]
    presence_ = report["presence"]
    for key, parts in presence_.items():
        size, config = key.split("/")
        every, held = parts["all"]["overall"], parts["held_out"]["overall"]
        fifo = presence_.get(f"{size}/fifo")
        note = ""
        if fifo and config != "fifo" and fifo["held_out"]["overall"]["turns"]:
            note = f"{held['turns'] / fifo['held_out']['overall']['turns']:.1f}x FIFO (held-out)"
        rows.append([f"{int(size) // 1000}k {config}: evidence turns / sessions present",
                     f"{percent(every['turns'])} / {percent(every['sessions'])}",
                     f"{percent(held['turns'])} / {percent(held['sessions'])}", note])
        if config != "fifo":
            rows.append([f"{int(size) // 1000}k {config}: precision (evidence turns / answer sessions)",
                         f"{percent(every['precision_turns'])} / {percent(every['precision_sessions'])}",
                         f"{percent(held['precision_turns'])} / {percent(held['precision_sessions'])}",
                         f"{every['injected_tokens_mean']:.0f} tokens injected per question"])
    for config in ("fifo", "fifo+recall"):
        parts = presence_.get(f"8000/{config}")
        if not parts:
            continue
        for kind_, every in parts["all"].items():
            if kind_ == "overall":
                continue
            held = parts["held_out"].get(kind_, {})
            extra = f"{every['injected_tokens_mean']:.0f} tokens injected" if kind_ == "abstention" else ""
            rows.append([f"8k {config}, {kind_} ({every['questions']}): turns / sessions",
                         f"{percent(every['turns'])} / {percent(every['sessions'])}",
                         f"{percent(held.get('turns'))} / {percent(held.get('sessions'))}", extra])
    if "oracle" in report:
        oracle = report["oracle"]
        rows.append(["oracle histories (control), 64k FIFO: turns / sessions",
                     f"{percent(oracle['turns'])} / {percent(oracle['sessions'])}", "", "must be 100%"])
    for key, row in report.get("cost", {}).items():
        backend, archived = key.split("/")
        rows.append([f"add a user message, {int(archived):,} archived ({backend}): with recall (median / p99)",
                     f"{row['recall']['median_ms']:.3f} / {row['recall']['p99_ms']:.3f} ms", "",
                     f"without recall {row['plain']['median_ms']:.3f} / {row['plain']['p99_ms']:.3f} ms"])
    return rows


def main() -> None:
    report: dict[str, Any]
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-cost", action="store_true")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--part", choices=("all", "tuning", "held_out"), default="all")
    parser.add_argument("--cost-only", action="store_true",
                        help="measure the cost again, keeping the presence figures of benches/results/recall.json")
    args = parser.parse_args()

    def log(line: str) -> None:
        print(line, flush=True)

    questions = load("longmemeval_s_subset.json.gz")
    if args.part != "all":
        questions = [q for i, q in enumerate(questions) if (i % 2 == 1) == (args.part == "held_out")]
    if args.quick:
        questions = questions[:16]
    sizes = (8_000,) if args.quick else SIZES
    configs = tuple(args.configs.split(","))
    log(f"machine: {machine()}")
    if args.cost_only:
        report = json.loads((RESULTS / "recall.json").read_text())
        report.pop("machine", None)
        report["cost"] = cost(log)
        write_results("recall", report, table(report), TITLE)
        return
    report = {"recall_share": RECALL_SHARE, "presence": presence(questions, sizes, configs, {}, log)}
    if not args.quick and args.part == "all":
        report["oracle"] = oracle_control(log)
        if not args.no_cost:
            report["cost"] = cost(log)
        write_results("recall", report, table(report), TITLE)


if __name__ == "__main__":
    main()
