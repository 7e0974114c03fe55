"""Configuration of a window: the validated settings, the built-in profiles, the strategy
registry used by TOML files, and TOML loading."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxwindow._checks import check_fraction, check_int, type_name
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.strategies import (
    ClearToolResults,
    DropOldest,
    MicroCompact,
    ProgressiveSummarize,
    ScoredEviction,
    SemanticMerge,
    SlidingWindow,
    Summarize,
    TruncateToolResults,
)

__all__ = ["PROFILES", "STRATEGY_TYPES", "WindowSettings", "strategy_from_spec", "read_toml",
           "check_int", "check_fraction"]

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

_TOML_KEYS = {"model", "max_tokens", "reserve_output", "profile", "trigger", "target",
              "preserve_recent", "system", "strategies", "context", "cache"}


@dataclass(frozen=True)
class WindowSettings:
    """The numeric settings of a window, validated: ``max_tokens`` >= 1, ``0 <= reserve_output <
    max_tokens``, ``preserve_recent`` >= 0, ``0 < target <= trigger <= 1``."""

    max_tokens: int
    reserve_output: int = 0
    preserve_recent: int = 4
    trigger: float = 0.8
    target: float = 0.6

    def __post_init__(self) -> None:
        check_int(self.max_tokens, "max_tokens", 1)
        check_int(self.reserve_output, "reserve_output", 0)
        if self.reserve_output >= self.max_tokens:
            raise InvalidArgumentError(
                f"reserve_output ({self.reserve_output}) must be less than max_tokens ({self.max_tokens})")
        check_int(self.preserve_recent, "preserve_recent", 0)
        check_fraction(self.trigger, "trigger")
        check_fraction(self.target, "target")
        if self.target > self.trigger:
            raise InvalidArgumentError(f"target ({self.target}) must not exceed trigger ({self.trigger})")

    @property
    def prompt_budget(self) -> int:
        """``max_tokens - reserve_output``: what ``messages()`` may use."""
        return self.max_tokens - self.reserve_output


def strategy_from_spec(spec: Mapping[str, Any]) -> object:
    """A strategy from a ``{"type": name, **parameters}`` mapping (TOML configurations)."""
    if not isinstance(spec, Mapping):
        raise InvalidTypeError(f"a strategy spec must be a dict with a 'type', not {type_name(spec)}")
    kind = spec.get("type")
    if not isinstance(kind, str) or kind not in STRATEGY_TYPES:
        raise InvalidArgumentError(f"unknown strategy type {kind!r}; known: {', '.join(STRATEGY_TYPES)}")
    parameters = {k: v for k, v in spec.items() if k != "type"}
    if not all(isinstance(k, str) for k in parameters):
        raise InvalidTypeError(f"strategy {kind}: parameter names must be str, got {sorted(map(repr, parameters))}")
    try:
        return STRATEGY_TYPES[kind](**parameters)
    except TypeError as error:
        raise InvalidArgumentError(f"strategy {kind}: {error}") from None


def read_toml(path: str | os.PathLike[str], profile: str | None,
              overrides: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``(model, keyword arguments of ContextWindow)`` from a TOML file: a ``[window]`` table
    (or top-level keys) with the settings of :data:`_TOML_KEYS`; ``profile`` and ``overrides``
    win over the file."""
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
    unknown = set(settings) - _TOML_KEYS
    if unknown:
        raise InvalidArgumentError(f"{path}: unknown settings {sorted(unknown)}; known: {', '.join(sorted(_TOML_KEYS))}")
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
    merged["profile"] = chosen
    return model, merged
