"""The command line: ``ctxwindow replay``, ``ctxwindow count`` and ``ctxwindow score`` (argument
parsing and printing; the replay engine is :mod:`ctxwindow.replay`).

``ctxwindow replay [FILE]`` replays a recorded conversation or agent trajectory through a
:class:`~ctxwindow.ContextWindow` message by message, with a progress bar, a table of events
(zone changes, evictions, compactions), a final report (tokens sent per model call managed vs
unmanaged, peak utilization, overflows, pairing check, key-fact retention, time spent managing
per turn) and optionally a plot and a JSON report. Without FILE it replays a bundled tau-bench
trajectory. ``ctxwindow count FILE`` prints exact tokens per message, per role and per component.
``ctxwindow score ITEMS.parquet --policy P --current-turn N --out SCORES.parquet`` scores a store of
items on Dask (a local cluster, or ``--scheduler ADDRESS``) and writes them with ``score`` (and
``evict`` with ``--select-target-tokens`` or ``--select-ratio``); see :func:`ctxwindow.dask.score_parquet`.

Formats: OpenAI chat JSON (a list of messages, or ``{"messages": [...]}``) or JSONL (one message a
line), tau-bench JSON (a list of records with ``traj``; ``--index`` picks one), SWE-agent
``.traj``, conversation JSONL (one ``{"messages": [...]}`` per line, as the chitchat data;
``--index`` picks one), Responses items, Anthropic messages, mini-swe-agent ``.traj.json`` and
OpenHands completion logs (a file or a folder; see :mod:`ctxwindow.formats`). Records that
are not chat messages are skipped and counted in the report; a file's ``tools`` are counted.
``--estimate [CHARS]`` counts with an estimate for models without a public vocabulary (Claude and
Gemini get theirs, :class:`ctxwindow.EstimateTokenizer`, without it).

Errors (unreadable file, unknown format, malformed JSON, a budget too small for the protected
content) print one line and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from ctxwindow._native import __version__
from ctxwindow._canonical import text_of, validate_message
from ctxwindow._types import Message
from ctxwindow.config import PROFILES, STRATEGY_TYPES, strategy_from_spec
from ctxwindow.errors import ContextOverflowError, CtxWindowError
from ctxwindow.formats import (
    Trajectory,
    from_swe_agent,
    from_tau_bench,
    infer_trajectory,
    read_openhands_folder,
    tools_of,
)
from ctxwindow.replay import ReplayReport, replay
from ctxwindow.tools import count_tools
from ctxwindow.window import ContextWindow

__all__ = ["main", "load_conversation", "replay", "ReplayReport", "FORMATS"]

FORMATS = (
    "OpenAI chat JSON (a list of messages or {\"messages\": [...]})",
    "OpenAI chat JSONL (one message per line)",
    "tau-bench JSON (records with \"traj\", --index)",
    "SWE-agent .traj",
    "conversation JSONL (one {\"messages\": [...]} per line, --index)",
    "Responses items JSON (a list of items or {\"input\": [...]})",
    "Anthropic messages JSON ({\"system\", \"messages\"} with content blocks)",
    "mini-swe-agent .traj.json",
    "OpenHands completion log (a JSON file, or a folder of them)",
)

BUNDLED = {
    "tau-bench": "tau_bench_airline_trajectory.json",
    "swe-agent": "swe_agent_sweagenttestrepo-1c2844.traj",
}


class UsageError(Exception):
    """A problem with the command's input: printed as one line, exit code 2."""


def _json_error(path: str, error: json.JSONDecodeError, line_offset: int = 0) -> UsageError:
    return UsageError(f"{path}: invalid JSON at line {error.lineno + line_offset}, column {error.colno}: {error.msg}")


def _conversation_messages(value: Any) -> list[Message]:
    messages = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(messages, list):
        raise UsageError("a conversation line needs a \"messages\" list")
    return [{k: v for k, v in m.items() if k in ("role", "content", "name", "tool_calls", "tool_call_id")}
            for m in messages]


def load_conversation(path: str | Path, index: int = 0) -> tuple[str, list[Message]]:
    """Reads a conversation file: returns (format name, canonical messages)."""
    name = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise UsageError(f"cannot read {name}: {reason}") from None
    if name.endswith(".jsonl"):
        values = []
        for number, line in enumerate(raw.splitlines(), start=1):
            if line.strip():
                try:
                    values.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise _json_error(name, error, number - 1) from None
        if values and all(isinstance(v, dict) and "messages" in v for v in values):
            return "conversation JSONL", _conversation_messages(_pick(values, index, name))
        if values and all(isinstance(v, dict) and "role" in v for v in values):
            return "OpenAI chat JSONL", values
        raise _unknown(name)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise _json_error(name, error) from None
    found = infer_trajectory(value)  # mini-swe-agent, OpenHands, Responses items, Anthropic messages
    if found is not None:
        return found.format, found.messages
    if isinstance(value, dict) and isinstance(value.get("history"), list) and "trajectory" in value:
        return "SWE-agent .traj", from_swe_agent(value)
    if isinstance(value, dict) and isinstance(value.get("traj"), list):
        return "tau-bench JSON", from_tau_bench(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) and "traj" in v for v in value):
        return "tau-bench JSON", from_tau_bench(_pick(value, index, name))
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return "OpenAI chat JSON", _conversation_messages(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) and "role" in v for v in value):
        return "OpenAI chat JSON", value
    raise _unknown(name)


def _pick(values: list[Any], index: int, name: str) -> Any:
    if not -len(values) <= index < len(values):
        raise UsageError(f"{name}: --index {index} is out of range (the file holds {len(values)} conversations)")
    return values[index]


def _unknown(name: str) -> UsageError:
    return UsageError(f"{name}: unknown format; supported: {'; '.join(FORMATS)}")


def load_trajectory(path: str | Path, index: int = 0) -> Trajectory:
    """Reads a conversation file (or a folder of OpenHands completion logs) as
    :func:`load_conversation` does, with the tool definitions the file holds and the records
    that are not chat messages, skipped and counted."""
    if Path(path).is_dir():
        try:
            return read_openhands_folder(path)
        except CtxWindowError as error:
            raise UsageError(str(error)) from None
    value: Any = None
    if not str(path).endswith(".jsonl"):
        try:
            value = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            value = None  # load_conversation says what is wrong
        found = infer_trajectory(value) if value is not None else None
        if found is not None:
            return found
    fmt, messages = load_conversation(path, index)
    return Trajectory(fmt, messages, tools_of(value.get("tools")) if isinstance(value, dict) else None)


def _bundled(which: str) -> Path:
    return Path(str(resources.files("ctxwindow") / "data" / BUNDLED[which]))


def _plot(report: ReplayReport, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    calls = list(range(1, report.calls + 1))
    figure, axes = plt.subplots(3 if report.cached_share else 2, 1, figsize=(10, 9 if report.cached_share else 7),
                                sharex=True, gridspec_kw={"height_ratios": [3, 2, 2] if report.cached_share else [3, 2]})
    top, bottom = axes[0], axes[1]
    for low, high, color in ((0, 0.5, "#d9f2d9"), (0.5, 0.75, "#fff5cc"),
                             (0.75, 0.9, "#ffe0b3"), (0.9, 1.05, "#ffcccc")):
        top.axhspan(low * 100, high * 100, color=color, zorder=0)
    top.plot(calls, [u * 100 for u in report.utilization], color="#1f4e79", linewidth=2, label="utilization")
    for marker_calls, marker, label in ((report.eviction_calls, "v", "eviction"),
                                        (report.compaction_calls, "o", "compaction")):
        if marker_calls:
            ys = [report.utilization[c - 1] * 100 if 0 < c <= len(report.utilization) else 0 for c in marker_calls]
            top.scatter(marker_calls, ys, marker=marker, color="#c00000", zorder=3, label=label)
    top.set_ylim(0, 105)
    top.set_ylabel("% of prompt budget")
    top.set_title(f"ctxwindow replay: {Path(report.source).name} ({report.model}, "
                  f"{report.max_tokens:,} tokens, {report.reserve_output:,} reserved)")
    top.legend(loc="lower right")
    bottom.plot(calls, report.sent_unmanaged, color="#7f7f7f", label="unmanaged")
    bottom.plot(calls, report.sent_managed, color="#1f4e79", label="managed")
    if not report.cached_share:
        bottom.set_xlabel("model call")
    bottom.set_ylabel("prompt tokens")
    bottom.legend(loc="upper left")
    if report.cached_share:
        shares = axes[2]
        for name, color in (("unmanaged", "#7f7f7f"), ("cache_naive", "#c00000"), ("managed", "#1f4e79")):
            values = report.cached_share.get(name)
            if values:
                shares.plot(calls[:len(values)], [v * 100 for v in values], color=color,
                            label=name.replace("_", "-"), linewidth=1.5 if name == "managed" else 1.0)
        shares.set_ylim(0, 105)
        shares.set_ylabel("% of prompt cached")
        shares.set_xlabel("model call")
        shares.legend(loc="lower right")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _print_replay(report: ReplayReport, console: Any) -> None:
    from rich.table import Table

    summary = report.summary()
    if report.events:
        table = Table(title="events", show_lines=False)
        for column in ("call", "event", "detail", "evicted", "tokens before", "tokens after"):
            table.add_column(column, justify="right" if column != "detail" else "left")
        for event in report.events[:40]:
            table.add_row(str(event["call"]), event["event"], str(event["detail"]),
                          str(event.get("evicted", "")), f"{event.get('tokens_before', event.get('tokens', '')):,}"
                          if isinstance(event.get("tokens_before", event.get("tokens")), int) else "",
                          f"{event['tokens_after']:,}" if "tokens_after" in event else "")
        if len(report.events) > 40:
            table.caption = f"... and {len(report.events) - 40} more events"
        console.print(table)
    if report.alerts:
        alerts = Table(title="health alerts")
        for column in ("call", "level", "metric", "message"):
            alerts.add_column(column)
        for alert in report.alerts[:20]:
            alerts.add_row(str(alert["call"]), alert["level"], alert["metric"], alert["message"])
        console.print(alerts)
    calls = report.cost.get("calls", {})
    if calls.get("managed"):
        cache_table = Table(title=f"prompt cache per model call (priced as {report.cost['priced_as']}, "
                                  f"{report.cost['cache_rules']} rules)")
        for column in ("call", "prompt", "shared prefix", "cached", "USD", "cached, naive", "cached, unmanaged"):
            cache_table.add_column(column, justify="right")
        naive, unmanaged = calls.get("cache_naive", []), calls.get("unmanaged", [])
        for index, call in enumerate(calls["managed"][:40]):
            cache_table.add_row(str(index + 1), f"{call['prompt']:,}", f"{call['shared_prefix']:,}",
                                f"{call['cached']:,}", f"{call['usd']:.5f}",
                                f"{naive[index]['cached']:,}" if index < len(naive) else "",
                                f"{unmanaged[index]['cached']:,}" if index < len(unmanaged) else "")
        if len(calls["managed"]) > 40:
            cache_table.caption = f"... and {len(calls['managed']) - 40} more calls (all in --json)"
        console.print(cache_table)
    rows = [
        ("source", f"{report.source} ({report.format})"),
        ("messages replayed / model calls", f"{report.messages} / {report.calls}"),
        ("skipped (not chat messages)", _skipped_text(report.skipped)),
        ("counted with", report.encoding + ("" if report.exact else " (an estimate, not exact)")),
        ("tool definitions", f"{report.tool_definitions} ({report.tool_definition_tokens:,} tokens)"),
        ("tokens sent, managed", f"{summary['tokens_sent_managed']:,}"),
        ("tokens sent, unmanaged", f"{summary['tokens_sent_unmanaged']:,}"),
        ("tokens saved", f"{summary['tokens_saved']:,} ({summary['saved_fraction']:.0%})"),
        ("peak utilization", f"{summary['peak_utilization']:.0%} of {report.max_tokens - report.reserve_output:,}"),
        ("overflows", str(report.overflows)),
        ("pairing check", "ok: every tool result with its call" if report.pairing_ok else "FAILED"),
        ("evicted messages", str(report.evicted_messages)),
        ("key-fact fidelity", _fidelity_row(report)),
        ("health alerts", str(len(report.alerts))),
        *((f"cost, {name.replace('_', '-')} ({report.cost['priced_as']})",
           f"${run['usd']:.4f}, {run['cached_share']:.0%} of input cached")
          for name, run in report.cost.get("runs", {}).items()),
        ("managing time per message", f"p50 {summary['manage_us_p50']:.0f} us, p99 {summary['manage_us_p99']:.0f} us"),
    ]
    table = Table(title="report", show_header=False)
    table.add_column("measure")
    table.add_column("value")
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


def _fidelity_row(report: ReplayReport) -> str:
    """The fidelity figure the health alerts use: the lowest key-fact fidelity of a compaction."""
    figures = report.compaction_fidelity
    if not figures:
        return "no compaction"
    below = sum(f < report.fidelity_threshold for f in figures)
    return (f"{min(figures):.0%} (lowest of {len(figures)} compaction{'s' if len(figures) > 1 else ''}; "
            f"{below} below the alert's {report.fidelity_threshold:.0%})")


#: Parameters of the strategies named on the command line.
STRATEGY_DEFAULTS: dict[str, dict[str, Any]] = {
    "truncate_tool_results": {"max_chars": 2000},
    "sliding_window": {"n": 20},
}


def _strategies(args: argparse.Namespace) -> list[Any] | None:
    if not args.strategy:
        return None
    return [strategy_from_spec({"type": name, **STRATEGY_DEFAULTS.get(name, {})}) for name in args.strategy]


def _window_for(args: argparse.Namespace, system: str | None,
                tools: list[dict[str, Any]] | None = None) -> ContextWindow:
    cache: Any = args.cache
    if args.cache == "auto":
        from ctxwindow.cache import CacheSchedule

        cache = CacheSchedule.for_model(args.price_model or args.model)
    return ContextWindow(args.model, max_tokens=args.max_tokens, reserve_output=args.reserve_output,
                         system=system, strategies=_strategies(args), profile=args.profile,
                         preserve_recent=args.preserve_recent, tools=tools, tokenizer=_counter_for(args),
                         cache=cache)


def _counter_for(args: argparse.Namespace) -> Any:
    """The token counter of ``--model`` (Claude's and Gemini's :class:`EstimateTokenizer`), or
    the characters-per-token estimate with ``--estimate``; a model neither has gets an error
    offering the estimate."""
    from ctxwindow.errors import UnknownEncodingError
    from ctxwindow.tokenizer import HeuristicTokenizer, Tokenizer

    if args.estimate is not None:
        return HeuristicTokenizer(args.estimate)
    try:
        return Tokenizer.for_model(args.model)
    except UnknownEncodingError:
        raise UsageError(
            f"no vocabulary for model {args.model!r} (a model without a public tokenizer and no built-in "
            f"estimate, or a name not known): add --estimate to count with an estimate of "
            f"{ESTIMATE_CHARS_PER_TOKEN:g} characters per token (not exact; pass --estimate N for another "
            f"ratio), or name a model with a public vocabulary, e.g. --model gpt-4o") from None


#: Characters per token of ``--estimate`` without a value (the HeuristicTokenizer default).
ESTIMATE_CHARS_PER_TOKEN = 4.0


def _skipped_text(skipped: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in skipped.items()) or "none"


def _cmd_replay(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    console = Console()
    source = args.file or str(_bundled(args.bundled))
    loaded = load_trajectory(source, args.index)
    fmt, messages = loaded.format, loaded.messages
    if not args.file:
        fmt = f"bundled {args.bundled} trajectory, {fmt}"
        source = BUNDLED[args.bundled]
    for index, message in enumerate(messages):
        validate_message(message, index)
    system = next((text_of(m) for m in messages if m["role"] == "system"), None)
    window = _window_for(args, system, loaded.tools)
    report = ReplayReport(source, fmt, args.model, args.max_tokens, args.reserve_output)
    report.skipped = loaded.skipped
    report.encoding, report.exact = window.tokenizer.name, window.tokenizer.exact
    report.tool_definitions = len(loaded.tools or [])
    report.tool_definition_tokens = window.usage.by_component["tool_definitions"]
    from ctxwindow.costreport import CostRecorder, price_replay

    priced = price_replay(args.price_model or args.model)
    recorder = CostRecorder(window, *priced) if priced is not None else None
    with Progress(console=console, transient=True, disable=args.quiet) as progress:
        task = progress.add_task("replaying", total=len(messages))
        replay(messages, window, report, lambda: progress.advance(task),
               on_call=recorder.on_call if recorder is not None else None)
    if recorder is not None and priced is not None and not report.overflows:
        from ctxwindow.costreport import naive_window, replay_cost

        naive = naive_window(args.model, args.max_tokens, args.reserve_output, system=system,
                             strategies=_strategies(args), profile=args.profile,
                             preserve_recent=args.preserve_recent, tools=loaded.tools,
                             tokenizer=_counter_for(args))
        runs = {"managed": recorder.managed, "unmanaged": recorder.unmanaged,
                "cache_naive": replay_cost(messages, naive, *priced)}
        report.cost = {"priced_as": args.price_model or args.model, "cache_rules": priced[1].name,
                       "prices_date": _prices_date(),
                       "runs": {name: run.summary() for name, run in runs.items() if run is not None},
                       "calls": {name: [{"prompt": c.prompt_tokens, "cached": c.cached_tokens,
                                         "written": c.written_tokens, "usd": c.usd,
                                         "shared_prefix": p.tokens} for c, p in zip(run.calls, run.prefixes)]
                                 for name, run in runs.items() if run is not None}}
        report.cached_share = {name: [c.cached_tokens / c.prompt_tokens if c.prompt_tokens else 0.0
                                      for c in run.calls] for name, run in runs.items() if run is not None}
    if report.overflows:
        raise UsageError(f"budget too small: {report.overflow_message} (at message {report.messages + 1})")
    if not args.quiet:
        _print_replay(report, console)
    if args.plot:
        _plot(report, args.plot)
        console.print(f"plot written to {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps(report.summary(), indent=2) + "\n")
        console.print(f"report written to {args.json}")
    return 0 if report.pairing_ok else 1


def _prices_date() -> str:
    from ctxwindow.cost import PRICES_DATE

    return PRICES_DATE


def _cmd_count(args: argparse.Namespace) -> int:
    loaded = load_trajectory(args.file, args.index)
    fmt, messages = loaded.format, loaded.messages
    tokenizer = _counter_for(args)
    tools = loaded.tools or []
    tool_tokens = count_tools(tools, tokenizer)  # as the window counts them (ctxwindow.tools)
    rows = []
    by_role: dict[str, int] = {}
    for index, message in enumerate(messages):
        validate_message(message, index)
        tokens = tokenizer.count_message(message)
        by_role[message["role"]] = by_role.get(message["role"], 0) + tokens
        rows.append({"index": index, "role": message["role"], "tokens": tokens,
                     "preview": " ".join(text_of(message).split())[:60]
                     or ", ".join(c["function"]["name"] for c in message.get("tool_calls") or [])})
    total = tokenizer.count_messages(messages) + tool_tokens
    components = {"system_prompt": by_role.get("system", 0) + by_role.get("developer", 0),
                  "message_history": by_role.get("user", 0) + by_role.get("assistant", 0),
                  "tool_results": by_role.get("tool", 0), "tool_definitions": tool_tokens, "reply_priming": 3}
    result = {"file": args.file, "format": fmt, "model": args.model, "encoding": tokenizer.name,
              "exact": tokenizer.exact, "messages": rows, "by_role": by_role, "by_component": components,
              "tool_definitions": len(tools), "skipped_records": loaded.skipped, "total": total}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.file} ({fmt}), {args.model} ({tokenizer.name})")
    for column in ("#", "role", "tokens", "content"):
        table.add_column(column, justify="right" if column in ("#", "tokens") else "left")
    for row in rows:
        table.add_row(str(row["index"]), row["role"], f"{row['tokens']:,}", row["preview"])
    console = Console()
    console.print(table)
    console.print("per role: " + ", ".join(f"{role} {tokens:,}" for role, tokens in by_role.items()))
    console.print("per component: " + ", ".join(f"{name} {tokens:,}" for name, tokens in components.items()))
    if tools:
        console.print(f"tool definitions: {len(tools)} ({tool_tokens:,} tokens)")
    if loaded.skipped:
        console.print(f"records skipped (not chat messages): {_skipped_text(loaded.skipped)}")
    console.print(f"total prompt tokens: {total:,}" + ("" if tokenizer.exact else f" (an estimate: {tokenizer.name})"))
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from ctxwindow.dask import score_parquet

    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=args.quiet) as progress:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=total)
            progress.update(tasks[stage], completed=done, total=total)

        try:
            counts = score_parquet(
                args.items, args.out, policy=args.policy, current_turn=args.current_turn,
                target_free_tokens=args.select_target_tokens, ratio=args.select_ratio,
                min_keep=args.min_keep, scheduler=args.scheduler, workers=args.workers,
                progress=update,
            )
        except (OSError, TimeoutError) as error:
            raise UsageError(f"{type(error).__name__}: {' '.join(str(error).split())}") from error
    if not args.quiet:
        selected = f", {counts['evicted']:,} to evict" if args.select_target_tokens is not None or \
            args.select_ratio is not None else ""
        console.print(f"{counts['items']:,} items scored in {counts['partitions']} partitions{selected}: {args.out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxwindow", description="Keep an LLM agent's context window inside its budget.")
    parser.add_argument("--version", action="version", version=f"ctxwindow {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    replay_cmd = commands.add_parser("replay", help="replay a conversation through a ContextWindow")
    replay_cmd.add_argument("file", nargs="?", help="conversation file (default: a bundled trajectory)")
    replay_cmd.add_argument("--bundled", choices=sorted(BUNDLED), default="tau-bench",
                            help="bundled trajectory to replay without FILE")
    replay_cmd.add_argument("--model", default="gpt-4o")
    replay_cmd.add_argument("--estimate", type=float, nargs="?", const=ESTIMATE_CHARS_PER_TOKEN, metavar="CHARS",
                            help="count with an estimate of CHARS characters per token (models without a vocabulary)")
    replay_cmd.add_argument("--max-tokens", type=int, default=4000)
    replay_cmd.add_argument("--reserve-output", type=int, default=0)
    replay_cmd.add_argument("--preserve-recent", type=int, default=4)
    replay_cmd.add_argument("--strategy", action="append", choices=sorted(STRATEGY_TYPES),
                            help="compaction strategy (repeatable; default: the profile's)")
    replay_cmd.add_argument("--profile", choices=sorted(PROFILES), default="default")
    replay_cmd.add_argument("--index", type=int, default=0, help="which conversation of a multi-conversation file")
    replay_cmd.add_argument("--plot", help="write a PNG plot of utilization per model call")
    replay_cmd.add_argument("--json", help="write the report as JSON")
    replay_cmd.add_argument("--quiet", action="store_true", help="no progress bar or tables")
    replay_cmd.add_argument("--cache", choices=["auto", "off"], default="auto",
                            help="cache-aware compaction schedule of the managed window (default auto)")
    replay_cmd.add_argument("--price-model", help="price the calls as this model (default: --model; "
                            "no cost report when its price is unknown)")
    count_cmd = commands.add_parser("count", help="exact tokens per message, role and component")
    count_cmd.add_argument("file")
    count_cmd.add_argument("--model", default="gpt-4o")
    count_cmd.add_argument("--estimate", type=float, nargs="?", const=ESTIMATE_CHARS_PER_TOKEN, metavar="CHARS",
                           help="count with an estimate of CHARS characters per token (models without a vocabulary)")
    count_cmd.add_argument("--index", type=int, default=0)
    count_cmd.add_argument("--json", action="store_true", help="print JSON")
    score_cmd = commands.add_parser("score", help="score (and select evictions from) a Parquet store of items on Dask")
    score_cmd.add_argument("items", help="Parquet file or dataset of items (columns as ctxwindow.scoring names them)")
    score_cmd.add_argument("--policy", default="hybrid", choices=["retention", "fifo", "lru", "priority", "type_ttl", "hybrid"])
    score_cmd.add_argument("--current-turn", type=int, required=True)
    score_cmd.add_argument("--out", required=True, help="output Parquet dataset (a directory)")
    select = score_cmd.add_mutually_exclusive_group()
    select.add_argument("--select-target-tokens", type=int, help="mark evictions freeing this many tokens")
    select.add_argument("--select-ratio", type=float, help="mark evictions of this share of the items")
    score_cmd.add_argument("--min-keep", type=int, default=0, help="keep at least this many items")
    score_cmd.add_argument("--scheduler", help="address of a Dask scheduler (default: a local cluster)")
    score_cmd.add_argument("--workers", type=int, help="local cluster's worker processes (default: one per core)")
    score_cmd.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ctxwindow`` command; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "score":
            return _cmd_score(args)
        return _cmd_count(args)
    except ContextOverflowError as error:
        print(f"ctxwindow: budget too small: {error}", file=sys.stderr)
        return 2
    except (UsageError, CtxWindowError) as error:
        print(f"ctxwindow: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        if error.name in ("rich", "matplotlib"):
            print(f"ctxwindow: the command line needs {error.name}: pip install 'ctxwindow[cli]'", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    raise SystemExit(main())
