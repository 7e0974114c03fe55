"""``ContextWindow``: the object an agent talks to every turn.

>>> from ctxwindow import ContextWindow
>>> window = ContextWindow("gpt-4o", max_tokens=2_000, system="You are terse.")
>>> window.add({"role": "user", "content": "hello"})
>>> [m["role"] for m in window.messages()]
['system', 'user']

Each message is counted once, when added (exact chat accounting of the model's encoding). The
conversation lives in one store (:mod:`ctxwindow.conversation`) of whole groups (an assistant
message with tool calls and its tool results), so a turn costs the same whatever the length of
the conversation. When the prompt passes ``trigger`` of the prompt budget (``max_tokens -
reserve_output``), the strategies run cheapest first until it is at or below ``target``; the last
resort drops the oldest whole groups, which guarantees the fit whenever the protected content
fits (:mod:`ctxwindow.compaction`: plan, check, apply). Protected content is never evicted or
altered: the system prompt, pinned messages, the newest user message and the last
``preserve_recent`` messages (with their groups). If protected content alone exceeds the budget,
:class:`~ctxwindow.ContextOverflowError` says by how much.

Every operation is a transaction: ``add``, ``extend``, ``compact``, ``record_usage``,
``write_note``, ``set_system`` and ``restore`` either complete or, on any exception (overflow,
malformed input, a strategy or summarizer that raises, ``KeyboardInterrupt``), leave the window
exactly as it was, pending tool calls included. Events fire after the new state is final, so a
callback that raises (re-raised only with ``raise_callback_errors=True``) leaves it complete.

``messages()`` is always valid for the providers (``ctxwindow.messages.check_history`` finds
nothing): system first, every tool result right after its call and every call answered (a call
whose results are still being added is held back), the first conversation message a user message
(a short placeholder is inserted when eviction removed it), and the prompt within the budget,
also once multiplied by the calibration that ``record_usage`` learns from the provider.

A summary by a language model runs inside the ``add`` that triggers it and blocks it (up to the
summarizer's timeout). Async agents call :meth:`ContextWindow.aadd` / :meth:`acompact`, which
await async summarizers on the caller's event loop (a timeout cancels the call) and run sync
ones in a worker thread.

With ``recall=Recall(...)`` (:mod:`ctxwindow.recall`) the messages a compaction removes are
archived for recall, and each user message brings the most relevant of them back as one system
message within the ``memory_injection`` budget.

A window belongs to one agent loop: it is not meant to be called from several threads at once
(guard it with a lock if you must share it). A call made while one of its operations is in
progress (from a strategy, a summarizer, or another coroutine during ``aadd``) raises
:class:`~ctxwindow.errors.WindowBusyError` and changes nothing.
"""

from __future__ import annotations

import json
import math
import operator
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ctxwindow._native import Tokenizer
from ctxwindow.archive import Archive, MessageArchive, put_groups
from ctxwindow.budget import PROFILES as BUDGET_PROFILES
from ctxwindow.budget import TokenBudget
from ctxwindow.cache import CACHE_MODES, CacheSchedule, layout
from ctxwindow.compaction import CompactionResult, GateSettings, Limits, apply_plan, plan_compaction, protected_tokens
from ctxwindow.config import PROFILES, STRATEGY_TYPES, WindowSettings, check_int, read_toml, strategy_from_spec
from ctxwindow.context_windows import resolve_budget
from ctxwindow.conversation import ConversationStore
from ctxwindow.errors import (
    ContextOverflowError,
    InvalidArgumentError,
    InvalidTypeError,
    MalformedMessageError,
    WindowBusyError,
)
from ctxwindow.events import EVENTS, EventBus, StatusEvent
from ctxwindow.fidelity import key_fact_retention
from ctxwindow.gate import overhead_text
from ctxwindow.tools import count_tools
from ctxwindow.instructions import Instruction, StandingInstructions
from ctxwindow.messages import (
    PLACEHOLDER_USER,
    Message,
    check_history,
    copy_message,
    text_of,
    tool_call_ids,
    validate_message,
)
from ctxwindow.sync import MessageLike, as_message, sync_window
from ctxwindow.recall import Recall, message_key, parse_recall_arguments, render_group
from ctxwindow.pressure import PressureMonitor, PressureReading
from ctxwindow.state import WindowState, calibration_bounds, entry_from_dict, entry_to_dict
from ctxwindow.strategies import Cascade, Entry, Notes
from ctxwindow.strategies.base import NeedsAwait
from ctxwindow.strategies.summarize import await_summarizer
from ctxwindow.tokenizer import TokenCounter

if TYPE_CHECKING:
    from ctxwindow.checkpoint import TaskCheckpoint
    from ctxwindow.delegate import DelegationResult, RunFunction

__all__ = ["ContextWindow", "Usage", "CompactionResult", "PROFILES", "STRATEGY_TYPES", "strategy_from_spec"]

T = TypeVar("T")

_CALLBACKS = tuple(name for name in EVENTS if name not in ("on_evict", "on_compact"))
_MORE = {"context", "profile", "raise_callback_errors", "notes", "archive", "instructions", "fidelity_gate",
         "recall", "cache", *_CALLBACKS}
#: How many summarizer calls one async operation awaits at most (each is awaited once).
_MAX_AWAITS = 64


@dataclass(frozen=True)
class Usage:
    """Where the window stands. ``total`` is the prompt that ``messages()`` sends (its chat
    accounting) plus the tool definitions; ``budget`` is ``max_tokens - reserve_output``;
    ``utilization`` is the calibrated total over the budget."""

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
class _Overhead:
    """What is sent besides the conversation, each counted once when set."""

    system: Message | None = None
    system_tokens: int = 0
    context: Message | None = None
    context_tokens: int = 0
    notes: Message | None = None
    notes_tokens: int = 0
    tools: list[dict[str, Any]] | None = None
    tool_tokens: int = 0
    instructions: Message | None = None
    instructions_tokens: int = 0
    #: The tokens the instructions block would add if every message holding an instruction
    #: left the conversation (compactions plan for it).
    instructions_reserve: int = 0
    #: The block with every instruction in force (what the fidelity gate counts as present).
    instructions_text: str = ""
    #: The recall block (archived messages brought back for the latest user message).
    recall: Message | None = None
    recall_tokens: int = 0
    #: The tokens a full recall block would add (compactions plan for it).
    recall_reserve: int = 0

    @property
    def tokens(self) -> int:
        """Reply priming (3) plus everything above."""
        return (3 + self.system_tokens + self.context_tokens + self.notes_tokens + self.tool_tokens
                + self.instructions_tokens + self.recall_tokens)

    @property
    def messages(self) -> list[Message]:
        """The system messages sent before the conversation, most stable first
        (:data:`_BLOCK_ORDER`)."""
        return [m for m in _BLOCKS(self) if m is not None]


#: The blocks sent before the conversation (attributes of :class:`_Overhead`), laid out most
#: stable first by :func:`ctxwindow.cache.layout` once, here (``messages()`` only reads them).
_BLOCK_ORDER = tuple(layout([(kind, kind) for kind in ("system", "instructions", "context", "notes", "recall")]))
_BLOCKS = operator.attrgetter(*_BLOCK_ORDER)


class ContextWindow:
    """A token-budgeted conversation for one agent; see the module documentation."""

    def __init__(
        self,
        model: str | None = None,
        *,
        max_tokens: int | None = None,
        reserve_output: int | None = None,
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
        max_tokens, reserve_output = resolve_budget(model, max_tokens, reserve_output)  # model's window if omitted
        unknown = set(more) - _MORE
        if unknown:
            raise InvalidArgumentError(
                f"unknown ContextWindow settings {sorted(unknown)}; known extras: {', '.join(sorted(_MORE))}")
        profile = more.get("profile", "default")
        if profile not in PROFILES:
            raise InvalidArgumentError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        self.settings = WindowSettings(max_tokens, reserve_output, preserve_recent, trigger, target)
        if tokenizer is None:
            tokenizer = Tokenizer.for_model(model) if model is not None else Tokenizer("o200k_base")
        elif not isinstance(tokenizer, TokenCounter):
            raise InvalidTypeError("tokenizer must provide count, count_many, count_message, count_messages")
        archive = more.get("archive")
        if archive is not None and not isinstance(archive, MessageArchive):
            raise InvalidTypeError("archive must implement ctxwindow.archive.MessageArchive (put, get, search)")
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
        notes = more.get("notes") or next((s for s in self.cascade.strategies if isinstance(s, Notes)), None)
        if notes is not None and not isinstance(notes, Notes):
            raise InvalidTypeError("notes must be a ctxwindow.strategies.Notes")
        self.notes: Notes = notes if notes is not None else Notes()
        instructions = more.get("instructions", True)
        if isinstance(instructions, bool):
            cap = max(32, min(400, self.prompt_budget // 8))
            instructions = StandingInstructions(max_tokens=cap, detect=instructions)
        elif not isinstance(instructions, StandingInstructions):
            raise InvalidTypeError("instructions must be a bool or a ctxwindow.StandingInstructions")
        #: The user's standing instructions (see :attr:`instructions`).
        self.standing_instructions: StandingInstructions = instructions
        gate = more.get("fidelity_gate", True)
        if not isinstance(gate, bool):
            raise InvalidTypeError(f"fidelity_gate must be a bool, not {type(gate).__name__}")
        #: Whether every compaction by the strategies goes through the fidelity gate.
        self.fidelity_gate = gate
        cache = more.get("cache", "off")
        if isinstance(cache, str) and cache in CACHE_MODES:
            schedule = CacheSchedule.for_model(model) if cache == "auto" else None
        elif isinstance(cache, CacheSchedule):
            schedule = cache
        else:
            raise InvalidArgumentError(f"cache must be 'auto', 'off' or a ctxwindow.cache.CacheSchedule, got {cache!r}")
        #: The cache-aware schedule (``cache="auto"``), or None (``cache="off"``): see :mod:`ctxwindow.cache`.
        self.cache: CacheSchedule | None = schedule
        self._budget = TokenBudget(self.max_tokens, dict(BUDGET_PROFILES[profile]))
        self.pressure = PressureMonitor(
            self.prompt_budget,
            on_zone_change=lambda old, new, reading: self.events.emit("on_zone_change", old, new, reading),
            on_velocity_spike=lambda reading: self.events.emit("on_velocity_spike", reading),
        )
        #: Where originals of replaced messages go; placeholders' retrieval ids resolve here.
        self.archive: MessageArchive = archive if archive is not None else Archive()
        self._store = ConversationStore()
        self._calibration = 1.0
        self.compactions = 0
        self.evicted_messages = 0
        #: Tokens of every message added so far (the burn of the conversation).
        self.tokens_added = 0
        #: Measure key-fact retention at each compaction (a HealthMonitor turns it on).
        self.measure_fidelity = False
        self.last_compaction: CompactionResult | None = None
        self._placeholder_tokens = self.tokenizer.count_message(PLACEHOLDER_USER)
        self._last_checkpoint: TaskCheckpoint | None = None
        self._busy = False
        self._after: list[Callable[[], None]] = []
        self._answers: dict[Any, Any] = {}
        self._awaiting = False
        #: Seqs of the messages holding an instruction that are still in the conversation verbatim.
        self._held: set[int] = set()
        #: Groups archived by the plans applied in the current operation, written at its end.
        self._archived: dict[str, list[Message]] = {}
        recall = more.get("recall")
        if recall is not None and not isinstance(recall, Recall):
            raise InvalidTypeError(f"recall must be a ctxwindow.Recall, not {type(recall).__name__}")
        #: Brings evicted messages back when a user message needs them (None: off).
        self.recall: Recall | None = recall
        #: Groups evicted in the current operation, for the recall archive: (messages, seq, turn).
        self._recall_pending: list[tuple[list[Message], int | None, int | None]] = []
        #: The user message whose recall block is to be made at the end of this operation.
        self._recall_query: str | None = None
        overhead = self._with_system(_Overhead(), system)
        overhead = self._with_context(overhead, more.get("context"))
        overhead = self._with_tools(overhead, tools)
        if recall is not None:
            overhead = replace(overhead, recall_reserve=recall.max_tokens)
        self._overheads = self._with_instructions(self._with_notes(overhead))
        needed = self._overheads.tokens + self._overheads.recall_reserve + self._placeholder_tokens
        if needed > self.prompt_budget:
            raise ContextOverflowError(needed, self.prompt_budget,
                                       "the system prompt, context and tool definitions alone"
                                       + (" with room for recall's max_tokens" if recall is not None else ""))
        if recall is not None:
            recall._attach(self)

    # --- configuration -------------------------------------------------------------------

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], profile: str | None = None, **overrides: Any) -> ContextWindow:
        """A window configured by a TOML file: a ``[window]`` table (or top-level keys) with
        ``model``, ``max_tokens``, ``reserve_output``, ``profile`` (default, code_review, research,
        customer_support), ``trigger``, ``target``, ``preserve_recent``, ``system`` and
        ``[[window.strategies]]`` entries ``{type = "truncate_tool_results", max_chars = 2000}``.
        Keyword arguments override the file."""
        model, settings = read_toml(path, profile, overrides)
        return cls(model, **settings)

    @property
    def max_tokens(self) -> int:
        return self.settings.max_tokens

    @property
    def reserve_output(self) -> int:
        return self.settings.reserve_output

    @property
    def preserve_recent(self) -> int:
        return self.settings.preserve_recent

    @property
    def trigger(self) -> float:
        return self.settings.trigger

    @property
    def target(self) -> float:
        return self.settings.target

    @property
    def prompt_budget(self) -> int:
        """``max_tokens - reserve_output``."""
        return self.settings.prompt_budget

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return self._overheads.tools

    @property
    def turn(self) -> int:
        """Number of user messages added so far."""
        return self._store.turn

    @property
    def entries(self) -> list[Entry]:
        """The conversation's entries (values: message, tokens, group, turn, pin, and the original
        of a rewritten message), oldest first; held-back tool calls excluded."""
        return self._store.entries()

    def _with_system(self, overhead: _Overhead, system: object) -> _Overhead:
        if system is not None and not isinstance(system, str):
            raise InvalidTypeError(f"system must be a str, not {type(system).__name__}")
        message = {"role": "system", "content": system} if system is not None else None
        return replace(overhead, system=message,
                       system_tokens=self.tokenizer.count_message(message) if message else 0)

    def _with_context(self, overhead: _Overhead, context: object) -> _Overhead:
        if context is not None and not isinstance(context, str):
            raise InvalidTypeError(f"context must be a str, not {type(context).__name__}")
        message = {"role": "system", "content": context} if context is not None else None
        return replace(overhead, context=message,
                       context_tokens=self.tokenizer.count_message(message) if message else 0)

    def _with_tools(self, overhead: _Overhead, tools: object) -> _Overhead:
        if tools is not None and not isinstance(tools, list):
            raise InvalidTypeError(f"tools must be a list of tool definitions, not {type(tools).__name__}")
        tokens = count_tools(tools, self.tokenizer)  # as OpenAI renders them (ctxwindow.tools)
        return replace(overhead, tools=tools, tool_tokens=tokens)

    def _with_notes(self, overhead: _Overhead) -> _Overhead:
        text = self.notes.render(self.tokenizer.count)
        message = {"role": "system", "content": text} if text else None
        return replace(overhead, notes=message,
                       notes_tokens=self.tokenizer.count_message(message) if message else 0)

    def _held_sources(self, entries: Iterable[Entry] | None = None) -> set[int]:
        """The seqs of the messages holding an instruction that are in the conversation
        verbatim (from ``entries``, else from the store: O(window))."""
        sources = {i.seq for i in self.standing_instructions.history if i.seq is not None}
        if not sources:
            return set()
        return {e.seq for e in (self._store.entries() if entries is None else entries)
                if e.seq in sources and e.kind == "message" and e.original is None}

    def _with_instructions(self, overhead: _Overhead) -> _Overhead:
        """The block of the instructions in force whose message is no longer in the
        conversation verbatim (evicted, summarized or rewritten: ``self._held`` says which are
        still there), and the reserve for the rest."""
        instructions = self.standing_instructions
        full = instructions.render(self.tokenizer.count)
        if full is None:
            return replace(overhead, instructions=None, instructions_tokens=0, instructions_reserve=0,
                           instructions_text="")
        held = self._held
        text = instructions.render(self.tokenizer.count, lambda i: i.seq is None or i.seq not in held)
        message = {"role": "system", "content": text} if text else None
        tokens = self.tokenizer.count_message(message) if message else 0
        full_tokens = self.tokenizer.count_message({"role": "system", "content": full})
        return replace(overhead, instructions=message, instructions_tokens=tokens,
                       instructions_reserve=max(full_tokens - tokens, 0), instructions_text=full)

    def set_system(self, system: str | None) -> None:
        """Sets (or removes, with None) the system prompt, counted once here; compacts if the
        window no longer fits. On overflow nothing changes."""
        overhead = self._with_system(self._overheads, system)
        self._transaction(lambda: self._set_overhead(overhead))

    def set_context(self, context: str | None) -> None:
        """Sets (or removes) dynamic context sent as a second system message after the prompt."""
        overhead = self._with_context(self._overheads, context)
        self._transaction(lambda: self._set_overhead(overhead))

    def set_tools(self, tools: list[dict[str, Any]] | None) -> None:
        """Sets the tool definitions (counted once here, as their JSON text)."""
        overhead = self._with_tools(self._overheads, tools)
        self._transaction(lambda: self._set_overhead(overhead))

    def _set_overhead(self, overhead: _Overhead) -> None:
        self._overheads = overhead
        self._fit()

    # --- accounting ----------------------------------------------------------------------

    def _total(self) -> int:
        first = self._store.first_role()
        placeholder = self._placeholder_tokens if first is not None and first != "user" else 0
        return self._overheads.tokens + self._store.tokens + placeholder

    def _limits(self, target: float, recall_room: bool = True) -> Limits:
        """The limits of a compaction; with ``recall_room``, room is kept for a full recall
        block (recall yields it when the protected content needs it)."""
        budget = self.prompt_budget
        overheads = self._overheads
        reserve = overheads.recall_reserve if recall_room else -overheads.recall_tokens
        return Limits(overheads.tokens + overheads.instructions_reserve + reserve
                      + self._placeholder_tokens,
                      math.floor(budget / self._calibration), math.floor(target * budget / self._calibration),
                      budget, self._calibration, self.preserve_recent)

    def _over(self, fraction: float) -> bool:
        return self._total() > math.floor(fraction * self.prompt_budget / self._calibration)

    @property
    def usage(self) -> Usage:
        """Tokens by component, utilization, zone and turns until red."""
        total = self._total()
        budget = self.prompt_budget
        history = self._store.tokens
        overheads = self._overheads
        by_component = {
            "system_prompt": (overheads.system_tokens + overheads.context_tokens + overheads.notes_tokens
                              + overheads.instructions_tokens),
            "tool_definitions": overheads.tool_tokens,
            "message_history": history - self._store.tool_tokens,
            "tool_results": self._store.tool_tokens,
            "memory_injection": overheads.recall_tokens,
            "output_reserved": self.reserve_output,
        }
        reading = self.pressure.last
        calibrated = math.ceil(total * self._calibration)
        return Usage(total, budget, budget - total, calibrated / budget,
                     self.pressure.zone if reading else "green", by_component,
                     reading.turns_until_red if reading else None,
                     self.max_tokens, self.reserve_output, self._calibration)

    @property
    def budget(self) -> TokenBudget:
        """The :class:`~ctxwindow.budget.TokenBudget` of the six components, brought up to date
        with the window when read (so a turn does not pay for it)."""
        overheads = self._overheads
        budget = self._budget
        budget.set_used("system_prompt", overheads.system_tokens + overheads.context_tokens
                        + overheads.notes_tokens + overheads.instructions_tokens)
        budget.set_used("tool_definitions", overheads.tool_tokens)
        budget.set_used("message_history", self._store.tokens - self._store.tool_tokens)
        budget.set_used("tool_results", self._store.tool_tokens)
        budget.set_used("memory_injection", overheads.recall_tokens)
        return budget

    def record_usage(self, prompt_tokens: int, completion_tokens: int | None = None) -> None:
        """Calibrates with what the provider billed for the last prompt: from now on the window
        keeps ``count x calibration`` within the budget, compacting now if needed, and the
        pressure monitor uses the reported count for this turn. Each report moves the
        calibration halfway to ``prompt_tokens / count``, bounded by :func:`calibration_bounds`:
        [1, 1.5] for an exact tokenizer (an exact count is never loosened), [0.5, 3] for an
        estimate (:class:`EstimateTokenizer`, :class:`HeuristicTokenizer`), which it may lower.
        ``prompt_tokens`` is the whole prompt as billed: with Anthropic, ``input_tokens +
        cache_read_input_tokens + cache_creation_input_tokens``. If the protected content no
        longer fits once calibrated, :class:`ContextOverflowError` and nothing changes."""
        check_int(prompt_tokens, "prompt_tokens", 0)
        if completion_tokens is not None:
            check_int(completion_tokens, "completion_tokens", 0)
        low, high = calibration_bounds(self.tokenizer.exact)

        def calibrate() -> None:
            estimate = self._total()
            if estimate > 0 and prompt_tokens > 0:
                ratio = min(max(prompt_tokens / estimate, low), high)
                self._calibration = 0.5 * self._calibration + 0.5 * ratio
            self._fit()
            self._after.append(report)

        def report() -> None:
            self.pressure.report(prompt_tokens)

        self._transaction(calibrate)

    # --- transactions ----------------------------------------------------------------------

    def _transaction(self, body: Callable[[], T]) -> T:
        """Runs ``body`` so that it either completes or changes nothing; then delivers the
        events it queued (callback errors re-raised after all were delivered, when
        ``raise_callback_errors``)."""
        if self._busy:
            raise WindowBusyError("this window is in the middle of another operation; the call changed nothing")
        self._busy = True
        savepoint = self._store.begin()
        saved = (self._calibration, self.tokens_added, self.compactions, self.evicted_messages,
                 self.last_compaction, self._overheads, list(self.notes.notes), self.settings,
                 self.standing_instructions.snapshot(), self._held,
                 self.cache.snapshot() if self.cache is not None else None)
        after, self._after = self._after, []
        self._archived = {}
        recall_mark = None
        if self.recall is not None:
            recall_mark = self.recall._mark()
            self._recall_pending, self._recall_query = [], None
        try:
            result = body()
            # Last steps: the originals the applied plans archived (nothing was stored before),
            # then what recall archives and brings back.
            if self._archived:
                put_groups(self.archive, self._archived)
            if self.recall is not None:
                self._refresh_recall(self.recall)
        except BaseException as error:
            if self.recall is not None and recall_mark is not None:
                self.recall._rollback(recall_mark)
                self._recall_pending, self._recall_query = [], None
            self._store.rollback(savepoint)
            (self._calibration, self.tokens_added, self.compactions, self.evicted_messages,
             self.last_compaction, self._overheads, notes, self.settings, instructions, self._held, cache) = saved
            self.notes.notes[:] = notes
            self.standing_instructions.reset(instructions)
            if self.cache is not None and cache is not None:
                self.cache.reset(cache)
            self._after = after
            self._busy = False
            if isinstance(error, ContextOverflowError):
                self._deliver([lambda: self.events.emit("on_overflow", error)], reraise=False)
            raise
        del savepoint
        self._store.release()
        queued, self._after = self._after, after
        self._busy = False
        self._deliver(queued, reraise=True)
        return result

    def _deliver(self, actions: list[Callable[[], None]], reraise: bool) -> None:
        first: BaseException | None = None
        for action in actions:
            try:
                action()
            except Exception as error:  # already logged and recorded by the event bus
                first = first or error
        if first is not None and reraise:
            raise first

    async def _atransaction(self, body: Callable[[], T]) -> T:
        """:meth:`_transaction` for async callers: a summarizer met while planning is awaited
        on this event loop, then the whole operation is planned again with its answer (so the
        window never holds a half-made state across an ``await``)."""
        answers: dict[Any, Any] = {}
        for _ in range(_MAX_AWAITS):
            if self._busy:
                raise WindowBusyError("this window is in the middle of another operation; the call changed nothing")
            self._answers, self._awaiting = answers, True
            try:
                return self._transaction(body)
            except NeedsAwait as need:
                call, timeout, key, is_async = need.call, need.timeout, need.key, need.is_async
            finally:
                self._answers, self._awaiting = {}, False
            self._busy = True  # no other call while the summary is awaited
            try:
                answers[key] = await await_summarizer(call, timeout, is_async)
            finally:
                self._busy = False
        raise InvalidArgumentError(f"one operation needed more than {_MAX_AWAITS} summaries")

    # --- adding ----------------------------------------------------------------------------

    def _prepare(self, message: object, pinned: object, where: str) -> tuple[Message, int, bool]:
        message = as_message(message)  # OpenAI SDK objects accepted wherever a dict is
        validate_message(message, where)
        if not isinstance(pinned, bool):
            raise InvalidTypeError(f"pinned must be a bool, not {type(pinned).__name__}")
        assert isinstance(message, Mapping)
        copy = copy_message(message)
        if copy["role"] in ("system", "developer"):
            raise MalformedMessageError(
                f"{where}: system prompts are set with system= or set_system(), not add()")
        try:
            tokens = self.tokenizer.count_message(copy)
        except MalformedMessageError as error:
            raise MalformedMessageError(f"{where}: {error}") from None
        return copy, tokens, pinned

    def add(self, message: MessageLike, *, pinned: bool = False) -> None:
        """Adds one message (counted once, now). ``pinned=True`` protects it (and its group)
        from eviction and rewriting. Raises :class:`MalformedMessageError` for a malformed
        message, a tool result that answers no open call, or a new message while tool calls wait
        for results; :class:`ContextOverflowError` when protected content alone would exceed the
        budget. On any error nothing changes."""
        prepared = self._prepare(message, pinned, "message")
        self._transaction(lambda: self._add(*prepared, where="message"))

    async def aadd(self, message: MessageLike, *, pinned: bool = False) -> None:
        """:meth:`add` for async code: summaries it triggers are awaited on this event loop."""
        prepared = self._prepare(message, pinned, "message")
        await self._atransaction(lambda: self._add(*prepared, where="message"))

    def extend(self, messages: Iterable[MessageLike]) -> None:
        """Adds messages in order, atomically: if one is refused (its index is named in the
        error), none is added."""
        prepared = [self._prepare(m, False, f"message {i}") for i, m in enumerate(messages)]
        self._transaction(lambda: self._extend(prepared))

    async def aextend(self, messages: Iterable[MessageLike]) -> None:
        """:meth:`extend` for async code."""
        prepared = [self._prepare(m, False, f"message {i}") for i, m in enumerate(messages)]
        await self._atransaction(lambda: self._extend(prepared))

    def _extend(self, prepared: list[tuple[Message, int, bool]]) -> None:
        for index, (message, tokens, pinned) in enumerate(prepared):
            self._add(message, tokens, pinned, where=f"message {index}")

    def _add(self, message: Message, tokens: int, pinned: bool, where: str) -> None:
        addition = self._store.prepare(message, tokens, pinned, where)
        self._store.apply(addition)
        self.tokens_added += tokens
        if message["role"] == "user" and self.standing_instructions.detect:
            if self.standing_instructions.observe(text_of(message), self._store.turn, addition.entry.seq):
                self._held = self._held | {addition.entry.seq}  # its message is in the conversation
                self._overheads = self._with_instructions(self._overheads)
        if addition.open_calls:
            self._check_pending()
        elif self._needs_compaction():
            self._compact("trigger", self.target)
        if message["role"] == "user" and self.recall is not None:
            self._recall_query = text_of(message)
        role = message["role"]
        if role == "assistant" and self.cache is not None:
            self.cache.observe_call(self._prefix_key())
        turn = self._store.turn
        if role == "user":
            self._after.append(lambda: self._turn_started(turn))
        elif role == "tool":
            self._after.append(lambda: self.events.emit("on_tool_result", message))
        elif role == "assistant" and not message.get("tool_calls"):
            self._after.append(lambda: self._turn_ended(turn))

    def _turn_started(self, turn: int) -> None:
        total = self._total()
        self._budget.record_turn(total)
        self.pressure.observe(total)
        self.events.emit("on_turn_start", turn)

    def _turn_ended(self, turn: int) -> None:
        if self.events.has("on_turn_end"):
            self.events.emit("on_turn_end", turn, self.usage)

    def _check_pending(self) -> None:
        """A held-back group must fit next to the protected content once complete."""
        limits = self._limits(1.0, recall_room=False)
        pending = self._store.pending_tokens
        if self._total() + self._placeholder_tokens + pending <= limits.budget:
            return  # everything fits, protected content a fortiori
        entries = self._store.entries()
        groups = self._store.protected_groups(entries, self.preserve_recent)
        protected = protected_tokens(entries, groups, limits, pending)
        if protected > limits.budget:
            raise ContextOverflowError(limits.needed(protected), self.prompt_budget,
                                       "protected content (a tool call group still waiting for results)")

    def _fit(self) -> None:
        """Compacts when over the trigger; the compaction raises :class:`ContextOverflowError`
        when the protected content cannot fit."""
        if self._needs_compaction():
            self._compact("trigger", self.target)

    # --- compaction ------------------------------------------------------------------------

    def compact(self, force: bool = False, *, target: float | None = None) -> CompactionResult:
        """Runs the strategies (cheapest first) and the last resort until the prompt is at or
        below ``target`` (default: the window's ``target``) of the budget.

        Without ``force`` it does nothing while the prompt is at or under ``trigger``; with
        ``force=True`` it compacts whatever the trigger, and does nothing when the prompt is
        already at or below the target (pass a lower ``target`` to free more room now).
        Idempotent: compacting a compacted window with the same settings changes nothing."""
        goal = self._compaction_target(target)
        if not force and not self._over(self.trigger):
            return self._nothing_to_do("below trigger")
        return self._transaction(lambda: self._compact("forced" if force else "compact", goal))

    def _nothing_to_do(self, reason: str) -> CompactionResult:
        total = self._total()
        return CompactionResult([], total, total, [], reason=reason)

    def _compaction_target(self, target: object) -> float:
        if target is None:
            return self.target
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 < target <= 1.0:
            raise InvalidArgumentError(f"target must be a number in (0, 1], got {target!r}")
        return float(target)

    async def acompact(self, force: bool = False, *, target: float | None = None) -> CompactionResult:
        """:meth:`compact` for async code: summaries are awaited on this event loop."""
        goal = self._compaction_target(target)
        if not force and not self._over(self.trigger):
            return self._nothing_to_do("below trigger")
        return await self._atransaction(lambda: self._compact("forced" if force else "compact", goal))

    def _compact(self, reason: str, target: float) -> CompactionResult:
        before = self._total()
        limits = self._limits(target)
        if before <= limits.target:
            return self._nothing_to_do("at or below target")
        before_text = self._window_text() if self.measure_fidelity else None
        gate = None
        if self.fidelity_gate:
            overheads = self._overheads
            gate = GateSettings(overhead_text([*overheads.messages, {"content": overheads.instructions_text}],
                                              overheads.tools), self.tokenizer.count)
        try:
            plan = plan_compaction(self._store, self.cascade, limits, self.tokenizer.count_message, self.archive,
                                   answers=self._answers, awaiting=self._awaiting, gate=gate)
        except ContextOverflowError:
            if not self._overheads.recall_reserve and not self._overheads.recall_tokens:
                raise
            # Recall yields its room to the protected content: plan without the block; the
            # next block gets the room that is left.
            self._overheads = replace(self._overheads, recall=None, recall_tokens=0, recall_reserve=0)
            limits = self._limits(target)
            plan = plan_compaction(self._store, self.cascade, limits, self.tokenizer.count_message, self.archive,
                                   answers=self._answers, awaiting=self._awaiting, gate=gate)
        removed = apply_plan(self._store, plan)
        evicted = [e.original or e.message for e in removed if e.kind == "message"]
        if self.recall is not None:
            self._recall_evicted(removed, plan.archived)
        if self._held:
            if plan.entries is None:  # a front cut: what it evicted is gone
                self._held = self._held - {e.seq for e in plan.evicted}
            else:
                self._held = self._held_sources(plan.entries)
            self._overheads = self._with_instructions(self._overheads)  # within the plan's reserve
        self._archived.update(plan.archived)
        after = self._total()
        reports = list(plan.reports)
        applied = [r.name for r in reports if r.changed]
        if evicted and "drop_oldest" not in applied and not any(
                r.evicted for r in reports if r.name != "drop_oldest"):
            applied.append("drop_oldest")
        fidelity = None
        if plan.gate is not None and (applied or evicted):
            fidelity = plan.gate.score
        elif before_text is not None and (applied or evicted):
            fidelity = key_fact_retention(before_text, self._window_text()).score
        result = CompactionResult(applied, before, after, evicted, reports, reason, fidelity, plan.gate)
        if applied or evicted:
            self.compactions += 1
            self.evicted_messages += len(evicted)
        self.last_compaction = result
        self._after.append(lambda: self._compacted(result))
        return result

    def _compacted(self, result: CompactionResult) -> None:
        usage = self.usage
        if result.evicted:
            self.events.emit("on_evict", result.evicted, usage)
        self.events.emit("on_compact", result)
        if self.events.has("on_status"):
            sentence = (f"context window at {usage.utilization:.0%} capacity "
                        f"({usage.total:,}/{usage.budget:,} tokens), "
                        + ("compaction applied" if result.applied else "nothing to compact"))
            self.events.emit("on_status", StatusEvent(sentence, usage.total, usage.budget,
                                                      usage.utilization, usage.zone))

    def _window_text(self) -> str:
        return "\n".join(text_of(m) + json.dumps(m.get("tool_calls") or "") for m in self._store.messages)

    @property
    def llm_strategy_names(self) -> set[str]:
        """Names of the configured strategies that call a model."""
        return {s.name for s in self.cascade.strategies if getattr(s, "cost", "free") == "llm"}

    # --- notes -----------------------------------------------------------------------------

    def write_note(self, category: str, text: str, importance: str = "normal") -> None:
        """Writes a note carried verbatim in every prompt (within the notes' token cap, critical
        first): categories task_progress, decisions, bugs, constraints, learnings, misc;
        importance critical, high, normal, low. If the prompt cannot fit with it,
        :class:`ContextOverflowError` and nothing changes."""

        def write() -> None:
            self.notes.write_note(category, text, importance)
            self._overheads = self._with_notes(self._overheads)
            self._fit()

        self._transaction(write)

    # --- standing instructions ---------------------------------------------------------------

    @property
    def instructions(self) -> list[Instruction]:
        """The user's standing instructions in force (detected in user messages as they are
        added, or added with :meth:`add_instruction`), in the order given; each is carried
        verbatim in a protected system message after the system prompt, within the block's token
        cap (``window.standing_instructions.max_tokens``; pinned ones always). Superseded and
        removed ones are in ``window.standing_instructions.history``."""
        return self.standing_instructions.current

    def add_instruction(self, text: str, *, pinned: bool = False) -> Instruction | None:
        """Adds a standing instruction verbatim (None when an identical one is in force); it
        supersedes earlier ones on the same subject, unless they are pinned. If the prompt
        cannot fit with it, :class:`ContextOverflowError` and nothing changes."""
        return self._transaction(lambda: self._change_instructions(
            lambda: self.standing_instructions.add(text, self.turn, pinned=pinned)))

    def pin_instruction(self, instruction_id: int, pinned: bool = True) -> Instruction:
        """Pins (or unpins) an instruction in force: pinned ones are always carried (whatever
        the cap) and never superseded by later instructions."""
        return self._transaction(lambda: self._change_instructions(
            lambda: self.standing_instructions.pin(instruction_id, pinned)))

    def remove_instruction(self, instruction_id: int) -> Instruction:
        """Removes an instruction from the prompt (it stays in the history, as superseded by
        itself)."""
        return self._transaction(lambda: self._change_instructions(
            lambda: self.standing_instructions.remove(instruction_id)))

    def _change_instructions(self, change: Callable[[], T]) -> T:
        result = change()
        self._overheads = self._with_instructions(self._overheads)
        self._fit()
        return result

    # --- output ----------------------------------------------------------------------------

    def messages(self) -> list[dict[str, Any]]:
        """What to send now: system first, then the conversation; fits the budget.

        The list is new; the conversation's message dicts in it are the window's own (copying
        them on every turn would cost more than the rest of the turn), so treat them as
        read-only: copy a message before changing it. The window keeps its own copy of every
        message added, so changing the dict you passed to ``add`` changes nothing inside."""
        out: list[dict[str, Any]] = [dict(m) for m in self._overheads.messages]
        first = self._store.first_role()
        if first is not None and first != "user":
            out.append(dict(PLACEHOLDER_USER))
        out.extend(self._store.messages)
        return out

    # --- checkpoints -----------------------------------------------------------------------

    def checkpoint(self, goal: str, **fields: Any) -> TaskCheckpoint:
        """A :class:`~ctxwindow.checkpoint.TaskCheckpoint` of the task with this window's state,
        so :meth:`resume` restores ``messages()`` exactly. It is based on the version this
        window last saved or resumed (a store updates the checkpoint it saves), so periodic
        ``store.save(window.checkpoint(goal))`` calls succeed."""
        from ctxwindow.checkpoint import TaskCheckpoint

        state = WindowState(
            entries=[entry_to_dict(e) for e in self._store.entries()],
            pending=[entry_to_dict(e) for e in self._store.pending],
            open_calls=sorted(self._store.open_calls), seq=self._store.seq, turn=self._store.turn,
            calibration=self._calibration,
            notes=[{"category": n.category, "text": n.text, "importance": n.importance} for n in self.notes.notes],
            archive=self.archive.to_dict() if isinstance(self.archive, Archive) else None,
            system=self._overheads.system["content"] if self._overheads.system else None,
            context=self._overheads.context["content"] if self._overheads.context else None,
            tools=self._overheads.tools, reserve_output=self.reserve_output,
            instructions=self.standing_instructions.to_list())
        fields.setdefault("version", self._last_checkpoint.version if self._last_checkpoint else 0)
        checkpoint = TaskCheckpoint(goal=goal, window_state=state.to_dict(), **fields)
        self._last_checkpoint = checkpoint
        return checkpoint

    def restore(self, checkpoint: TaskCheckpoint) -> None:
        """Restores the state of :meth:`checkpoint` into this window: conversation, pending tool
        calls, notes, standing instructions, archive, system prompt, context, tools, output reserve and calibration.
        Messages are recounted with this window's tokenizer; if the state does not fit this
        window's budget it is compacted, and if it cannot fit, nothing changes."""
        state = WindowState.from_dict(checkpoint.window_state, self.reserve_output)

        def entry(data: dict[str, Any]) -> Entry:
            return entry_from_dict(data, self.tokenizer.count_message(data["message"]))

        settings = replace(self.settings, reserve_output=state.reserve_output)
        overhead = self._with_tools(self._with_context(self._with_system(_Overhead(), state.system),
                                                       state.context), state.tools)
        if self.recall is not None:  # the block is made again at the next user message
            overhead = replace(overhead, recall_reserve=self.recall.max_tokens)
        try:
            entries = [entry(e) for e in state.entries]
            pending = [entry(e) for e in state.pending]
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidArgumentError(f"the checkpoint's window state is malformed: {error}") from None
        conversation = [e.message for e in entries]
        if conversation and conversation[0].get("role") != "user":
            conversation.insert(0, PLACEHOLDER_USER)
        problems = check_history(conversation + [e.message for e in pending], pending_tail=bool(pending))
        open_calls = (set(tool_call_ids(pending[0].message))
                      - {str(e.message.get("tool_call_id")) for e in pending[1:]}) if pending else set()
        if open_calls != set(state.open_calls) or (pending and not open_calls):
            problems.append("the open calls do not match the pending tool-call group")
        if problems:
            raise InvalidArgumentError("the checkpoint's window state is not a valid conversation: "
                                       + "; ".join(problems))

        def load() -> None:
            self.settings = settings
            self.notes.notes.clear()
            for note in state.notes:
                self.notes.write_note(note["category"], note["text"], note["importance"])
            self.standing_instructions.load(state.instructions)
            self._store.restore(entries, pending, state.open_calls, state.seq, state.turn)
            self._held = self._held_sources(entries)
            self._overheads = self._with_instructions(self._with_notes(overhead))
            low, high = calibration_bounds(self.tokenizer.exact)  # another counter's may be wider
            self._calibration = min(max(state.calibration, low), high)
            self._fit()
            if state.archive is not None and isinstance(self.archive, Archive):
                self.archive.restore(state.archive)  # last: it cannot fail

        self._transaction(load)
        self.pressure.budget_tokens = self.prompt_budget
        self._last_checkpoint = checkpoint

    def resume(self, store: Any, session_id: str = "default") -> TaskCheckpoint | None:
        """Loads the newest checkpoint of ``session_id`` from a checkpoint store and restores
        it into this window; returns it (None when the session has none)."""
        checkpoint: TaskCheckpoint | None = store.load(session_id)
        if checkpoint is not None:
            self.restore(checkpoint)
        return checkpoint

    def save_checkpoint(self, store: Any, goal: str, session_id: str = "default", **fields: Any) -> int:
        """``store.save(self.checkpoint(goal, **fields), session_id)``: the stored version."""
        version: int = store.save(self.checkpoint(goal, **fields), session_id)
        return version

    def pending_messages(self) -> list[Message]:
        """The tool-call group waiting for results (held back from ``messages()``)."""
        return [copy_message(e.message) for e in self._store.pending]

    def retrieve(self, retrieval_id: str) -> list[Message] | None:
        """The original messages behind a placeholder's retrieval id, or None."""
        return self.archive.get(retrieval_id)

    # --- recall ----------------------------------------------------------------------------

    def _recall_evicted(self, removed: Iterable[Entry], archived: Mapping[str, list[Message]]) -> None:
        """Queues what a compaction took out of the conversation for the recall archive: the
        evicted groups (originals of rewritten messages) and the originals it archived."""
        groups: dict[int, tuple[list[Message], int, int]] = {}
        for e in removed:
            if e.kind != "message":
                continue
            if e.group in groups:
                groups[e.group][0].append(e.original or e.message)
            else:
                groups[e.group] = ([e.original or e.message], e.seq, e.turn)
        self._recall_pending.extend(groups.values())
        self._recall_pending.extend((list(group), None, None) for group in archived.values())

    def _present_keys(self) -> set[Any]:
        """What identifies each message of the conversation verbatim (O(window))."""
        return {message_key(m) for m in self._store.messages}

    def _refresh_recall(self, recall: Recall) -> None:
        """The last step of an operation: archive what it evicted and, when it added a user
        message, make the recall block for it (within the reserve compactions kept for it)."""
        if self._recall_pending:
            pending, self._recall_pending = self._recall_pending, []
            recall.ingest(pending, self.tokenizer.count_many)
        query, self._recall_query = self._recall_query, None
        if query is None:
            return
        overheads = self._overheads
        room = math.floor(self.prompt_budget / self._calibration) - (self._total() - overheads.recall_tokens)
        limit = min(recall.max_tokens, room)
        message, tokens, _ = recall.block(query, self.tokenizer.count, self.tokenizer.count_message,
                                          self._present_keys(), limit)
        self._overheads = replace(overheads, recall=message, recall_tokens=tokens,
                                  recall_reserve=recall.max_tokens - tokens)

    def handle_recall_call(self, arguments: str | Mapping[str, Any]) -> str:
        """Answers the model's call of the :meth:`Recall.tool_schema` tool. ``arguments`` is
        the call's JSON text (or a mapping): ``{"query": "..."}`` returns the best archived
        groups not in the window now, each under its retrieval id, within the recall's
        ``max_tokens``; ``{"id": "ctx-..."}`` returns the whole group with that retrieval id
        (recall's archive, then the placeholders' archive). Malformed arguments raise
        :class:`InvalidArgumentError` saying what is wrong (return its message to the model);
        the window does not change."""
        query, rid = parse_recall_arguments(arguments)
        if rid is not None:
            group = self.recall.get(rid) if self.recall is not None else None
            if group is None:
                group = self.archive.get(rid)
            if group is None:
                return f"No archived messages with id {rid[:80]}."
            return f"--- {rid}\n{render_group(group)}"
        assert query is not None
        if self.recall is None:
            raise InvalidArgumentError("this window has no recall archive to search: pass recall=Recall(...)")
        sections, used = [], 0
        for hit in self.recall._hits(query, self.recall.k, self._present_keys()):
            section = f"--- {hit.retrieval_id}\n{render_group(hit.messages)}"
            tokens = self.tokenizer.count(section)
            if used + tokens > self.recall.max_tokens:
                sections.append(f"--- {hit.retrieval_id}: {tokens} tokens, too long to show here; ask for it by id")
                continue
            sections.append(section)
            used += tokens
        if not sections:
            shown = query if len(query) <= 80 else query[:80] + "..."
            return f"Nothing archived matches {shown!r}."
        return "\n".join(sections)

    def pressure_reading(self) -> PressureReading | None:
        """The latest pressure reading."""
        return self.pressure.last

    def __len__(self) -> int:
        """Number of conversation messages in the window (system prompt and held-back tool
        calls excluded)."""
        return len(self._store)

    def __repr__(self) -> str:
        usage = self.usage
        return (f"ContextWindow(model={self.model!r}, messages={len(self)}, "
                f"total={usage.total}, budget={usage.budget}, zone={usage.zone!r})")

    # --- keeping in step with a history kept elsewhere ---------------------------------------

    def sync(self, messages: Iterable[MessageLike]) -> None:
        """Makes the window hold exactly ``messages`` (the full history an agent framework keeps),
        counting only what is new since the last ``sync``: the common prefix is recognised by a
        C-level comparison of the list with the previous one (a pointer comparison per message
        when the same objects come back), an edited or shortened history is rebuilt from its
        first difference, and system messages become the system prompt. Atomic: on any error
        nothing changes. See :mod:`ctxwindow.sync`."""
        sync_window(self, messages)

    # --- the cache-aware schedule (see ctxwindow.cache) ----------------------------------------

    def _prefix_key(self) -> tuple[Any, ...]:
        """A value that changes exactly when something sent before the conversation changes."""
        overheads = self._overheads
        return (*(m["content"] for m in overheads.messages), overheads.tool_tokens, id(overheads.tools))

    def _needs_compaction(self) -> bool:
        """Past the trigger: with ``cache="off"`` always; with ``cache="auto"`` above the budget
        always (the budget never yields to cost), else when the compaction pays for itself."""
        if not self._over(self.trigger):
            return False
        if self.cache is None or self._over(1.0):
            return True
        after = math.floor(self.target * self.prompt_budget / self._calibration)
        growth = self.tokens_added / max(self.cache.calls, 1)
        stable = self._overheads.tokens  # the blocks before the conversation stay cached
        return self.cache.compaction_pays(self._total(), after, self._prefix_key(), growth, stable)

    # --- sub-agent delegation (see ctxwindow.delegate) ------------------------------------------

    def delegate(self, task: str, run: RunFunction, *, max_result_tokens: int = 500, max_tokens: int | None = None,
                 reserve_output: int | None = None, system: str | None = None,
                 checkpoint: TaskCheckpoint | None = None, tool_call_id: str | None = None,
                 condense: Callable[[str, int], str] | None = None) -> DelegationResult:
        """Runs ``task`` in a child window with a fresh budget (``max_tokens``, default this
        window's) and adds one condensed result message here, within ``max_result_tokens``.

        ``run(child)`` gets the child window (bootstrapped with this window's resume text and the
        task) and returns the result as a str or as messages (the last assistant text is the
        result); an async ``run`` is awaited (outside a running event loop; inside one use
        :meth:`adelegate`). The result is an assistant message, or the tool result of
        ``tool_call_id``; the child's whole transcript is archived and its id, named in the
        message, resolves with :meth:`retrieve`. Events ``on_delegate_start`` and
        ``on_delegate_end``. If anything fails, this window is unchanged and the error propagates.
        Returns a :class:`ctxwindow.delegate.DelegationResult`.

        >>> window = ContextWindow("gpt-4o", max_tokens=4_000)
        >>> window.add({"role": "user", "content": "Summarise the logs."})
        >>> result = window.delegate("read the logs", lambda child: "3 errors, all timeouts")
        >>> window.retrieve(result.transcript_id)[-1]["content"]
        '3 errors, all timeouts'
        """
        from ctxwindow.delegate import delegate

        return delegate(self, task, run, max_result_tokens=max_result_tokens, max_tokens=max_tokens,
                        reserve_output=reserve_output, system=system, checkpoint=checkpoint,
                        tool_call_id=tool_call_id, condense=condense)

    async def adelegate(self, task: str, run: RunFunction, *, max_result_tokens: int = 500, max_tokens: int | None = None,
                        reserve_output: int | None = None, system: str | None = None,
                        checkpoint: TaskCheckpoint | None = None, tool_call_id: str | None = None,
                        condense: Callable[[str, int], str] | None = None) -> DelegationResult:
        """:meth:`delegate` for async code: an async ``run`` is awaited on this event loop."""
        from ctxwindow.delegate import adelegate

        return await adelegate(self, task, run, max_result_tokens=max_result_tokens, max_tokens=max_tokens,
                               reserve_output=reserve_output, system=system, checkpoint=checkpoint,
                               tool_call_id=tool_call_id, condense=condense)
