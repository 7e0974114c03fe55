"""``ContextWindow``: the object an agent talks to every turn.

>>> from ctxwindow import ContextWindow
>>> window = ContextWindow("gpt-4o", max_tokens=2_000, system="You are terse.")
>>> window.add({"role": "user", "content": "hello"})
>>> [m["role"] for m in window.messages()]
['system', 'user']

The window is wiring; each concern has its home. The conversation lives in one store of whole
groups (:mod:`ctxwindow.conversation`), each message counted once, when added, so a turn costs the
same whatever the length of the conversation; the blocks around it (system prompt, standing
instructions, context, notes, recall, tools) in :mod:`ctxwindow.blocks`; accounting, adding and
compaction in :mod:`ctxwindow.engine` (past ``trigger`` of ``max_tokens - reserve_output`` the
strategies run cheapest first down to ``target``, and the last resort drops the oldest whole
groups: plan, check, apply in :mod:`ctxwindow.compaction`); the transaction in
:mod:`ctxwindow.unit_of_work`: every operation completes or, on any exception, leaves the window
exactly as it was, and events fire once the new state is final.

Protected content (the system prompt, pinned messages, the newest user message and the last
``preserve_recent`` messages with their groups) is never evicted or altered; if it alone exceeds
the budget, :class:`~ctxwindow.ContextOverflowError` says by how much. ``messages()`` is always
valid for the providers and within the budget, also once multiplied by the calibration that
``record_usage`` learns. A summary by a language model runs inside the ``add`` that triggers it;
:meth:`ContextWindow.aadd` and :meth:`ContextWindow.acompact` await it on the caller's event loop.
A window belongs to one agent loop: a call made while one of its operations is in progress raises
:class:`~ctxwindow.errors.WindowBusyError` and changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ctxwindow._checks import check_text
from ctxwindow.blocks import PromptBlocks
from ctxwindow.budget import PROFILES as BUDGET_PROFILES
from ctxwindow.budget import TokenBudget
from ctxwindow.checkpoint import TaskCheckpoint
from ctxwindow.compaction import CompactionResult
from ctxwindow.config import PROFILES, STRATEGY_TYPES, WindowSettings, check_int, read_toml, strategy_from_spec
from ctxwindow.context_windows import resolve_budget
from ctxwindow.conversation import ConversationStore
from ctxwindow.delegate import Condense, DelegationResult, RunFunction, adelegate, delegate
from ctxwindow.engine import Engine, Ledger, Read, Usage
from ctxwindow.errors import ContextOverflowError, InvalidTypeError, WindowBusyError
from ctxwindow.instructions import Instruction
from ctxwindow.messages import PLACEHOLDER_USER, Message, copy_message
from ctxwindow.options import (WindowOptions, check_options, make_archive, make_cache, make_cascade, make_events,
                               make_gate, make_instructions, make_notes, make_recall, make_tokenizer)
from ctxwindow.pressure import PressureMonitor, PressureReading
from ctxwindow.recall_link import answer_recall_call
from ctxwindow.state import WindowState, load_entries
from ctxwindow.strategies import Entry
from ctxwindow.sync import MessageLike, Prepared, message_list, sync_window
from ctxwindow.tokenizer import TokenCounter
from ctxwindow.unit_of_work import UnitOfWork, deliver

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ContextWindow", "Usage", "CompactionResult", "PROFILES", "STRATEGY_TYPES", "strategy_from_spec"]

T = TypeVar("T")


class ContextWindow:
    """A token-budgeted conversation for one agent; see the module documentation and
    :class:`~ctxwindow.options.WindowOptions` for the settings beyond the budget."""

    def __init__(self, model: str | None = None, *, max_tokens: int | None = None, reserve_output: int | None = None,
                 system: str | None = None, tools: list[dict[str, Any]] | None = None,
                 strategies: list[Any] | None = None, preserve_recent: int = 4, trigger: float = 0.8,
                 target: float = 0.6, tokenizer: TokenCounter | None = None,
                 on_evict: Callable[[list[Message], Usage], Any] | None = None,
                 on_compact: Callable[[CompactionResult], Any] | None = None,
                 **options: Unpack[WindowOptions]) -> None:
        max_tokens, reserve_output = resolve_budget(model, max_tokens, reserve_output)  # model's window if omitted
        self.profile = profile = check_options(options)
        settings = WindowSettings(max_tokens, reserve_output, preserve_recent, trigger, target)
        self.model = model
        self.tokenizer: TokenCounter = make_tokenizer(model, tokenizer)
        self.cascade = cascade = make_cascade(strategies, profile)
        self.events = events = make_events(options, on_evict, on_compact)
        self.notes = make_notes(options.get("notes"), cascade)
        #: The user's standing instructions (see :attr:`instructions`).
        self.standing_instructions = standing = make_instructions(options.get("instructions", True),
                                                                  settings.prompt_budget)
        #: The cache-aware schedule (``cache="auto"``), or None: see :mod:`ctxwindow.cache`.
        self.cache = make_cache(options.get("cache", "off"), model)
        #: Where originals of replaced messages go; placeholders' retrieval ids resolve here.
        self.archive = make_archive(options.get("archive"))
        #: Brings evicted messages back when a user message needs them (None: off).
        self.recall = recall = make_recall(options.get("recall"))
        self.pressure = PressureMonitor(
            settings.prompt_budget,
            on_zone_change=lambda old, new, reading: events.emit("on_zone_change", old, new, reading),
            on_velocity_spike=lambda reading: events.emit("on_velocity_spike", reading))
        #: What the last ``sync`` saw (:mod:`ctxwindow.sync`); None before the first.
        self.sync_state: Any = None
        #: The checkpoint this window last made, saved or resumed (delegation bootstraps from it).
        self.last_checkpoint: TaskCheckpoint | None = None
        #: The blocks sent around the conversation (:mod:`ctxwindow.blocks`).
        self.blocks = blocks = PromptBlocks(self.tokenizer)
        store, unit = ConversationStore(), UnitOfWork(on_rollback=self._rolled_back)
        self._engine = engine = Engine(
            self.tokenizer, store, blocks, Ledger(settings), unit, cascade, self.archive, standing, self.notes, events,
            self.pressure, TokenBudget(max_tokens, dict(BUDGET_PROFILES[profile])), self.cache,
            make_gate(options.get("fidelity_gate", True)))
        engine.wire(system, options.get("context"), tools, recall, self._reset_notes)
        if recall is not None:
            recall.attach(self)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], profile: str | None = None, **overrides: Any) -> ContextWindow:
        """A window configured by a TOML file: a ``[window]`` table (or top-level keys) with
        ``model``, ``max_tokens``, ``reserve_output``, ``profile`` (default, code_review, research,
        customer_support), ``trigger``, ``target``, ``preserve_recent``, ``system`` and
        ``[[window.strategies]]`` entries ``{type = "truncate_tool_results", max_chars = 2000}``.
        Keyword arguments override the file."""
        model, settings = read_toml(path, profile, overrides)
        return cls(model, **settings)

    # --- reading ------------------------------------------------------------------------------------

    @property
    def settings(self) -> WindowSettings:
        """The validated numeric settings (``max_tokens``, ``reserve_output``, ``preserve_recent``,
        ``trigger``, ``target``), also readable one by one below."""
        return self._engine.ledger.settings

    max_tokens = Read[int](lambda self: self.settings.max_tokens, "The context window, in tokens.")
    reserve_output = Read[int](lambda self: self.settings.reserve_output, "Tokens kept for the reply.")
    preserve_recent = Read[int](lambda self: self.settings.preserve_recent, "Newest messages kept as they are.")
    trigger = Read[float](lambda self: self.settings.trigger, "Share of the budget that starts compaction.")
    target = Read[float](lambda self: self.settings.target, "Share of the budget compaction goes down to.")
    prompt_budget = Read[int](lambda self: self.settings.prompt_budget, "``max_tokens - reserve_output``.")
    compactions = Read[int](lambda self: self._engine.ledger.compactions, "Compactions that changed something.")
    evicted_messages = Read[int](lambda self: self._engine.ledger.evicted_messages, "Messages compacted away.")
    tokens_added = Read[int](lambda self: self._engine.ledger.tokens_added, "Tokens of every message added.")
    last_compaction = Read[CompactionResult | None](lambda self: self._engine.ledger.last_compaction, "The last compaction's result.")
    revision = Read[int](lambda self: self._engine.ledger.revision, "Changes whenever a message is added.")
    fidelity_gate = Read[bool](lambda self: self._engine.fidelity_gate, "Whether compactions pass the gate.")
    tools = Read[list[dict[str, Any]] | None](lambda self: self.blocks.tools, "The tool definitions sent with the prompt.")
    turn = Read[int](lambda self: self._engine.store.turn, "Number of user messages added so far.")
    system_prompt = Read[str | None](lambda self: self.blocks.text("system"), "The system prompt's text, or None.")

    @property
    def measure_fidelity(self) -> bool:
        """Measure key-fact retention at each compaction (a HealthMonitor turns it on)."""
        return self._engine.measure_fidelity

    @measure_fidelity.setter
    def measure_fidelity(self, value: bool) -> None:
        self._engine.measure_fidelity = bool(value)

    @property
    def entries(self) -> list[Entry]:
        """The conversation's entries (message, tokens, group, turn, pin, and the original of a
        rewritten message), oldest first; held-back tool calls excluded."""
        return self._engine.store.entries()

    @property
    def llm_strategy_names(self) -> set[str]:
        """Names of the configured strategies that call a model."""
        return {s.name for s in self.cascade.strategies if getattr(s, "cost", "free") == "llm"}

    @property
    def usage(self) -> Usage:
        """Tokens by component, utilization, zone and turns until red."""
        return self._engine.usage()

    @property
    def budget(self) -> TokenBudget:
        """The :class:`~ctxwindow.budget.TokenBudget` of the six components, brought up to date with
        the window when read (so a turn does not pay for it)."""
        budget = self._engine.budget
        for component, tokens in self._engine.by_component().items():
            if component != "output_reserved":
                budget.set_used(component, tokens)
        return budget

    @property
    def instructions(self) -> list[Instruction]:
        """The user's standing instructions in force (detected in user messages as they are added,
        or added with :meth:`add_instruction`), in the order given; each is carried verbatim in a
        protected system message after the system prompt, within the block's token cap
        (``window.standing_instructions.max_tokens``; pinned ones always). Superseded and removed
        ones are in ``window.standing_instructions.history``."""
        return self.standing_instructions.current

    def pressure_reading(self) -> PressureReading | None:
        """The latest pressure reading."""
        return self.pressure.last

    def __len__(self) -> int:
        """Number of conversation messages (system prompt and held-back tool calls excluded)."""
        return len(self._engine.store)

    def __repr__(self) -> str:
        usage = self.usage
        return (f"ContextWindow(model={self.model!r}, messages={len(self)}, "
                f"total={usage.total}, budget={usage.budget}, zone={usage.zone!r})")

    # --- the blocks ----------------------------------------------------------------------------------

    def set_system(self, system: str | None) -> None:
        """Sets (or removes, with None) the system prompt, counted once here; compacts if the
        window no longer fits. On overflow nothing changes."""
        self._engine.unit.run(lambda: self._engine.changed(self.blocks.set_text, "system", system))

    def set_context(self, context: str | None) -> None:
        """Sets (or removes) dynamic context sent as a second system message after the prompt."""
        self._engine.unit.run(lambda: self._engine.changed(self.blocks.set_text, "context", context))

    def set_tools(self, tools: list[dict[str, Any]] | None) -> None:
        """Sets the tool definitions (counted once here, as the provider renders them)."""
        self._engine.unit.run(lambda: self._engine.changed(self.blocks.set_tools, tools))

    def write_note(self, category: str, text: str, importance: str = "normal") -> None:
        """Writes a note carried verbatim in every prompt (within the notes' token cap, critical
        first): categories task_progress, decisions, bugs, constraints, learnings, misc;
        importance critical, high, normal, low. If the prompt cannot fit with it,
        :class:`ContextOverflowError` and nothing changes."""
        check_text(text, "a note's text")

        def write() -> None:
            self.notes.write_note(category, text, importance)
            self._engine.changed(self.blocks.set_notes, self.notes)

        self._engine.unit.run(write)

    def _reset_notes(self, notes: list[Any]) -> None:
        self.notes.notes[:] = notes

    def add_instruction(self, text: str, *, pinned: bool = False) -> Instruction | None:
        """Adds a standing instruction verbatim (None when an identical one is in force); it
        supersedes earlier ones on the same subject, unless they are pinned. If the prompt cannot
        fit with it, :class:`ContextOverflowError` and nothing changes."""
        check_text(text, "an instruction's text")
        return self._instructions(lambda: self.standing_instructions.add(text, self.turn, pinned=pinned))

    def pin_instruction(self, instruction_id: int, pinned: bool = True) -> Instruction:
        """Pins (or unpins) an instruction in force: pinned ones are always carried (whatever the
        cap) and never superseded by later instructions. A pin survives a ``sync`` rebuild."""
        return self._instructions(lambda: self.standing_instructions.pin(instruction_id, pinned))

    def remove_instruction(self, instruction_id: int) -> Instruction:
        """Removes an instruction from the prompt (it stays in the history, as superseded by
        itself). A removal survives a ``sync`` rebuild."""
        return self._instructions(lambda: self.standing_instructions.remove(instruction_id))

    def _instructions(self, change: Callable[[], T]) -> T:
        def body() -> T:
            result = change()
            self._engine.changed(self._engine.refresh_instructions)
            return result

        return self._engine.unit.run(body)

    def record_usage(self, prompt_tokens: int, completion_tokens: int | None = None) -> None:
        """Calibrates with what the provider billed for the last prompt: from now on the window
        keeps ``count x calibration`` within the budget, compacting now if needed, and the
        pressure monitor uses the reported count for this turn. Each report moves the calibration
        halfway to ``prompt_tokens / count``, bounded by :func:`calibration_bounds`: [1, 1.5] for
        an exact tokenizer, [0.5, 3] for an estimate, which it may lower. ``prompt_tokens`` is the
        whole prompt as billed: with Anthropic, ``input_tokens + cache_read_input_tokens +
        cache_creation_input_tokens``. If the protected content no longer fits once calibrated,
        :class:`ContextOverflowError` and nothing changes."""
        check_int(prompt_tokens, "prompt_tokens", 0)
        if completion_tokens is not None:
            check_int(completion_tokens, "completion_tokens", 0)
        self._engine.unit.run(lambda: self._engine.calibrate(prompt_tokens, self.tokenizer.exact))

    def _rolled_back(self, error: BaseException) -> None:
        if isinstance(error, ContextOverflowError):
            deliver([lambda: self.events.emit("on_overflow", error)], reraise=False)

    # --- the conversation ------------------------------------------------------------------------------

    def prepare_message(self, message: object, where: str = "message", *, pinned: bool = False) -> Prepared:
        """Validates, copies and counts a message without adding it (``where`` names it in
        errors); :meth:`add_prepared` adds it. Changes nothing."""
        return self._engine.prepare(message, where, pinned)

    def add(self, message: MessageLike, *, pinned: bool = False,
            archive: Mapping[str, list[Message]] | None = None) -> None:
        """Adds one message (counted once, now). ``pinned=True`` protects it (and its group) from
        eviction and rewriting; ``archive`` (retrieval id -> messages) is written to the window's
        archive when the add succeeds. Raises :class:`MalformedMessageError` for a malformed
        message, a tool result that answers no open call, or a new message while tool calls wait
        for results; :class:`ContextOverflowError` when protected content alone would exceed the
        budget. On any error nothing changes."""
        self.add_prepared([self.prepare_message(message, pinned=pinned)], archive=archive)

    async def aadd(self, message: MessageLike, *, pinned: bool = False) -> None:
        """:meth:`add` for async code: summaries it triggers are awaited on this event loop."""
        prepared = [self.prepare_message(message, pinned=pinned)]
        await self._engine.unit.arun(lambda: self._engine.extend(prepared))

    def extend(self, messages: Iterable[MessageLike]) -> None:
        """Adds messages in order, atomically: if one is refused (its index is named in the
        error), none is added."""
        self.add_prepared([self.prepare_message(m, f"message {i}")
                           for i, m in enumerate(message_list(messages, "extend"))])

    async def aextend(self, messages: Iterable[MessageLike]) -> None:
        """:meth:`extend` for async code."""
        prepared = [self.prepare_message(m, f"message {i}") for i, m in enumerate(message_list(messages, "extend"))]
        await self._engine.unit.arun(lambda: self._engine.extend(prepared))

    def add_prepared(self, prepared: Sequence[Prepared], *, archive: Mapping[str, list[Message]] | None = None,
                     system: str | None = None, set_system: bool = False, reset: bool = False) -> None:
        """Adds messages of :meth:`prepare_message` in one operation. With ``set_system`` the system
        prompt becomes ``system`` first (None removes it); with ``reset`` the conversation is
        emptied first (instructions detected in its messages are detected again as they are
        re-added; removed or pinned ones stay so). ``archive`` (retrieval id -> messages) is
        written to the window's archive when the operation succeeds. On any error nothing changes."""
        if set_system and system is not None:
            check_text(system, "system")
        self._engine.unit.run(lambda: self._engine.apply(prepared, archive, system if set_system else ..., reset))

    def compact(self, force: bool = False, *, target: float | None = None) -> CompactionResult:
        """Runs the strategies (cheapest first) and the last resort until the prompt is at or
        below ``target`` (default: the window's ``target``) of the budget. Without ``force`` it does
        nothing while the prompt is at or under ``trigger``; with ``force=True`` it compacts
        whatever the trigger, and does nothing when the prompt is already at or below the target.
        Idempotent: compacting a compacted window with the same settings changes nothing."""
        engine = self._engine
        goal = engine.compaction_target(target)
        if not force and not engine.over(self.trigger):
            return engine.nothing_to_do("below trigger")
        return engine.unit.run(lambda: engine.compact("forced" if force else "compact", goal))

    async def acompact(self, force: bool = False, *, target: float | None = None) -> CompactionResult:
        """:meth:`compact` for async code: summaries are awaited on this event loop."""
        engine = self._engine
        goal = engine.compaction_target(target)
        if not force and not engine.over(self.trigger):
            return engine.nothing_to_do("below trigger")
        return await engine.unit.arun(lambda: engine.compact("forced" if force else "compact", goal))

    def messages(self) -> list[dict[str, Any]]:
        """What to send now: the blocks (system first), then the conversation; fits the budget.

        The list is new; the conversation's message dicts in it are the window's own (copying them
        on every turn would cost more than the rest of the turn), so treat them as read-only: copy
        a message before changing it. The window keeps its own copy of every message added, so
        changing the dict you passed to ``add`` changes nothing inside."""
        store = self._engine.store
        out: list[dict[str, Any]] = [dict(m) for m in self.blocks.messages]
        first = store.first_role()
        if first is not None and first != "user":
            out.append(dict(PLACEHOLDER_USER))
        out.extend(store.messages)
        return out

    def pending_messages(self) -> list[Message]:
        """The tool-call group waiting for results (held back from ``messages()``)."""
        return [copy_message(e.message) for e in self._engine.store.pending]

    def retrieve(self, retrieval_id: str) -> list[Message] | None:
        """The original messages behind a placeholder's retrieval id, or None."""
        if not isinstance(retrieval_id, str):
            raise InvalidTypeError(f"a retrieval id is a str, not {type(retrieval_id).__name__}")
        return self.archive.get(retrieval_id)

    def handle_recall_call(self, arguments: str | Mapping[str, Any]) -> str:
        """Answers the model's call of the :meth:`Recall.tool_schema` tool (``{"query": ...}`` or
        ``{"id": "ctx-..."}``; see :func:`ctxwindow.recall_link.answer_recall_call`). Malformed
        arguments raise :class:`InvalidArgumentError` saying what is wrong; nothing changes."""
        return answer_recall_call(arguments, self._engine.recall, self.archive.get, self.tokenizer.count)

    # --- checkpoints ------------------------------------------------------------------------------------

    def checkpoint(self, goal: str, **fields: Any) -> TaskCheckpoint:
        """A :class:`~ctxwindow.checkpoint.TaskCheckpoint` of the task with this window's state, so
        :meth:`resume` restores ``messages()`` exactly. It is based on the version this window last
        saved or resumed, so periodic ``store.save(window.checkpoint(goal))`` calls succeed."""
        if self._engine.unit.busy:
            raise WindowBusyError("this window is in the middle of another operation; the call changed nothing")
        fields.setdefault("version", self.last_checkpoint.version if self.last_checkpoint else 0)
        self.last_checkpoint = TaskCheckpoint(goal=goal, window_state=self._engine.capture().to_dict(), **fields)
        return self.last_checkpoint

    def restore(self, checkpoint: TaskCheckpoint) -> None:
        """Restores the state of :meth:`checkpoint` into this window: conversation, pending tool
        calls, notes, standing instructions, archive, system prompt, context, tools, output reserve
        and calibration. Messages are recounted with this window's tokenizer; if the state does not
        fit this window's budget it is compacted, and if it cannot fit, nothing changes."""
        if not isinstance(checkpoint, TaskCheckpoint):
            raise InvalidTypeError(f"restore takes a ctxwindow.checkpoint.TaskCheckpoint, not {type(checkpoint).__name__}")
        state = WindowState.from_dict(checkpoint.window_state, self.reserve_output)
        entries, pending = load_entries(state, self.tokenizer.count_message)
        self._engine.unit.run(lambda: self._engine.load(state, entries, pending, self.tokenizer.exact))
        self.pressure.budget_tokens = self.prompt_budget
        self.last_checkpoint = checkpoint

    def resume(self, store: Any, session_id: str = "default") -> TaskCheckpoint | None:
        """Loads the newest checkpoint of ``session_id`` from a checkpoint store and restores it into
        this window; returns it (None when the session has none)."""
        checkpoint: TaskCheckpoint | None = store.load(session_id)
        if checkpoint is not None:
            self.restore(checkpoint)
        return checkpoint

    def save_checkpoint(self, store: Any, goal: str, session_id: str = "default", **fields: Any) -> int:
        """``store.save(self.checkpoint(goal, **fields), session_id)``: the stored version."""
        version: int = store.save(self.checkpoint(goal, **fields), session_id)
        return version

    # --- a history kept elsewhere, and sub-agents ----------------------------------------------------

    def sync(self, messages: Iterable[MessageLike]) -> None:
        """Makes the window hold exactly ``messages`` (the full history an agent framework keeps),
        counting only what is new since the last ``sync``; system messages become the system
        prompt. Atomic: on any error nothing changes. See :mod:`ctxwindow.sync`."""
        sync_window(self, messages)

    def child(self, *, max_tokens: int, reserve_output: int, system: str | None,
              on_evict: Callable[[list[Message], Usage], Any] | None = None) -> ContextWindow:
        """A new window for a sub-agent: this window's model, tokenizer and tools, its own budget."""
        return ContextWindow(self.model, max_tokens=max_tokens, reserve_output=reserve_output, system=system,
                             tools=self.tools, tokenizer=self.tokenizer, on_evict=on_evict)

    def delegate(self, task: str, run: RunFunction[ContextWindow], *, max_result_tokens: int = 500,
                 max_tokens: int | None = None, reserve_output: int | None = None, system: str | None = None,
                 checkpoint: TaskCheckpoint | None = None, tool_call_id: str | None = None,
                 condense: Condense | None = None) -> DelegationResult:
        """Runs ``task`` in a child window with a fresh budget (``max_tokens``, default this
        window's) and adds one condensed result message here, within ``max_result_tokens``; see
        :mod:`ctxwindow.delegate`. If anything fails, this window is unchanged.

        >>> window = ContextWindow("gpt-4o", max_tokens=4_000)
        >>> window.add({"role": "user", "content": "Summarise the logs."})
        >>> result = window.delegate("read the logs", lambda child: "3 errors, all timeouts")
        >>> window.retrieve(result.transcript_id)[-1]["content"]
        '3 errors, all timeouts'
        """
        return delegate(self, task, run, max_result_tokens=max_result_tokens, max_tokens=max_tokens,
                        reserve_output=reserve_output, system=system, checkpoint=checkpoint,
                        tool_call_id=tool_call_id, condense=condense)

    async def adelegate(self, task: str, run: RunFunction[ContextWindow], *, max_result_tokens: int = 500,
                        max_tokens: int | None = None, reserve_output: int | None = None,
                        system: str | None = None, checkpoint: TaskCheckpoint | None = None,
                        tool_call_id: str | None = None, condense: Condense | None = None) -> DelegationResult:
        """:meth:`delegate` for async code: an async ``run`` is awaited on this event loop."""
        return await adelegate(self, task, run, max_result_tokens=max_result_tokens, max_tokens=max_tokens,
                               reserve_output=reserve_output, system=system, checkpoint=checkpoint,
                               tool_call_id=tool_call_id, condense=condense)
