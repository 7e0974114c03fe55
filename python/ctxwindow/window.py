"""``ContextWindow``: the object an agent talks to every turn.

>>> from ctxwindow import ContextWindow
>>> window = ContextWindow("gpt-4o", max_tokens=2_000, system="You are terse.")
>>> window.add({"role": "user", "content": "hello"})
>>> [m["role"] for m in window.messages()]
['system', 'user']

Each message is counted once, when added (exact chat accounting of the model's encoding). The
conversation lives in a native :class:`~ctxwindow.TokenHistory` of whole groups (an assistant
message with tool calls and its tool results), so a turn costs the same whatever the length of
the conversation. When the prompt passes ``trigger`` of the prompt budget (``max_tokens -
reserve_output``), the strategies run cheapest first until it is at or below ``target``; the last
resort drops the oldest whole groups, which guarantees the fit whenever the protected content
fits. Protected content is never evicted or altered: the system prompt, pinned messages, the
newest user message and the last ``preserve_recent`` messages (with their groups). If protected
content alone exceeds the budget, :class:`~ctxwindow.ContextOverflowError` says by how much and
nothing changes.

``messages()`` is always valid for the providers: system first, every tool result right after
its call and every call answered (a call whose results are still being added is held back), the
first conversation message a user message (a short placeholder is inserted when eviction removed
it), and ``Tokenizer.count_messages(messages())`` plus the tool definitions within the budget.

A window belongs to one agent loop: it is not meant to be called from several threads at once
(guard it with a lock if you must share it; the native history inside is thread-safe).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxwindow._native import TokenHistory, Tokenizer
from ctxwindow.budget import PROFILES as BUDGET_PROFILES
from ctxwindow.budget import TokenBudget
from ctxwindow.errors import (
    ContextOverflowError,
    InvalidArgumentError,
    InvalidTypeError,
    MalformedMessageError,
)
from ctxwindow.events import EVENTS, EventBus, StatusEvent
from ctxwindow.fidelity import key_fact_retention
from ctxwindow.messages import Message, text_of, tool_call_ids, validate_message
from ctxwindow.pressure import PressureMonitor, PressureReading
from ctxwindow.strategies import (
    Archive,
    Cascade,
    ClearToolResults,
    CompactionState,
    DropOldest,
    Entry,
    MicroCompact,
    Notes,
    ProgressiveSummarize,
    ScoredEviction,
    SemanticMerge,
    SlidingWindow,
    StrategyReport,
    Summarize,
    TruncateToolResults,
)
from ctxwindow.tokenizer import TokenCounter

if TYPE_CHECKING:
    from ctxwindow.checkpoint import TaskCheckpoint

__all__ = ["ContextWindow", "Usage", "CompactionResult", "PROFILES", "STRATEGY_TYPES"]

PLACEHOLDER_USER = {"role": "user", "content": "[Earlier conversation omitted]"}

#: Strategy names usable in TOML configurations.
STRATEGY_TYPES: dict[str, Callable[..., Any]] = {
    "truncate_tool_results": TruncateToolResults,
    "clear_tool_results": ClearToolResults,
    "micro_compact": MicroCompact,
    "drop_oldest": DropOldest,
    "sliding_window": SlidingWindow,
    "scored_eviction": ScoredEviction,
    "summarize": Summarize,
    "progressive_summarize": ProgressiveSummarize,
    "semantic_merge": SemanticMerge,
}

#: Built-in profiles: budget allocations (see ``ctxwindow.budget``), strategies and settings.
PROFILES: dict[str, dict[str, Any]] = {
    "default": {"strategies": [], "trigger": 0.8, "target": 0.6, "preserve_recent": 4},
    "code_review": {"strategies": [{"type": "micro_compact"},
                                   {"type": "clear_tool_results", "keep": 5}],
                    "trigger": 0.8, "target": 0.6, "preserve_recent": 6},
    "research": {"strategies": [{"type": "truncate_tool_results", "max_chars": 8000},
                                {"type": "scored_eviction", "policy": "priority"}],
                 "trigger": 0.85, "target": 0.65, "preserve_recent": 4},
    "customer_support": {"strategies": [{"type": "truncate_tool_results", "max_chars": 2000},
                                        {"type": "clear_tool_results", "keep": 3}],
                         "trigger": 0.8, "target": 0.6, "preserve_recent": 4},
}

_CALLBACKS = tuple(name for name in EVENTS if name not in ("on_evict", "on_compact"))
_MORE = {"context", "profile", "raise_callback_errors", "notes", *_CALLBACKS}


@dataclass(frozen=True)
class Usage:
    """Where the window stands. ``total`` is the prompt that ``messages()`` sends (its chat
    accounting) plus the tool definitions; ``budget`` is ``max_tokens - reserve_output``."""

    total: int
    budget: int
    available: int
    utilization: float
    zone: str
    by_component: dict[str, int]
    turns_until_red: float | None
    max_tokens: int
    reserve_output: int
    calibration: float


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did: the strategies that changed something (in order), the prompt
    before and after, and the messages removed from the window (oldest first, as added)."""

    applied: list[str]
    tokens_before: int
    tokens_after: int
    evicted: list[Message]
    reports: list[StrategyReport] = field(default_factory=list)
    reason: str = "compact"
    #: Key-fact retention of the window's text across this compaction (when measured).
    fidelity: float | None = None


def _int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    return value


def _fraction(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a number, not {type(value).__name__}")
    if not 0.0 < float(value) <= 1.0:
        raise InvalidArgumentError(f"{name} must be in (0, 1], got {value}")
    return float(value)


def strategy_from_spec(spec: Mapping[str, Any]) -> object:
    """A strategy from a ``{"type": name, **parameters}`` mapping (TOML configurations)."""
    kind = spec.get("type")
    if kind not in STRATEGY_TYPES:
        raise InvalidArgumentError(f"unknown strategy type {kind!r}; known: {', '.join(STRATEGY_TYPES)}")
    parameters = {k: v for k, v in spec.items() if k != "type"}
    try:
        return STRATEGY_TYPES[kind](**parameters)
    except TypeError as error:
        raise InvalidArgumentError(f"strategy {kind}: {error}") from None


class ContextWindow:
    """A token-budgeted conversation for one agent; see the module documentation."""

    def __init__(
        self,
        model: str | None = None,
        *,
        max_tokens: int,
        reserve_output: int = 0,
        system: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        strategies: list[Any] | None = None,
        preserve_recent: int = 4,
        trigger: float = 0.8,
        target: float = 0.6,
        tokenizer: TokenCounter | None = None,
        on_evict: Callable[[list[Message], Usage], Any] | None = None,
        on_compact: Callable[[CompactionResult], Any] | None = None,
        **more: Any,
    ) -> None:
        unknown = set(more) - _MORE
        if unknown:
            raise InvalidArgumentError(
                f"unknown ContextWindow settings {sorted(unknown)}; known extras: {', '.join(sorted(_MORE))}")
        profile = more.get("profile", "default")
        if profile not in PROFILES:
            raise InvalidArgumentError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        self.max_tokens = _int(max_tokens, "max_tokens", 1)
        self.reserve_output = _int(reserve_output, "reserve_output", 0)
        if self.reserve_output >= self.max_tokens:
            raise InvalidArgumentError(
                f"reserve_output ({reserve_output}) must be less than max_tokens ({max_tokens})")
        self.preserve_recent = _int(preserve_recent, "preserve_recent", 0)
        self.trigger = _fraction(trigger, "trigger")
        self.target = _fraction(target, "target")
        if self.target > self.trigger:
            raise InvalidArgumentError(f"target ({target}) must not exceed trigger ({trigger})")
        if tokenizer is None:
            tokenizer = Tokenizer.for_model(model) if model is not None else Tokenizer("o200k_base")
        elif not isinstance(tokenizer, TokenCounter):
            raise InvalidTypeError("tokenizer must provide count, count_many, count_message, count_messages")
        if system is not None and not isinstance(system, str):
            raise InvalidTypeError(f"system must be a str, not {type(system).__name__}")
        if tools is not None and not isinstance(tools, list):
            raise InvalidTypeError(f"tools must be a list of tool definitions, not {type(tools).__name__}")
        self.model = model
        self.profile = profile
        self.tokenizer: TokenCounter = tokenizer
        self.cascade = Cascade(strategies if strategies is not None else
                               [strategy_from_spec(s) for s in PROFILES[profile]["strategies"]])
        self.events = EventBus(raise_errors=bool(more.get("raise_callback_errors", False)))
        if on_evict is not None:
            self.events.on("on_evict", on_evict)
        if on_compact is not None:
            self.events.on("on_compact", on_compact)
        for name in _CALLBACKS:
            if more.get(name) is not None:
                self.events.on(name, more[name])
        self.budget = TokenBudget(self.max_tokens, dict(BUDGET_PROFILES[profile]))
        self.pressure = PressureMonitor(
            self.max_tokens - self.reserve_output,
            on_zone_change=lambda old, new, reading: self.events.emit("on_zone_change", old, new, reading),
            on_velocity_spike=lambda reading: self.events.emit("on_velocity_spike", reading),
        )
        self.archive = Archive()
        self._history = TokenHistory()
        self._conversation: list[Message] = []  # the messages of _history, in order
        self._pending: list[Entry] = []  # a tool-call group still waiting for results
        self._open_calls: set[str] = set()
        self._pinned_in_history = 0
        self._seq = 0
        self._turn = 0
        self._calibration = 1.0
        self._tool_result_tokens = 0
        self.compactions = 0
        self.evicted_messages = 0
        #: Tokens of every message added so far (the burn of the conversation).
        self.tokens_added = 0
        #: Measure key-fact retention at each compaction (a HealthMonitor turns it on).
        self.measure_fidelity = False
        self.last_compaction: CompactionResult | None = None
        self._placeholder_tokens = self.tokenizer.count_message(PLACEHOLDER_USER)
        self._system_message: Message | None = None
        self._context_message: Message | None = None
        self._system_tokens = 0
        self._context_tokens = 0
        self._tools = tools
        self._tool_tokens = self._count_tools(tools)
        notes = more.get("notes") or next((s for s in self.cascade.strategies if isinstance(s, Notes)), None)
        if notes is not None and not isinstance(notes, Notes):
            raise InvalidTypeError("notes must be a ctxwindow.strategies.Notes")
        self.notes: Notes = notes if notes is not None else Notes()
        self._notes_message: Message | None = None
        self._notes_tokens = 0
        self._render_notes()
        self.set_system(system)
        self.set_context(more.get("context"))
        self._check_overhead()

    # --- configuration -------------------------------------------------------------------

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], profile: str | None = None, **overrides: Any) -> ContextWindow:
        """A window configured by a TOML file: a ``[window]`` table (or top-level keys) with
        ``model``, ``max_tokens``, ``reserve_output``, ``profile`` (default, code_review, research,
        customer_support), ``trigger``, ``target``, ``preserve_recent``, ``system`` and
        ``[[window.strategies]]`` entries ``{type = "truncate_tool_results", max_chars = 2000}``.
        Keyword arguments override the file."""
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10
            import tomli as tomllib
        try:
            with open(path, "rb") as file:
                document = tomllib.load(file)
        except tomllib.TOMLDecodeError as error:
            raise InvalidArgumentError(f"{path}: invalid TOML: {error}") from None
        settings = dict(document.get("window", document))
        allowed = {"model", "max_tokens", "reserve_output", "profile", "trigger", "target",
                   "preserve_recent", "system", "strategies", "context"}
        unknown = set(settings) - allowed
        if unknown:
            raise InvalidArgumentError(f"{path}: unknown settings {sorted(unknown)}; known: {', '.join(sorted(allowed))}")
        chosen = profile or settings.pop("profile", "default")
        settings.pop("profile", None)
        if chosen not in PROFILES:
            raise InvalidArgumentError(f"unknown profile {chosen!r}; known: {', '.join(PROFILES)}")
        base = {k: v for k, v in PROFILES[chosen].items() if k != "strategies"}
        if "strategies" in settings:
            settings["strategies"] = [strategy_from_spec(s) for s in settings["strategies"]]
        merged = {**base, **settings, **overrides}
        model = merged.pop("model", None)
        if "max_tokens" not in merged:
            raise InvalidArgumentError(f"{path}: max_tokens is required")
        return cls(model, profile=chosen, **merged)

    def set_system(self, system: str | None) -> None:
        """Sets (or removes, with None) the system prompt; it is counted once here."""
        if system is not None and not isinstance(system, str):
            raise InvalidTypeError(f"system must be a str, not {type(system).__name__}")
        message = {"role": "system", "content": system} if system is not None else None
        tokens = self.tokenizer.count_message(message) if message else 0
        self._system_message, self._system_tokens = message, tokens
        self.budget.set_used("system_prompt", tokens + self._context_tokens)

    def set_context(self, context: str | None) -> None:
        """Sets (or removes) dynamic context sent as a second system message after the prompt."""
        if context is not None and not isinstance(context, str):
            raise InvalidTypeError(f"context must be a str, not {type(context).__name__}")
        message = {"role": "system", "content": context} if context is not None else None
        self._context_message = message
        self._context_tokens = self.tokenizer.count_message(message) if message else 0
        self.budget.set_used("system_prompt", self._system_tokens + self._context_tokens)

    def set_tools(self, tools: list[dict[str, Any]] | None) -> None:
        """Sets the tool definitions (counted once here, as their JSON text)."""
        if tools is not None and not isinstance(tools, list):
            raise InvalidTypeError(f"tools must be a list of tool definitions, not {type(tools).__name__}")
        self._tools, self._tool_tokens = tools, self._count_tools(tools)

    def _count_tools(self, tools: list[dict[str, Any]] | None) -> int:
        if not tools:
            return 0
        tokens = self.tokenizer.count(json.dumps(tools, ensure_ascii=False, sort_keys=True))
        self.budget.set_used("tool_definitions", tokens)
        return tokens

    @property
    def prompt_budget(self) -> int:
        """``max_tokens - reserve_output``."""
        return self.max_tokens - self.reserve_output

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return self._tools

    @property
    def turn(self) -> int:
        """Number of user messages added so far."""
        return self._turn

    # --- accounting ----------------------------------------------------------------------

    def _overhead(self) -> int:
        """Tokens that are not conversation: reply priming, system prompt, context, notes, tools."""
        return 3 + self._system_tokens + self._context_tokens + self._notes_tokens + self._tool_tokens

    def _render_notes(self) -> None:
        text = self.notes.render(self.tokenizer.count)
        self._notes_message = {"role": "system", "content": text} if text else None
        self._notes_tokens = self.tokenizer.count_message(self._notes_message) if self._notes_message else 0

    def write_note(self, category: str, text: str, importance: str = "normal") -> None:
        """Writes a note carried verbatim in every prompt (within the notes' token cap, critical
        first): categories task_progress, decisions, bugs, constraints, learnings, misc;
        importance critical, high, normal, low."""
        note = self.notes.write_note(category, text, importance)
        self._render_notes()
        if self._protected_tokens() > self.prompt_budget:
            self.notes.notes.remove(note)
            self._render_notes()
            self._overflow(self._protected_tokens() + self.tokenizer.count(text), "notes")
        if self._effective(self._total()) > self.trigger * self.prompt_budget:
            self._compact("trigger")

    async def acompact(self, force: bool = False) -> CompactionResult:
        """:meth:`compact` for async code: runs in a worker thread, so an async summarizer is
        awaited there and the event loop is never blocked."""
        return await asyncio.to_thread(self.compact, force)

    def _first_role(self) -> str | None:
        return self._conversation[0].get("role") if self._conversation else None

    def _total(self) -> int:
        first = self._first_role()
        placeholder = self._placeholder_tokens if first is not None and first != "user" else 0
        return self._overhead() + self._history.total_tokens + placeholder

    def _check_overhead(self) -> None:
        needed = self._overhead() + self._placeholder_tokens
        if needed > self.prompt_budget:
            raise ContextOverflowError(needed, self.prompt_budget,
                                       "the system prompt, context and tool definitions alone")

    @property
    def usage(self) -> Usage:
        """Tokens by component, utilization, zone and turns until red."""
        total = self._total()
        budget = self.prompt_budget
        history = self._history.total_tokens
        by_component = {
            "system_prompt": self._system_tokens + self._context_tokens + self._notes_tokens,
            "tool_definitions": self._tool_tokens,
            "message_history": history - self._tool_result_tokens,
            "tool_results": self._tool_result_tokens,
            "memory_injection": 0,
            "output_reserved": self.reserve_output,
        }
        reading = self.pressure.last
        calibrated = math.ceil(total * self._calibration)
        return Usage(total, budget, budget - total, calibrated / budget,
                     self.pressure.zone if reading else "green", by_component,
                     reading.turns_until_red if reading else None,
                     self.max_tokens, self.reserve_output, self._calibration)

    def record_usage(self, prompt_tokens: int, completion_tokens: int | None = None) -> None:
        """Calibrates with what the provider billed for the last prompt: later compactions treat
        totals as ``total * calibration`` (bounded to [1, 1.5]: the exact count is never loosened),
        and the pressure monitor uses the reported count for this turn."""
        _int(prompt_tokens, "prompt_tokens", 0)
        if completion_tokens is not None:
            _int(completion_tokens, "completion_tokens", 0)
        estimate = self._total()
        if estimate > 0 and prompt_tokens > 0:
            ratio = min(max(prompt_tokens / estimate, 1.0), 1.5)
            self._calibration = 0.5 * self._calibration + 0.5 * ratio
        self.pressure.report(prompt_tokens)

    # --- adding ----------------------------------------------------------------------------

    def add(self, message: Mapping[str, Any], *, pinned: bool = False) -> None:
        """Adds one message (counted once, now). ``pinned=True`` protects it (and its group)
        from eviction and rewriting. Raises :class:`MalformedMessageError` for a malformed
        message, a tool result that answers no open call, or a new message while tool calls wait
        for results; :class:`ContextOverflowError` when protected content alone would exceed the
        budget. On error nothing changes."""
        validate_message(message)
        if not isinstance(pinned, bool):
            raise InvalidTypeError(f"pinned must be a bool, not {type(pinned).__name__}")
        message = dict(message)
        role = message["role"]
        if role in ("system", "developer"):
            raise MalformedMessageError(
                "message 0: system prompts are set with system= or set_system(), not add()")
        tokens = self.tokenizer.count_message(message)
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in self._open_calls:
                raise MalformedMessageError(
                    f"message 0: tool result for call {call_id!r}, which is not an open tool call "
                    f"in this window (open: {sorted(self._open_calls) or 'none'})")
        elif self._open_calls:
            raise MalformedMessageError(
                f"message 0: tool calls {sorted(self._open_calls)} have no results yet; add their "
                f"tool results before a {role} message")
        self._seq += 1
        turn = self._turn + (1 if role == "user" else 0)
        if role == "tool":
            entry = Entry(message, tokens, self._seq, self._pending[0].group, turn, pinned)
            group = self._pending + [entry]
            open_calls = self._open_calls - {message["tool_call_id"]}
        else:
            entry = Entry(message, tokens, self._seq, self._seq, turn, pinned)
            group = [entry]
            open_calls = set(tool_call_ids(message))
        if open_calls:
            self._pending, self._open_calls = group, open_calls
            self._check_pending()
        else:
            self._push_group(group)
            self._pending, self._open_calls = [], set()
        self.tokens_added += tokens
        self._after_add(message, role, turn)

    def extend(self, messages: Iterable[Mapping[str, Any]]) -> None:
        """Adds messages in order (each as :meth:`add`; stops at the first error)."""
        for message in messages:
            self.add(message)

    def _check_pending(self) -> None:
        pending = sum(e.tokens for e in self._pending)
        if self._total() + self._placeholder_tokens + pending <= self.prompt_budget:
            return  # everything fits, protected content a fortiori
        protected = self._protected_tokens() + pending
        if protected > self.prompt_budget:
            self._pending, self._open_calls = [], set()
            self._overflow(protected, "a tool call group still waiting for results")

    def _push_group(self, group: list[Entry]) -> None:
        # An overflow is raised before compaction changes anything, so undoing the pushes below
        # is enough: the history rolls back, the conversation list is cut to its old length.
        snapshot = self._history.snapshot()
        saved = (len(self._conversation), self._pinned_in_history, self._tool_result_tokens)
        for index, entry in enumerate(group):
            self._history.push(entry, entry.tokens, index == 0)
            self._conversation.append(entry.message)
            self._pinned_in_history += entry.pinned
            if entry.role == "tool":
                self._tool_result_tokens += entry.tokens
        try:
            if self._effective(self._total()) > self.trigger * self.prompt_budget:
                self._compact("trigger")
        except ContextOverflowError:
            self._history.rollback(snapshot)
            del self._conversation[saved[0]:]
            _, self._pinned_in_history, self._tool_result_tokens = saved
            raise

    def _after_add(self, message: Message, role: str, turn: int) -> None:
        history = self._history.total_tokens
        self.budget.set_used("message_history", history - self._tool_result_tokens)
        self.budget.set_used("tool_results", self._tool_result_tokens)
        if role == "user":
            self._turn = turn
            total = self._total()
            self.budget.record_turn(total)
            self.pressure.observe(total)
            self.events.emit("on_turn_start", turn)
        elif role == "tool":
            self.events.emit("on_tool_result", message)
        elif role == "assistant" and not message.get("tool_calls") and self.events.has("on_turn_end"):
            self.events.emit("on_turn_end", turn, self.usage)

    def _effective(self, total: int) -> float:
        return total * self._calibration

    # --- compaction ------------------------------------------------------------------------

    def _entries(self) -> list[Entry]:
        entries: list[Entry] = list(self._history)
        return entries

    def _protected_groups(self, entries: Sequence[Entry]) -> set[int]:
        recent = entries[max(len(entries) - self.preserve_recent, 0):] if self.preserve_recent else []
        groups = {e.group for e in recent}
        for entry in reversed(entries):
            if entry.role == "user":
                groups.add(entry.group)
                break
        groups.update(e.group for e in entries if e.pinned)
        return groups

    def _protected_tokens(self) -> int:
        entries = self._entries()
        groups = self._protected_groups(entries)
        return self._overhead() + self._placeholder_tokens + sum(e.tokens for e in entries if e.group in groups)

    def _overflow(self, needed: int, what: str) -> None:
        error = ContextOverflowError(needed, self.prompt_budget, f"protected content ({what})")
        self.events.emit("on_overflow", error)
        raise error

    def compact(self, force: bool = False) -> CompactionResult:
        """Runs the strategies (cheapest first) and the last resort until the prompt is at or
        below ``target`` of the budget. Without ``force`` it does nothing under ``trigger``.
        Idempotent: compacting a compacted window changes nothing."""
        if not force and self._effective(self._total()) <= self.trigger * self.prompt_budget:
            total = self._total()
            return CompactionResult([], total, total, [], reason="below trigger")
        return self._compact("forced" if force else "compact")

    def _compact(self, reason: str) -> CompactionResult:
        before = self._total()
        protected = self._protected_tokens()
        if protected > self.prompt_budget:
            self._overflow(protected, "system prompt, pinned, newest user and recent messages")
        budget = self.prompt_budget
        target = math.floor(self.target * budget / self._calibration)
        before_text = self._window_text() if self.measure_fidelity else None
        native = None
        if not self.cascade.strategies and self._pinned_in_history == 0:
            native = self._drop_oldest_native(target)
        reports: list[StrategyReport]
        if native is not None:
            evicted, reports = native, []
        else:
            evicted, reports = self._compact_with_strategies(target)
        after = self._total()
        applied = [r.name for r in reports if r.changed]
        if evicted and "drop_oldest" not in applied and not any(
                r.evicted for r in reports if r.name != "drop_oldest"):
            applied.append("drop_oldest")
        fidelity = None
        if before_text is not None and (applied or evicted):
            fidelity = key_fact_retention(before_text, self._window_text()).score
        result = CompactionResult(applied, before, after, evicted, reports, reason, fidelity)
        if applied or evicted:
            self.compactions += 1
            self.evicted_messages += len(evicted)
        self.last_compaction = result
        usage = self.usage
        if evicted:
            self.events.emit("on_evict", evicted, usage)
        self.events.emit("on_compact", result)
        if self.events.has("on_status"):
            sentence = (f"context window at {usage.utilization:.0%} capacity "
                        f"({usage.total:,}/{usage.budget:,} tokens), "
                        + ("compaction applied" if applied else "nothing to compact"))
            self.events.emit("on_status", StatusEvent(sentence, usage.total, usage.budget,
                                                      usage.utilization, usage.zone))
        return result

    def _window_text(self) -> str:
        return "\n".join(text_of(m) + json.dumps(m.get("tool_calls") or "") for m in self._conversation)

    @property
    def llm_strategy_names(self) -> set[str]:
        """Names of the configured strategies that call a model."""
        return {s.name for s in self.cascade.strategies if getattr(s, "cost", "free") == "llm"}

    def _drop_oldest_native(self, target: int) -> list[Message] | None:
        """The last resort on the native FIFO, O(k) for k evicted entries, when the protected
        messages form a suffix of the history (else None: the general path handles it)."""
        count = len(self._history)
        tail_groups: set[int] = set()
        tail_tokens = 0
        index = count - 1
        # The last preserve_recent messages, widened to whole groups.
        while index >= 0 and (count - 1 - index < self.preserve_recent
                              or self._history[index].group in tail_groups):
            entry: Entry = self._history[index]
            tail_groups.add(entry.group)
            tail_tokens += entry.tokens
            index -= 1
        tail = self._conversation[index + 1:]
        if not any(m.get("role") == "user" for m in tail) and any(
                m.get("role") == "user" for m in self._conversation[: index + 1]):
            return None  # the newest user message lies before the tail
        overhead = self._overhead() + self._placeholder_tokens
        watermark = max(target, overhead + tail_tokens)
        ceiling = max(math.floor(self.trigger * self.prompt_budget), watermark)
        evicted: list[Entry] = self._history.evict(ceiling, overhead, watermark)
        del self._conversation[: len(evicted)]
        self._tool_result_tokens -= sum(e.tokens for e in evicted if e.role == "tool")
        return [e.original or e.message for e in evicted]

    def _compact_with_strategies(self, target: int) -> tuple[list[Message], list[StrategyReport]]:
        entries = self._entries()
        state = CompactionState(
            entries=list(entries), count_message=self.tokenizer.count_message,
            overhead=self._overhead() + self._placeholder_tokens, budget=self.prompt_budget,
            target=target, archive=self.archive, current_turn=self._turn,
            protected_groups=self._protected_groups(entries))
        reports = self.cascade.run(state)
        if state.total() > state.target:
            # The last resort keeps a conversation summary while anything else can go, and
            # drops it only if the budget cannot be met otherwise.
            summaries = {e.group for e in state.entries if e.group < 0}
            state.protected_groups |= summaries
            reports.append(DropOldest().apply(state))
            state.protected_groups -= summaries
            if state.total() > state.budget:
                reports.append(DropOldest().apply(state))
        # Rebuild the FIFO from the compacted entries (one O(window) pass per compaction).
        self._history = TokenHistory()
        self._conversation = []
        previous_group = None
        for entry in state.entries:
            self._history.push(entry, entry.tokens, entry.group != previous_group)
            self._conversation.append(entry.message)
            previous_group = entry.group
        self._pinned_in_history = sum(e.pinned for e in state.entries)
        self._tool_result_tokens = sum(e.tokens for e in state.entries if e.role == "tool")
        evicted = [e.original or e.message for e in sorted(state.evicted, key=lambda e: e.seq)]
        return evicted, reports

    # --- output ----------------------------------------------------------------------------

    def messages(self) -> list[dict[str, Any]]:
        """What to send now: system first, then the conversation; fits the budget."""
        out: list[dict[str, Any]] = []
        if self._system_message is not None:
            out.append(self._system_message)
        if self._context_message is not None:
            out.append(self._context_message)
        if self._notes_message is not None:
            out.append(self._notes_message)
        first = self._first_role()
        if first is not None and first != "user":
            out.append(dict(PLACEHOLDER_USER))
        out.extend(self._conversation)
        return out

    # --- checkpoints -----------------------------------------------------------------------

    def checkpoint(self, goal: str, **fields: Any) -> TaskCheckpoint:
        """A :class:`~ctxwindow.checkpoint.TaskCheckpoint` of the task with this window's state
        (history with pins and summaries, pending tool calls, notes, archive, system prompt,
        context, calibration), so :meth:`resume` restores ``messages()`` exactly."""
        from ctxwindow.checkpoint import TaskCheckpoint

        def entry(e: Entry) -> dict[str, Any]:
            return {"message": e.message, "tokens": e.tokens, "seq": e.seq, "group": e.group,
                    "turn": e.turn, "pinned": e.pinned, "original": e.original}

        state = {
            "entries": [entry(e) for e in self._entries()],
            "pending": [entry(e) for e in self._pending],
            "open_calls": sorted(self._open_calls),
            "seq": self._seq, "turn": self._turn, "calibration": self._calibration,
            "notes": [{"category": n.category, "text": n.text, "importance": n.importance} for n in self.notes.notes],
            "archive": self.archive.to_dict(),
            "system": self._system_message["content"] if self._system_message else None,
            "context": self._context_message["content"] if self._context_message else None,
        }
        return TaskCheckpoint(goal=goal, window_state=state, **fields)

    def restore(self, checkpoint: TaskCheckpoint) -> None:
        """Restores the state of :meth:`checkpoint` into this window (built with the same
        settings). Messages are recounted with this window's tokenizer."""
        state = checkpoint.window_state
        if not isinstance(state, dict) or "entries" not in state:
            raise InvalidArgumentError("the checkpoint holds no window state (use ContextWindow.checkpoint)")

        def entry(data: dict[str, Any]) -> Entry:
            return Entry(data["message"], self.tokenizer.count_message(data["message"]), data["seq"],
                         data["group"], data["turn"], data["pinned"], data.get("original"))

        entries = [entry(e) for e in state["entries"]]
        self.set_system(state.get("system"))
        self.set_context(state.get("context"))
        self.notes.notes.clear()
        for note in state.get("notes", []):
            self.notes.write_note(note["category"], note["text"], note["importance"])
        self._render_notes()
        self.archive.restore(state.get("archive", {}))
        self._history = TokenHistory()
        self._conversation = []
        previous = None
        for e in entries:
            self._history.push(e, e.tokens, e.group != previous)
            self._conversation.append(e.message)
            previous = e.group
        self._pinned_in_history = sum(e.pinned for e in entries)
        self._tool_result_tokens = sum(e.tokens for e in entries if e.role == "tool")
        self._pending = [entry(e) for e in state.get("pending", [])]
        self._open_calls = set(state.get("open_calls", []))
        self._seq, self._turn = int(state["seq"]), int(state["turn"])
        self._calibration = float(state.get("calibration", 1.0))

    def resume(self, store: Any, session_id: str = "default") -> TaskCheckpoint | None:
        """Loads the newest checkpoint of ``session_id`` from a checkpoint store and restores
        it into this window; returns it (None when the session has none)."""
        checkpoint: TaskCheckpoint | None = store.load(session_id)
        if checkpoint is not None:
            self.restore(checkpoint)
        return checkpoint

    def pending_messages(self) -> list[Message]:
        """The tool-call group waiting for results (held back from ``messages()``)."""
        return [e.message for e in self._pending]

    def retrieve(self, retrieval_id: str) -> list[Message] | None:
        """The original messages behind a placeholder's retrieval id, or None."""
        return self.archive.get(retrieval_id)

    def pressure_reading(self) -> PressureReading | None:
        """The latest pressure reading."""
        return self.pressure.last

    def __len__(self) -> int:
        """Number of conversation messages in the window (system prompt and held-back tool
        calls excluded)."""
        return len(self._conversation)

    def __repr__(self) -> str:
        usage = self.usage
        return (f"ContextWindow(model={self.model!r}, messages={len(self)}, "
                f"total={usage.total}, budget={usage.budget}, zone={usage.zone!r})")
