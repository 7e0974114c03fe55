"""The operations of a window on its parts: accounting, adding, fitting and compaction.

:class:`Engine` holds the parts a ``ContextWindow`` wires together (the conversation store, the
prompt blocks, the ledger of counters, the unit of work, the strategies, instructions, recall and
cache) and runs the steps every operation is made of, always inside the window's unit of work:

- accounting: the prompt's total (blocks + conversation + the placeholder user message the
  window inserts when the conversation does not start with one), the limits of a compaction, the
  prompt by component;
- adding a prepared message: the store takes it (a tool-call group waits until complete),
  standing instructions are detected in user messages, and the window is fitted;
- fitting: past ``trigger`` (and, with the cache-aware schedule, when the compaction pays for
  itself, always above the budget) a compaction is planned, checked and applied; what it removed
  goes to recall, what it archived to the archive at commit, and the events after commit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import EllipsisType
from typing import Any, Generic, TypeVar

from ctxwindow.archive import Archive, MessageArchive, put_groups
from ctxwindow.blocks import PromptBlocks, check_message_text
from ctxwindow.budget import TokenBudget
from ctxwindow.cache import CacheSchedule
from ctxwindow.compaction import (CompactionResult, GateSettings, Limits, Plan, announce, apply_plan,
                                  compaction_result, plan_compaction, protected_tokens)
from ctxwindow.config import WindowSettings
from ctxwindow.conversation import ConversationStore
from ctxwindow.errors import ContextOverflowError, InvalidArgumentError, InvalidTypeError, MalformedMessageError
from ctxwindow.events import EventBus
from ctxwindow.fidelity import key_fact_retention
from ctxwindow.gate import overhead_text
from ctxwindow.instructions import StandingInstructions
from ctxwindow.messages import PLACEHOLDER_USER, Message, copy_message, text_of, validate_message
from ctxwindow.pressure import PressureMonitor
from ctxwindow.recall import Recall
from ctxwindow.recall_link import RecallLink
from ctxwindow.state import WindowState, calibration_bounds, entry_to_dict
from ctxwindow.strategies import Cascade, Entry, Notes
from ctxwindow.sync import Prepared, as_message
from ctxwindow.tokenizer import TokenCounter
from ctxwindow.unit_of_work import Savepoints, UnitOfWork

__all__ = ["Engine", "Ledger", "Prepared", "Read", "Usage"]

T = TypeVar("T")


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


class Read(Generic[T]):
    """A read-only attribute computed from the object it is read on (a typed ``property``
    in one line)."""

    def __init__(self, get: Callable[[Any], T], doc: str) -> None:
        self._get, self.__doc__ = get, doc

    def __get__(self, instance: Any, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]  # the descriptor itself, read on the class
        return self._get(instance)


class Ledger:
    """The window's counters and settings that operations change (a participant of its unit of
    work). ``held``: seqs of the messages holding an instruction still in the conversation
    verbatim; ``revision``: changes whenever a message is added by anything."""

    FIELDS = ("settings", "calibration", "tokens_added", "compactions", "evicted_messages", "last_compaction",
              "held", "revision")
    __slots__ = FIELDS

    def __init__(self, settings: WindowSettings) -> None:
        self.settings, self.calibration, self.tokens_added = settings, 1.0, 0
        self.compactions = self.evicted_messages = self.revision = 0
        self.last_compaction: CompactionResult | None = None
        self.held: frozenset[int] = frozenset()

    def savepoint(self) -> tuple[Any, ...]:
        """Every field's value."""
        return tuple(getattr(self, name) for name in self.FIELDS)

    def rollback(self, savepoint: tuple[Any, ...]) -> None:
        """Every field back to its value in ``savepoint``."""
        for name, value in zip(self.FIELDS, savepoint):
            setattr(self, name, value)


@dataclass
class Engine:
    """The operations of one window on its parts; see the module documentation."""

    counter: TokenCounter
    store: ConversationStore
    blocks: PromptBlocks
    ledger: Ledger
    unit: UnitOfWork
    cascade: Cascade
    archive: MessageArchive
    instructions: StandingInstructions
    notes: Notes
    events: EventBus
    pressure: PressureMonitor
    budget: TokenBudget
    cache: CacheSchedule | None
    fidelity_gate: bool
    recall: RecallLink | None = None
    #: Measure key-fact retention at each compaction (a HealthMonitor turns it on).
    measure_fidelity: bool = False
    placeholder_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.placeholder_tokens = self.counter.count_message(PLACEHOLDER_USER)

    def wire(self, system: str | None, context: str | None, tools: list[dict[str, Any]] | None,
             recall: Recall | None, reset_notes: Callable[[list[Any]], None]) -> None:
        """Registers the parts with the unit of work (in this order: store, blocks, ledger, notes,
        instructions, cache, recall) and sets the blocks; :class:`ContextOverflowError` when they
        alone exceed the prompt budget."""
        store, blocks, unit, standing = self.store, self.blocks, self.unit, self.instructions
        for participant in (Savepoints(store.begin, store.rollback, store.release), blocks, self.ledger,
                            Savepoints(lambda: list(self.notes.notes), reset_notes),
                            Savepoints(standing.snapshot, standing.reset)):
            unit.register(participant)
        if self.cache is not None:
            unit.register(Savepoints(self.cache.snapshot, self.cache.reset))
        if recall is not None:
            self.recall = RecallLink(recall, blocks, self.counter, unit, lambda: store.messages, self.recall_room)
            unit.register(self.recall)
            blocks.reserve_recall(recall.max_tokens)
        for kind, text in (("system", system), ("context", context)):
            if text is not None:
                blocks.set_text(kind, text)
        blocks.set_tools(tools)
        blocks.set_notes(self.notes)
        self.refresh_instructions()
        needed, budget = blocks.tokens + blocks.reserved + self.placeholder_tokens, self.ledger.settings.prompt_budget
        if needed > budget:
            raise ContextOverflowError(needed, budget, "the system prompt, context and tool definitions alone"
                                       + (" with room for recall's max_tokens" if recall is not None else ""))

    # --- accounting ---------------------------------------------------------------------------

    def total(self) -> int:
        """The prompt's counted tokens: blocks, conversation, and the placeholder user message."""
        first = self.store.first_role()
        return (self.blocks.tokens + self.store.tokens
                + (self.placeholder_tokens if first is not None and first != "user" else 0))

    def limits(self, target: float, recall_room: bool = True) -> Limits:
        """The limits of a compaction; with ``recall_room``, room is kept for a full recall block
        (recall yields it when the protected content needs it)."""
        settings, calibration, state = self.ledger.settings, self.ledger.calibration, self.blocks.state
        budget = settings.prompt_budget
        reserve = state.recall_reserve if recall_room else -state.tokens_of("recall")
        return Limits(state.tokens + state.instructions_reserve + reserve + self.placeholder_tokens,
                      math.floor(budget / calibration), math.floor(target * budget / calibration),
                      budget, calibration, settings.preserve_recent)

    def over(self, fraction: float) -> bool:
        """Whether the calibrated prompt is past ``fraction`` of the budget."""
        return self.total() > math.floor(fraction * self.ledger.settings.prompt_budget / self.ledger.calibration)

    def by_component(self) -> dict[str, int]:
        """The prompt by budget component."""
        return self.blocks.by_component(history=self.store.tokens, tool_results=self.store.tool_tokens,
                                        reserve_output=self.ledger.settings.reserve_output)

    def usage(self) -> Usage:
        """Tokens by component, utilization, zone and turns until red."""
        total, settings, calibration = self.total(), self.ledger.settings, self.ledger.calibration
        budget, reading = settings.prompt_budget, self.pressure.last
        return Usage(total, budget, budget - total, math.ceil(total * calibration) / budget,
                     self.pressure.zone if reading else "green", self.by_component(),
                     reading.turns_until_red if reading else None, settings.max_tokens, settings.reserve_output,
                     calibration)

    def recall_room(self) -> int:
        """The tokens a recall block may use now."""
        return (math.floor(self.ledger.settings.prompt_budget / self.ledger.calibration)
                - (self.total() - self.blocks.state.tokens_of("recall")))

    # --- adding ---------------------------------------------------------------------------------

    def prepare(self, message: object, where: str, pinned: bool) -> Prepared:
        """A message validated, copied and counted (``where`` names it in errors); changes nothing."""
        message = as_message(message)  # OpenAI SDK objects accepted wherever a dict is
        validate_message(message, where)
        if not isinstance(pinned, bool):
            raise InvalidTypeError(f"pinned must be a bool, not {type(pinned).__name__}")
        assert isinstance(message, Mapping)
        check_message_text(message, where)
        copy = copy_message(message)
        if copy["role"] in ("system", "developer"):
            raise MalformedMessageError(f"{where}: system prompts are set with system= or set_system(), not add()")
        try:
            tokens = self.counter.count_message(copy)
        except MalformedMessageError as error:
            raise MalformedMessageError(f"{where}: {error}") from None
        return Prepared(copy, tokens, pinned, where)

    def apply(self, prepared: Sequence[Prepared], archive: Mapping[str, list[Message]] | None,
              system: str | None | EllipsisType, reset: bool) -> None:
        """The body of ``ContextWindow.add_prepared`` (inside the unit of work); ``system`` is the
        new system prompt, or ``...`` to keep it."""
        if system is not ... and system != self.blocks.text("system"):
            self.changed(self.blocks.set_text, "system", system)
        decided = self.clear_conversation() if reset else None
        self.extend(prepared)
        if decided:
            self.instructions.reapply(decided)
            self.changed(self.refresh_instructions)
        if archive:
            groups = dict(archive)
            self.unit.defer("archive", lambda: put_groups(self.archive, groups))

    def calibrate(self, prompt_tokens: int, exact: bool) -> None:
        """Moves the calibration halfway to ``prompt_tokens`` over the count, within its bounds,
        and fits the window (inside the unit of work)."""
        low, high = calibration_bounds(exact)
        estimate, ledger = self.total(), self.ledger
        if estimate > 0 and prompt_tokens > 0:
            ledger.calibration = 0.5 * ledger.calibration + 0.5 * min(max(prompt_tokens / estimate, low), high)
        self.fit()

        def report() -> None:
            self.pressure.report(prompt_tokens)

        self.unit.defer("events", report)

    def refresh_instructions(self) -> None:
        """The instructions block again, from the instructions in force and the messages held."""
        self.blocks.set_instructions(self.instructions, self.ledger.held.__contains__)

    def changed(self, change: Callable[..., T], *args: Any) -> T:
        """Runs ``change`` and fits the window."""
        result = change(*args)
        self.fit()
        return result

    def extend(self, prepared: Sequence[Prepared]) -> None:
        """Adds prepared messages in order."""
        for item in prepared:
            self.add(item)

    def add(self, prepared: Prepared) -> None:
        """Adds one prepared message and fits the window."""
        message, tokens, store, ledger = prepared.message, prepared.tokens, self.store, self.ledger
        addition = store.prepare(message, tokens, prepared.pinned, prepared.where)
        store.apply(addition)
        role = message["role"]
        ledger.tokens_added += tokens
        ledger.revision += 1
        if role == "user" and self.instructions.detect:
            if self.instructions.observe(text_of(message), store.turn, addition.entry.seq):
                ledger.held = ledger.held | {addition.entry.seq}  # its message is in the conversation
                self.refresh_instructions()
        if addition.open_calls:
            self.check_pending()
        else:
            self.fit()
        if role == "user" and self.recall is not None:
            self.recall.ask(text_of(message))
        if role == "assistant" and self.cache is not None:
            self.cache.observe_call(self.blocks.prefix_key())
        turn, defer, events = store.turn, self.unit.defer, self.events
        if role == "user":
            defer("events", lambda: self.turn_started(turn))
        elif role == "tool":
            defer("events", lambda: events.emit("on_tool_result", message))
        elif role == "assistant" and not message.get("tool_calls") and events.has("on_turn_end"):
            defer("events", lambda: events.emit("on_turn_end", turn, self.usage()))

    def turn_started(self, turn: int) -> None:
        """A user turn began: budget and pressure see the prompt, then ``on_turn_start``."""
        total = self.total()
        self.budget.record_turn(total)
        self.pressure.observe(total)
        self.events.emit("on_turn_start", turn)

    def clear_conversation(self) -> dict[str, bool]:
        """Empties the conversation and forgets the instructions detected in it; returns the
        removals and pins to apply again (``StandingInstructions.forget_detected``)."""
        store = self.store
        store.restore([], (), (), store.seq, 0)
        self.ledger.held = frozenset()
        decided = self.instructions.forget_detected()
        self.refresh_instructions()
        return decided

    def check_pending(self) -> None:
        """A held-back group must fit next to the protected content once complete."""
        limits, pending = self.limits(1.0, recall_room=False), self.store.pending_tokens
        if self.total() + self.placeholder_tokens + pending <= limits.budget:
            return  # everything fits, protected content a fortiori
        entries = self.store.entries()
        groups = self.store.protected_groups(entries, self.ledger.settings.preserve_recent)
        protected = protected_tokens(entries, groups, limits, pending)
        if protected > limits.budget:
            raise ContextOverflowError(limits.needed(protected), limits.real_budget,
                                       "protected content (a tool call group still waiting for results)")

    # --- fitting and compaction -------------------------------------------------------------------

    def fit(self) -> None:
        """Compacts when past the trigger (with the cache-aware schedule, when it pays for itself,
        and always above the budget); :class:`ContextOverflowError` when the protected content
        cannot fit."""
        settings = self.ledger.settings
        if not self.over(settings.trigger):
            return
        if self.cache is not None and not self.over(1.0):
            after = math.floor(settings.target * settings.prompt_budget / self.ledger.calibration)
            growth = self.ledger.tokens_added / max(self.cache.calls, 1)
            if not self.cache.compaction_pays(self.total(), after, self.blocks.prefix_key(), growth,
                                              self.blocks.tokens):
                return
        self.compact("trigger", settings.target)

    def nothing_to_do(self, reason: str) -> CompactionResult:
        """A result that changed nothing."""
        total = self.total()
        return CompactionResult([], total, total, [], reason=reason)

    def compaction_target(self, target: object) -> float:
        """``target`` checked (None: the window's)."""
        if target is None:
            return self.ledger.settings.target
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 < target <= 1.0:
            raise InvalidArgumentError(f"target must be a number in (0, 1], got {target!r}")
        return float(target)

    def plan(self, limits: Limits, gate: GateSettings | None) -> Plan:
        """A checked compaction plan towards ``limits``."""
        return plan_compaction(self.store, self.cascade, limits, self.counter.count_message, self.archive,
                               answers=self.unit.answers, awaiting=self.unit.awaiting, gate=gate)

    def compact(self, reason: str, target: float) -> CompactionResult:
        """Plans, checks and applies a compaction down to ``target`` of the budget."""
        before, limits, blocks, ledger = self.total(), self.limits(target), self.blocks, self.ledger
        if before <= limits.target:
            return self.nothing_to_do("at or below target")
        before_text = self.window_text() if self.measure_fidelity else None
        gate = (GateSettings(overhead_text(blocks.gate_messages(), blocks.tools), self.counter.count)
                if self.fidelity_gate else None)
        try:
            planned = self.plan(limits, gate)
        except ContextOverflowError:
            if not blocks.state.recall_reserve and not blocks.state.tokens_of("recall"):
                raise
            # Recall yields its room to the protected content; the next block gets what is left.
            blocks.drop_recall()
            planned = self.plan(self.limits(target), gate)
        removed = apply_plan(self.store, planned)
        evicted = [e.original or e.message for e in removed if e.kind == "message"]
        if self.recall is not None:
            self.recall.evicted(removed, planned.archived)
        if ledger.held:
            ledger.held = (ledger.held - {e.seq for e in planned.evicted} if planned.entries is None
                           else self.held_sources(planned.entries))
            self.refresh_instructions()  # within the plan's reserve
        if planned.archived:
            self.unit.defer("archive", lambda: put_groups(self.archive, planned.archived))
        measure = ((lambda: key_fact_retention(before_text, self.window_text()).score)
                   if before_text is not None else None)
        result = compaction_result(planned, evicted, before, self.total(), reason, measure)
        if result.applied or evicted:
            ledger.compactions += 1
            ledger.evicted_messages += len(evicted)
        ledger.last_compaction = result
        self.unit.defer("events", lambda: announce(self.events, result, self.usage()))
        return result

    def held_sources(self, entries: Iterable[Entry]) -> frozenset[int]:
        """The seqs of the messages holding an instruction that are in ``entries`` verbatim."""
        sources = {i.seq for i in self.instructions.history if i.seq is not None}
        return frozenset(e.seq for e in entries if e.seq in sources and e.kind == "message" and e.original is None)

    def window_text(self) -> str:
        """The conversation as one text (for key-fact retention)."""
        return "\n".join(text_of(m) + json.dumps(m.get("tool_calls") or "") for m in self.store.messages)

    # --- checkpoints ------------------------------------------------------------------------------

    def capture(self) -> WindowState:
        """The window's state, for ``ContextWindow.checkpoint``."""
        store, blocks = self.store, self.blocks
        return WindowState(
            entries=[entry_to_dict(e) for e in store.entries()], pending=[entry_to_dict(e) for e in store.pending],
            open_calls=sorted(store.open_calls), seq=store.seq, turn=store.turn, calibration=self.ledger.calibration,
            notes=[{"category": n.category, "text": n.text, "importance": n.importance} for n in self.notes.notes],
            archive=self.archive.to_dict() if isinstance(self.archive, Archive) else None,
            system=blocks.text("system"), context=blocks.text("context"), tools=blocks.tools,
            reserve_output=self.ledger.settings.reserve_output, instructions=self.instructions.to_list())

    def load(self, state: WindowState, entries: Sequence[Entry], pending: Sequence[Entry], exact: bool) -> None:
        """Loads a checked state (``ContextWindow.restore``, inside the unit of work) and fits it."""
        ledger, blocks = self.ledger, self.blocks
        ledger.settings = replace(ledger.settings, reserve_output=state.reserve_output)
        ledger.revision += 1
        self.notes.notes.clear()
        for note in state.notes:
            self.notes.write_note(note["category"], note["text"], note["importance"])
        self.instructions.load(state.instructions)
        self.store.restore(entries, pending, state.open_calls, state.seq, state.turn)
        ledger.held = self.held_sources(entries)
        blocks.set_text("system", state.system)
        blocks.set_text("context", state.context)
        blocks.set_tools(state.tools)
        if self.recall is not None:  # the block is made again at the next user message
            blocks.reserve_recall(self.recall.recall.max_tokens)
        blocks.set_notes(self.notes)
        self.refresh_instructions()
        low, high = calibration_bounds(exact)  # another counter's may be wider
        ledger.calibration = min(max(state.calibration, low), high)
        self.fit()
        if state.archive is not None and isinstance(self.archive, Archive):
            self.archive.restore(state.archive)  # last: it cannot fail
