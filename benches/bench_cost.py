"""What the replays cost with the provider's prompt cache counted: the cache-aware schedule
(``cache="auto"``) against the cache-naive manager (trim to fit before every call), the
watermark alone (``cache="off"``, compaction at 80% down to 60%) and the unmanaged prompt, over
every tau-bench, SWE-agent and chitchat replay in the shared data, at 8k, 16k and 32k budgets,
priced as GPT-4o (OpenAI's cache rules: 50% discount, 128-token steps) and as Claude Sonnet 4.5
(Anthropic's: 90% discount, 25% write surcharge, message boundaries).

    python benches/bench_cost.py [--limit N] [--workers N]

A "long" replay is one whose unmanaged prompt exceeds the budget at some call (management is
needed); the targets are: cache-aware at least 30% cheaper than cache-naive, and cheaper than
unmanaged on every long replay; the budget holds on every call.

Whether 30% can be reached at all is checked against a floor: the least any manager could pay
on the replay (``ctxwindow.costreport.cost_lower_bound``: every call sends at least the system
blocks and the messages new since the previous call, those uncached; the rest at best from
the cache; the reply the same for all). Floors: for any manager; for the managers that keep,
on every call, at least the share of the context the budget affords that the aware schedule
kept at its lowest on that replay; the same with the cache-naive manager's share; and, on the
long replays, both again for managers that send a suffix of the conversation
(``suffix_lower_bound``, as the managers compared here do). Written to cost_floor.md/json:
each floor with the largest saving against cache-naive a manager in that set could make
(below 30%: no manager in the set meets the target), and the part of it the aware schedule
makes. A run cheaper than a floor that applies to it would be a bug in the floor: the script
lists such runs (there must be none).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from _common import SHARED_DATA, write_results  # noqa: E402

from ctxwindow.cli import load_conversation  # noqa: E402
from ctxwindow.cost import ANTHROPIC, OPENAI, PRICES, CacheRules, Prices  # noqa: E402
from ctxwindow.costreport import CostComparison, compare_costs  # noqa: E402

BUDGETS = (8_000, 16_000, 32_000)
PRICINGS: dict[str, tuple[str, CacheRules]] = {"gpt-4o": ("gpt-4o", OPENAI),
                                               "claude-sonnet-4-5": ("claude-sonnet-4-5", ANTHROPIC)}
VARIANTS = ("managed", "watermark", "cache_naive", "unmanaged")
MANAGERS = ("managed", "watermark", "cache_naive")
FLOORS = ("floor", "floor_aware_retention", "floor_naive_retention")
SUFFIX_FLOORS = ("suffix_floor_aware_retention", "suffix_floor_naive_retention")
FLOOR_NAMES = {"floor": "any manager", "floor_aware_retention": "keeping >= aware's least share",
               "floor_naive_retention": "keeping >= naive's least share",
               "suffix_floor_aware_retention": "suffix, keeping >= aware's least share",
               "suffix_floor_naive_retention": "suffix, keeping >= naive's least share"}


def _sources(limit: int | None) -> list[tuple[str, str, int]]:
    """(dataset, file, index) of every replay."""
    import json

    tau = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline.json"
    chat = SHARED_DATA / "chitchat_byu" / "chitchat_long250.jsonl"
    swe = sorted((SHARED_DATA / "swe_agent_trajs").glob("*.traj"))
    tau_count = len(json.loads(tau.read_text()))
    chat_count = sum(1 for line in chat.read_text().splitlines() if line.strip())
    out = [("tau-bench", str(tau), i) for i in range(tau_count)[:limit]]
    out += [("swe-agent", str(p), 0) for p in swe[:limit]]
    out += [("chitchat", str(chat), i) for i in range(chat_count)[:limit]]
    return out


def _one(source: tuple[str, str, int]) -> list[dict[str, Any]]:
    dataset, path, index = source
    _, messages = load_conversation(path, index)
    rows = []
    for budget in BUDGETS:
        for pricing, (price_model, rules) in PRICINGS.items():
            row: dict[str, Any] = {"dataset": dataset, "file": Path(path).name, "index": index, "budget": budget,
                                   "pricing": pricing}
            comparison = compare_costs(messages, "gpt-4o", budget, PRICES[price_model], rules,
                                       variants={"watermark": {"cache": "off"}})
            if comparison.overflows:  # protected content alone exceeds the budget: not comparable
                row["overflow"] = next(iter(comparison.overflows.values()))
                rows.append(row)
                continue
            summary = comparison.summary()
            unmanaged_peak = max((c.prompt_tokens for c in comparison.runs["unmanaged"].calls), default=0)
            row.update({name: summary[name] for name in VARIANTS})
            prices = PRICES[price_model]
            retention = {name: comparison.retention(name, budget) for name in MANAGERS}
            row["retention"] = retention
            row["long"] = unmanaged_peak > budget
            row["suffix_shaped"] = {name: comparison.suffix_shaped[name] for name in MANAGERS}
            row.update(_floors(comparison, summary, retention, prices, rules, budget, row["long"]))
            row["calls"] = len(comparison.runs["managed"].calls)
            rows.append(row)
    return rows


def _floors(comparison: CostComparison, summary: dict[str, Any], retention: dict[str, float], prices: Prices,
            rules: CacheRules, budget: int, long: bool) -> dict[str, Any]:
    """The floors of one replay (USD) and the runs found below a floor that applies to them
    (there must be none). Per call (``cost_lower_bound``): for any manager; for those keeping at
    least the aware schedule's least share of the affordable context; the same with the
    cache-naive manager's. On long replays also ``suffix_lower_bound`` (managers that send a
    suffix of the conversation) at both shares."""
    out: dict[str, Any] = {"floor": comparison.lower_bound(prices, rules)}
    below = [name for name in VARIANTS if summary[name]["usd"] < out["floor"] * (1 - 1e-9)]
    for keeper, suffix in (("managed", "aware"), ("cache_naive", "naive")):
        kind = f"floor_{suffix}_retention"
        out[kind] = comparison.lower_bound(prices, rules, keep=retention[keeper], budget=budget)
        below += [f"{name} under {kind}" for name in MANAGERS if retention[name] >= retention[keeper]
                  and summary[name]["usd"] < out[kind] * (1 - 1e-9)]
        if not long:
            continue
        kind = f"suffix_floor_{suffix}_retention"
        out[kind] = comparison.suffix_lower_bound(prices, rules, budget=budget, keep=retention[keeper])
        below += [f"{name} under {kind}" for name in MANAGERS if retention[name] >= retention[keeper]
                  and comparison.suffix_shaped[name] and summary[name]["usd"] < out[kind] * (1 - 1e-9)]
    out["floor_violations"] = below
    return out


def _pct(saving: float) -> str:
    return f"{saving:+.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, help="replays per dataset (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sources = _sources(args.limit)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for result in pool.map(_one, sources, chunksize=4):
            rows.extend(result)
    seconds = time.perf_counter() - started
    table = [["data", "budget", "priced as", "replays (long)", "cached share aware / watermark / naive / unmanaged",
              "USD aware", "USD watermark", "USD naive", "USD unmanaged", "aware vs naive (all)",
              "aware vs naive (long)", "watermark vs naive (long)", "aware vs unmanaged (long)",
              "long replays where aware < unmanaged", "budget held"]]
    floor_table = [["data", "budget", "priced as", "long replays (suffix-shaped aware / naive)", "USD naive",
                    "USD aware (vs naive)", *(f"floor: {FLOOR_NAMES[kind]}" for kind in FLOORS + SUFFIX_FLOORS),
                    "aware's share of the largest saving: any / aware's share / suffix at aware's share"]]
    groups: dict[str, Any] = {}
    misses: list[dict[str, Any]] = []
    for dataset in ("tau-bench", "swe-agent", "chitchat"):
        for budget in BUDGETS:
            for pricing in PRICINGS:
                group = [r for r in rows if r["dataset"] == dataset and r["budget"] == budget
                         and r["pricing"] == pricing and "overflow" not in r]
                overflows = sum(1 for r in rows if r["dataset"] == dataset and r["budget"] == budget
                                and r["pricing"] == pricing and "overflow" in r)
                if not group:
                    continue
                usd = {v: sum(r[v]["usd"] for r in group) for v in VARIANTS}
                share = {v: (sum(r[v]["cached_tokens"] for r in group) / max(sum(r[v]["input_tokens"] for r in group), 1))
                         for v in VARIANTS}
                long = [r for r in group if r["long"]]
                long_usd = {v: sum(r[v]["usd"] for r in long) for v in VARIANTS}
                wins = sum(1 for r in long if r["managed"]["usd"] < r["unmanaged"]["usd"])
                for r in long:
                    if r["managed"]["usd"] >= r["unmanaged"]["usd"]:
                        misses.append({k: r[k] for k in ("dataset", "file", "index", "budget", "pricing")}
                                      | {"aware": r["managed"]["usd"], "unmanaged": r["unmanaged"]["usd"]})
                held = all(r["managed"]["budget_ok"] and r["cache_naive"]["budget_ok"] and r["watermark"]["budget_ok"]
                           for r in group)
                floor = {kind: sum(r[kind] for r in group) for kind in FLOORS}
                long_floor = {kind: sum(r[kind] for r in long) for kind in FLOORS + SUFFIX_FLOORS}
                best = {kind: 1 - long_floor[kind] / long_usd["cache_naive"] if long else 0.0
                        for kind in FLOORS + SUFFIX_FLOORS}
                aware_saving = 1 - long_usd["managed"] / long_usd["cache_naive"] if long else 0.0
                captured = {kind: aware_saving / best[kind] if best[kind] > 0 else 0.0 for kind in FLOORS + SUFFIX_FLOORS}
                shaped = {name: sum(1 for r in long if r["suffix_shaped"][name]) for name in MANAGERS}
                key = f"{dataset}/{budget}/{pricing}"
                groups[key] = {"replays": len(group), "long": len(long), "overflows": overflows, "usd": usd,
                               "cached_share": share, "long_usd": long_usd, "long_wins": wins, "budget_held": held,
                               "aware_vs_naive": 1 - usd["managed"] / usd["cache_naive"] if usd["cache_naive"] else 0.0,
                               "aware_vs_unmanaged_long": (1 - long_usd["managed"] / long_usd["unmanaged"]
                                                           if long_usd["unmanaged"] else 0.0),
                               "floor_usd": floor, "long_floor_usd": long_floor,
                               "floor_vs_naive": {kind: 1 - floor[kind] / usd["cache_naive"] if usd["cache_naive"]
                                                  else 0.0 for kind in FLOORS},
                               "floor_vs_naive_long": best, "aware_share_of_floor_saving_long": captured,
                               "least_retention": {name: min(r["retention"][name] for r in group)
                                                   for name in MANAGERS},
                               "long_suffix_shaped": shaped,
                               "floor_violations": sum(len(r["floor_violations"]) for r in group)}
                g = groups[key]
                table.append([dataset, f"{budget // 1000}k", pricing,
                              f"{len(group)} ({len(long)})" + (f", {overflows} overflow" if overflows else ""),
                              " / ".join(f"{share[v]:.0%}" for v in VARIANTS),
                              *(f"{usd[v]:.2f}" for v in VARIANTS),
                              _pct(g["aware_vs_naive"]),
                              _pct(1 - long_usd["managed"] / long_usd["cache_naive"]) if long else "-",
                              _pct(1 - long_usd["watermark"] / long_usd["cache_naive"]) if long else "-",
                              _pct(g["aware_vs_unmanaged_long"]) if long else "-",
                              f"{wins}/{len(long)}" if long else "-", "yes" if held else "NO"])
                if long:
                    floor_table.append([
                        dataset, f"{budget // 1000}k", pricing,
                        f"{len(long)} ({shaped['managed']} / {shaped['cache_naive']})",
                        f"{long_usd['cache_naive']:.2f}", f"{long_usd['managed']:.2f} ({_pct(aware_saving)})",
                        *(f"{long_floor[kind]:.2f} ({_pct(best[kind])})" for kind in FLOORS + SUFFIX_FLOORS),
                        " / ".join(f"{captured[kind]:.0%}"
                                   for kind in ("floor", "floor_aware_retention", "suffix_floor_aware_retention"))])
    per_replay = [1 - r["managed"]["usd"] / r["cache_naive"]["usd"] for r in rows
                  if "overflow" not in r and r["cache_naive"]["compactions"] > 0]
    # Per-replay figures of the long replays only (the others cost the same under every manager).
    long_rows = [{**{k: r[k] for k in ("dataset", "file", "index", "budget", "pricing", "calls")},
                  **{v: {"usd": round(r[v]["usd"], 6), "cached_share": round(r[v]["cached_share"], 4)}
                     for v in VARIANTS}}
                 | {kind: round(r[kind], 6) for kind in FLOORS + SUFFIX_FLOORS}
                 | {"suffix_shaped": r["suffix_shaped"]}
                 | {"retention": {k: round(v, 4) for k, v in r["retention"].items()}}
                 for r in rows if r.get("long")]
    violations = [{k: r[k] for k in ("dataset", "file", "index", "budget", "pricing", "floor_violations")}
                  for r in rows if r.get("floor_violations")]
    payload = {"seconds": seconds, "groups": groups, "misses": misses, "long_replays": long_rows,
               "floor_violations": violations,
               "per_replay_aware_vs_naive_median": statistics.median(per_replay) if per_replay else None,
               "replays_where_naive_compacted": len(per_replay)}
    write_results("cost", payload, table,
                  f"Cost of the replays with the prompt cache counted (aware = cache=\"auto\"; savings as "
                  f"1 - aware/peer; {len(sources)} replays x 3 budgets x 2 price lists, {seconds:.0f} s)")
    write_results("cost_floor", {"seconds": seconds, "groups": {k: {f: g[f] for f in (
                      "long", "long_usd", "long_floor_usd", "floor_vs_naive_long", "aware_share_of_floor_saving_long",
                      "least_retention", "long_suffix_shaped", "floor_violations")} for k, g in groups.items()
                      if g["long"]}, "floor_violations": violations}, floor_table,
                  "Floors under the cost of the long replays (USD, and in brackets the largest saving against "
                  "cache-naive a manager of that kind could make; target: 30%)")
    print(f"median per-replay saving vs cache-naive where the naive manager compacted: "
          f"{payload['per_replay_aware_vs_naive_median']} over {len(per_replay)} replays")
    print(f"long replays where aware >= unmanaged: {len(misses)}")
    print(f"replays where a run cost less than the floor (must be none): {len(violations)}")


if __name__ == "__main__":
    main()
