"""The one model table of the Python layer: for each model it knows, the context window, the
output reserve a window takes by default, and the prices. :meth:`ctxwindow.Tokenizer.for_model`
(the core's table) says how each model counts, exactly or with an estimate for Claude and Gemini.

- :data:`CONTEXT_WINDOWS`: input context window (tokens) per model, so that
  ``ContextWindow(model="gpt-4.1")`` needs no ``max_tokens`` (:func:`context_window`,
  :func:`default_reserve`, :func:`resolve_budget`).
- :data:`PRICES`: USD per million tokens (input, cached input, output, cache write), base tier
  (prompts under 200k tokens), copied on :data:`PRICES_DATE` (:func:`price_for`).

Both tables are copied from a maintained source, the ``genai-prices`` package's model data, and
checked against it (``tests/test_context_windows.py``, ``tests/test_cost.py``), so a change
there fails the tests until the table follows. The runtime needs numpy only, so the tables live
here; with ``genai-prices`` installed, :func:`price_for` also finds models the table lacks.

Names are looked up as :func:`model_names` lists them (the name, then what follows each
provider prefix). A dated name uses its family's row (``gpt-4o-2024-08-06`` is ``gpt-4o``); for
windows, other suffixes are unknown (``gpt-4-32k`` is not ``gpt-4``).

>>> context_window("gpt-4o-2024-08-06")
128000
>>> default_reserve(128_000)
12800
>>> price_for("anthropic:claude-sonnet-4-5").output
15.0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["CONTEXT_WINDOWS", "MAX_DEFAULT_RESERVE", "PRICES", "PRICES_DATE", "Prices", "context_window",
           "default_reserve", "model_names", "price_for", "resolve_budget"]


def model_names(model: str) -> list[str]:
    """``model``, then what follows each provider prefix in it (ending in ``:``, ``/`` or ``.``):
    the names a model table is searched for, in order (as ``ctxwindow-core``'s ``model_names``).

    >>> model_names("anthropic:claude-sonnet-4-5")
    ['anthropic:claude-sonnet-4-5', 'claude-sonnet-4-5']
    """
    return [model] + [model[at + 1:] for at, char in enumerate(model) if char in ":/."]


# --- context windows -------------------------------------------------------------------------------

#: Input context window (tokens) per model name, as genai-prices lists them.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o-latest": 128_000,
    "gpt-4.1": 1_000_000,
    "gpt-4.1-mini": 1_000_000,
    "gpt-4.1-nano": 1_000_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-5.1": 400_000,
    "gpt-oss-120b": 131_072,
    # Without a public vocabulary: counted with their EstimateTokenizer.
    "claude-3-haiku": 200_000,
    "claude-3-opus": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-opus-4": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-sonnet-4-6": 1_000_000,
    "claude-opus-4-6": 1_000_000,
    "claude-haiku-4-5": 200_000,
    "gemini-1.5-pro": 1_000_000,
    "gemini-2.0-flash": 1_000_000,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_000_000,
}

#: The largest output reserve :func:`default_reserve` chooses.
MAX_DEFAULT_RESERVE = 32_768

#: What may follow a known name and still be that model: dates, snapshot numbers, ``latest`` and
#: a provider's version tag (``-2024-08-06``, ``-20250929``, ``-0613``, ``-latest``,
#: ``-v1:0``). Any other suffix (``-32k``, ``-preview-tts``) can be a model with another window.
_VERSION = re.compile(r"(\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest|v\d+(:\d+)?)(-(\d{8}|latest|v\d+(:\d+)?))*")


def _check_model(model: object) -> str:
    if not isinstance(model, str):
        raise InvalidTypeError(f"model must be a str, not {type(model).__name__}")
    return model


def context_window(model: str) -> int | None:
    """The model's context window in tokens, or None when the table does not know it. A dated
    name (``name-2024-08-06``, ``name-latest``, ``name-20250805-v1:0``) falls back to the
    longest known name it starts with; a
    provider's prefix ending in ``:``, ``/`` or ``.`` is skipped (``anthropic:claude-sonnet-4-5``,
    ``us.anthropic.claude-opus-4-1-20250805-v1:0``)."""
    for name in model_names(_check_model(model)):
        size = CONTEXT_WINDOWS.get(name)
        if size is not None:
            return size
        family = max((known for known in CONTEXT_WINDOWS
                      if name.startswith(known + "-") and _VERSION.fullmatch(name[len(known) + 1:])),
                     key=len, default=None)
        if family is not None:
            return CONTEXT_WINDOWS[family]
    return None


def default_reserve(window: int) -> int:
    """The output reserve used when ``max_tokens`` comes from the table: 10% of the window, at
    most :data:`MAX_DEFAULT_RESERVE` (never below the design's floor of the smaller of 4k tokens
    and 10% of the window)."""
    return min(window // 10, MAX_DEFAULT_RESERVE)


def resolve_budget(model: str | None, max_tokens: int | None, reserve_output: int | None) -> tuple[int, int]:
    """``(max_tokens, reserve_output)`` for a window: as given, or, without ``max_tokens``, the
    model's context window and (unless given) :func:`default_reserve` of it."""
    if max_tokens is not None:
        return max_tokens, 0 if reserve_output is None else reserve_output
    size = context_window(model) if isinstance(model, str) else None
    if size is None:
        raise InvalidArgumentError(
            f"max_tokens is required: the context window of model {model!r} is not known "
            f"(known: {', '.join(sorted(CONTEXT_WINDOWS))})")
    return size, default_reserve(size) if reserve_output is None else reserve_output


# --- prices ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """USD per million tokens. ``cache_write`` is None where the provider bills cache writes as
    plain input (OpenAI)."""

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "cached_input", "output", "cache_write"):
            value = getattr(self, name)
            if value is None and name == "cache_write":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidTypeError(f"price {name} must be a number, not {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise InvalidArgumentError(f"price {name} must be a finite number >= 0, got {value}")
        if self.cached_input > self.input:
            raise InvalidArgumentError(
                f"cached_input ({self.cached_input}) must not exceed input ({self.input})")

    @property
    def cached_ratio(self) -> float:
        """The cached-input price as a share of the input price."""
        return self.cached_input / self.input if self.input else 1.0


#: When :data:`PRICES` was copied from genai-prices (its snapshot in version 0.2.3).
PRICES_DATE = "2026-11-23"

#: USD per million tokens, base tier, per model (see the module documentation).
PRICES: dict[str, Prices] = {
    "gpt-4o": Prices(2.5, 1.25, 10.0),
    "gpt-4o-mini": Prices(0.15, 0.075, 0.6),
    "gpt-4.1": Prices(2.0, 0.5, 8.0),
    "gpt-4.1-mini": Prices(0.4, 0.1, 1.6),
    "gpt-4.1-nano": Prices(0.1, 0.025, 0.4),
    "gpt-5": Prices(1.25, 0.125, 10.0),
    "gpt-5-mini": Prices(0.25, 0.025, 2.0),
    "gpt-5-nano": Prices(0.05, 0.005, 0.4),
    "gpt-5.1": Prices(1.25, 0.125, 10.0),
    "o4-mini": Prices(1.1, 0.275, 4.4),
    "claude-sonnet-4-5": Prices(3.0, 0.3, 15.0, 3.75),
    "claude-sonnet-4": Prices(3.0, 0.3, 15.0, 3.75),
    "claude-haiku-4-5": Prices(1.0, 0.1, 5.0, 1.25),
    "claude-opus-4-5": Prices(5.0, 0.5, 25.0, 6.25),
    "claude-opus-4-1": Prices(15.0, 1.5, 75.0, 18.75),
}


def price_for(model: str) -> Prices:
    """The prices of ``model``: from :data:`PRICES` (a dated or suffixed name falls back to the
    longest known name it starts with; a provider's prefix such as ``anthropic:`` is skipped), else from ``genai-prices`` when installed, else
    :class:`~ctxwindow.errors.InvalidArgumentError` listing the known models."""
    for name in model_names(_check_model(model)):
        if name in PRICES:  # the name itself, then after a provider's prefix (anthropic:claude-...)
            return PRICES[name]
        family = max((known for known in PRICES if name.startswith(known + "-")), key=len, default=None)
        if family is not None:
            return PRICES[family]
    found = _genai_prices(model)
    if found is not None:
        return found
    raise InvalidArgumentError(f"no price known for model {model!r}; known: {', '.join(sorted(PRICES))} "
                               "(or install genai-prices for more)")


def _genai_prices(model: str) -> Prices | None:
    """The prices genai-prices knows for ``model`` (None when it is not installed or has none)."""
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:
        return None
    try:
        _, info = get_snapshot().find_provider_model(model, None, None, None)
        return _from_genai_prices(info.prices)
    except (LookupError, ValueError, TypeError, AttributeError):
        return None


def _base(value: Any) -> float | None:
    if value is None:
        return None
    return float(getattr(value, "base", value))


def _from_genai_prices(prices: Any) -> Prices | None:
    """A :class:`Prices` from a genai-prices ``ModelPrice`` (base tier), or None."""
    prices = getattr(prices, "prices", prices)  # conditional prices: a list of (constraint, prices)
    if isinstance(prices, list):
        prices = prices[-1].prices if prices else None
    input_price, output_price = _base(getattr(prices, "input_mtok", None)), _base(getattr(prices, "output_mtok", None))
    if input_price is None or output_price is None:
        return None
    cached = _base(getattr(prices, "cache_read_mtok", None))
    return Prices(input_price, input_price if cached is None else cached, output_price,
                  _base(getattr(prices, "cache_write_mtok", None)))
