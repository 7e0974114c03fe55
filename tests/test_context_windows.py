"""The table of context windows agrees with a maintained source (genai-prices' model data), and
a window made without ``max_tokens`` uses it."""

from __future__ import annotations

import pytest

from ctxwindow import ContextWindow, InvalidArgumentError, Tokenizer
from ctxwindow.models import CONTEXT_WINDOWS, MAX_DEFAULT_RESERVE, context_window, default_reserve


def test_the_table_matches_genai_prices() -> None:
    snapshot = pytest.importorskip("genai_prices.data_snapshot").get_snapshot()
    providers = {"claude": "anthropic", "gemini": "google"}
    for model, size in CONTEXT_WINDOWS.items():
        _, info = snapshot.find_provider_model(model, None, providers.get(model.split("-")[0], "openai"), None)
        assert info.context_window == size, (model, info.id, info.context_window)
        Tokenizer.for_model(model)  # every model of the table has a tokenizer


def test_a_window_without_max_tokens_uses_the_models_window() -> None:
    window = ContextWindow("gpt-4.1")
    assert window.max_tokens == 1_000_000
    assert window.reserve_output == MAX_DEFAULT_RESERVE
    assert window.prompt_budget == 1_000_000 - MAX_DEFAULT_RESERVE
    small = ContextWindow("gpt-4")
    assert (small.max_tokens, small.reserve_output) == (8_192, 819)
    assert ContextWindow("gpt-4o-2024-08-06", reserve_output=1_000).prompt_budget == 127_000
    assert ContextWindow("gpt-4o", max_tokens=5_000).reserve_output == 0  # as before when given
    assert context_window("gpt-4o-mini-2024-07-18") == 128_000  # the longest family name wins
    assert default_reserve(400_000) == MAX_DEFAULT_RESERVE


def test_an_unknown_window_needs_max_tokens() -> None:
    with pytest.raises(InvalidArgumentError, match="max_tokens is required.*'gpt-4.5-preview'"):
        ContextWindow("gpt-4.5-preview")
    with pytest.raises(InvalidArgumentError, match="max_tokens is required.*None"):
        ContextWindow()
