"""Context-window sizes of the models :meth:`ctxwindow.Tokenizer.for_model` knows (exactly, or
with an estimate for Claude and Gemini), so that ``ContextWindow(model="gpt-4.1")`` needs no
``max_tokens``.

The table is kept here (the runtime needs numpy only) and checked against a maintained source,
the ``genai-prices`` package's model data (``tests/test_context_windows.py``), so a change there
fails the tests until the table follows. Dated model names use their family's size
(``gpt-4o-2024-08-06`` is ``gpt-4o``); other suffixes are unknown (``gpt-4-32k`` is not ``gpt-4``).

>>> context_window("gpt-4o-2024-08-06")
128000
>>> default_reserve(128_000)
12800
"""

from __future__ import annotations

import re

from ctxwindow.errors import InvalidArgumentError

__all__ = ["CONTEXT_WINDOWS", "context_window", "default_reserve", "model_names", "resolve_budget"]

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


def model_names(model: str) -> list[str]:
    """``model``, then what follows each provider prefix in it (ending in ``:``, ``/`` or ``.``):
    the names a model table is searched for, in order (as ``ctxwindow-core``'s ``model_names``).

    >>> model_names("anthropic:claude-sonnet-4-5")
    ['anthropic:claude-sonnet-4-5', 'claude-sonnet-4-5']
    """
    return [model] + [model[at + 1:] for at, char in enumerate(model) if char in ":/."]


def context_window(model: str) -> int | None:
    """The model's context window in tokens, or None when the table does not know it. A dated
    name (``name-2024-08-06``, ``name-latest``, ``name-20250805-v1:0``) falls back to the
    longest known name it starts with; a
    provider's prefix ending in ``:``, ``/`` or ``.`` is skipped (``anthropic:claude-sonnet-4-5``,
    ``us.anthropic.claude-opus-4-1-20250805-v1:0``)."""
    for name in model_names(model):
        size = CONTEXT_WINDOWS.get(name)
        if size is not None:
            return size
        family = max((known for known in CONTEXT_WINDOWS
                      if name.startswith(known + "-") and _VERSION.fullmatch(name[len(known) + 1:])),
                     key=len, default=None)
        if family is not None:
            return CONTEXT_WINDOWS[family]
    return None


#: What may follow a known name and still be that model: dates, snapshot numbers, ``latest`` and
#: a provider's version tag (``-2024-08-06``, ``-20250929``, ``-0613``, ``-latest``,
#: ``-v1:0``). Any other suffix (``-32k``, ``-preview-tts``) can be a model with another window.
_VERSION = re.compile(r"(\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest|v\d+(:\d+)?)(-(\d{8}|latest|v\d+(:\d+)?))*")


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
