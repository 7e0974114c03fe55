"""The settings of a ``ContextWindow`` beyond its budget, named for type checkers and IDEs
(:class:`WindowOptions`), and how each becomes a part of the window (validated here, with the
typed error that names the setting; the window only wires the parts together)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

from ctxwindow._native import Tokenizer
from ctxwindow.archive import Archive, MessageArchive
from ctxwindow.cache import CACHE_MODES, CacheSchedule
from ctxwindow.config import PROFILES, strategy_from_spec
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.events import EVENTS, EventBus
from ctxwindow.instructions import StandingInstructions
from ctxwindow.recall import Recall
from ctxwindow.strategies import Cascade, Notes
from ctxwindow.tokenizer import TokenCounter

__all__ = ["WindowOptions", "CALLBACKS", "OPTION_NAMES", "check_options", "make_tokenizer", "make_cascade",
           "make_events", "make_notes", "make_instructions", "make_cache", "make_archive", "make_recall",
           "make_gate"]

#: The events a callback can be given for as a setting (``on_evict`` and ``on_compact`` are
#: parameters of their own).
CALLBACKS = tuple(name for name in EVENTS if name not in ("on_evict", "on_compact"))

Callback = Callable[..., Any]


class WindowOptions(TypedDict, total=False):
    """The keyword settings of ``ContextWindow`` beyond the budget and the strategies.

    - ``context``: dynamic context, sent as a system message after the system prompt.
    - ``profile``: a built-in profile (``default``, ``code_review``, ``research``,
      ``customer_support``): default strategies and budget allocations.
    - ``raise_callback_errors``: re-raise a callback's error after all events were delivered.
    - ``notes``: the notebook carried in every prompt (a :class:`~ctxwindow.strategies.Notes`).
    - ``archive``: where originals of replaced messages go (a
      :class:`~ctxwindow.archive.MessageArchive`; in memory by default).
    - ``instructions``: detect standing instructions (``True``, the default), only keep those added
      by the program (``False``), or a :class:`~ctxwindow.StandingInstructions`.
    - ``fidelity_gate``: check every compaction by the strategies with the fidelity gate.
    - ``recall``: bring evicted messages back for each user message (a :class:`~ctxwindow.Recall`).
    - ``cache``: ``"off"``, ``"auto"`` (the cache-aware schedule of the model) or a
      :class:`~ctxwindow.CacheSchedule`.
    - ``on_zone_change``, ``on_velocity_spike``, ``on_alert``, ``on_status``, ``on_turn_start``,
      ``on_turn_end``, ``on_tool_result``, ``on_overflow``, ``on_delegate_start``,
      ``on_delegate_end``: callbacks (:mod:`ctxwindow.events`).
    """

    context: str | None
    profile: str
    raise_callback_errors: bool
    notes: Notes | None
    archive: MessageArchive | None
    instructions: bool | StandingInstructions
    fidelity_gate: bool
    recall: Recall | None
    cache: str | CacheSchedule
    on_zone_change: Callback | None
    on_velocity_spike: Callback | None
    on_alert: Callback | None
    on_status: Callback | None
    on_turn_start: Callback | None
    on_turn_end: Callback | None
    on_tool_result: Callback | None
    on_overflow: Callback | None
    on_delegate_start: Callback | None
    on_delegate_end: Callback | None


#: Every setting :class:`WindowOptions` names.
OPTION_NAMES = frozenset(WindowOptions.__annotations__)


def check_options(options: Mapping[str, Any]) -> str:
    """Refuses unknown settings, naming them; returns the profile."""
    unknown = set(options) - OPTION_NAMES
    if unknown:
        raise InvalidArgumentError(
            f"unknown ContextWindow settings {sorted(unknown)}; known extras: {', '.join(sorted(OPTION_NAMES))}")
    profile = options.get("profile", "default")
    if not isinstance(profile, str) or profile not in PROFILES:
        raise InvalidArgumentError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    return profile


def make_tokenizer(model: str | None, tokenizer: object) -> TokenCounter:
    """The window's counter: the one given, else the model's (o200k_base without a model)."""
    if tokenizer is None:
        return Tokenizer.for_model(model) if model is not None else Tokenizer("o200k_base")
    if not isinstance(tokenizer, TokenCounter):
        raise InvalidTypeError("tokenizer must provide count, count_many, count_message, count_messages")
    return tokenizer


def make_cascade(strategies: object, profile: str) -> Cascade:
    """The strategies given (a list of strategies or ``(messages, budget) -> messages``
    callables), else the profile's."""
    if strategies is None:
        return Cascade([strategy_from_spec(spec) for spec in PROFILES[profile]["strategies"]])
    if isinstance(strategies, (str, bytes, Mapping)) or not isinstance(strategies, Sequence):
        raise InvalidTypeError(f"strategies must be a list of strategies, not {type(strategies).__name__}")
    return Cascade(list(strategies))


def make_events(options: Mapping[str, Any], on_evict: object, on_compact: object) -> EventBus:
    """The event bus with every callback given."""
    raise_errors = options.get("raise_callback_errors", False)
    if not isinstance(raise_errors, bool):
        raise InvalidTypeError(f"raise_callback_errors must be a bool, not {type(raise_errors).__name__}")
    events = EventBus(raise_errors=raise_errors)
    for name, callback in (("on_evict", on_evict), ("on_compact", on_compact),
                           *((name, options.get(name)) for name in CALLBACKS)):
        if callback is None:
            continue
        if not callable(callback):
            raise InvalidTypeError(f"{name} must be callable, not {type(callback).__name__}")
        events.on(name, callback)
    return events


def make_notes(value: object, cascade: Cascade) -> Notes:
    """The notebook given, else the cascade's ``Notes`` strategy, else an empty one."""
    notes = value or next((s for s in cascade.strategies if isinstance(s, Notes)), None)
    if notes is not None and not isinstance(notes, Notes):
        raise InvalidTypeError("notes must be a ctxwindow.strategies.Notes")
    return notes if notes is not None else Notes()


def make_instructions(value: object, prompt_budget: int) -> StandingInstructions:
    """The standing instructions given, or a new block capped at an eighth of the prompt budget
    (32 to 400 tokens), detecting when ``value`` is True."""
    if isinstance(value, bool):
        return StandingInstructions(max_tokens=max(32, min(400, prompt_budget // 8)), detect=value)
    if not isinstance(value, StandingInstructions):
        raise InvalidTypeError("instructions must be a bool or a ctxwindow.StandingInstructions")
    return value


def make_gate(value: object) -> bool:
    """Whether compactions go through the fidelity gate."""
    if not isinstance(value, bool):
        raise InvalidTypeError(f"fidelity_gate must be a bool, not {type(value).__name__}")
    return value


def make_cache(value: object, model: str | None) -> CacheSchedule | None:
    """The cache-aware schedule (``"auto"``: the model's), or None (``"off"``)."""
    if isinstance(value, str) and value in CACHE_MODES:
        return CacheSchedule.for_model(model) if value == "auto" else None
    if isinstance(value, CacheSchedule):
        return value
    raise InvalidArgumentError(f"cache must be 'auto', 'off' or a ctxwindow.cache.CacheSchedule, got {value!r}")


def make_archive(value: object) -> MessageArchive:
    """The archive given, else a new in-memory one."""
    if value is None:
        return Archive()
    if not isinstance(value, MessageArchive):
        raise InvalidTypeError("archive must implement ctxwindow.archive.MessageArchive (put, get, search)")
    return value


def make_recall(value: object) -> Recall | None:
    """The recall given (None: off)."""
    if value is not None and not isinstance(value, Recall):
        raise InvalidTypeError(f"recall must be a ctxwindow.Recall, not {type(value).__name__}")
    return value
