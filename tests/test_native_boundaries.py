"""The native module at its boundaries: the core's model table read from Python, and bad input
that must raise the package's typed errors and change nothing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwindow import _native
from ctxwindow._native import EstimateTokenizer, TokenHistory, Tokenizer
from ctxwindow.context_windows import model_names as python_model_names
from ctxwindow.errors import (
    HistoryIndexError,
    InvalidTextError,
    InvalidTypeError,
    UnknownEncodingError,
)

NAMES = [
    "", "gpt-4o", "gpt-4o-2024-08-06", "openai:gpt-4o", "openai/o3", "ft:gpt-4o-mini-2024-07-18:org::x1",
    "anthropic:claude-sonnet-4-5", "us.anthropic.claude-opus-4-1-20250805-v1:0", "google-gla:gemini-2.5-flash",
    "models/gemini-2.0-flash", "a.b/c:", ":::", "...", "///", ".gpt-4o", "gpt-4o.", "é.ü/ß:日本", "emoji 😀.x",
]

#: Model-like names: words of letters, digits and dashes joined by the provider separators.
model_like = st.lists(
    st.one_of(st.sampled_from([":", "/", ".", "-", "openai", "anthropic", "us", "gpt-4o", "claude"]),
              st.text(st.characters(codec="utf-8"), max_size=4)),
    max_size=8,
).map("".join)


@pytest.mark.parametrize("model", NAMES)
def test_model_names_match_the_python_rule(model: str) -> None:
    assert _native.model_names(model) == python_model_names(model)


@given(model=st.one_of(model_like, st.text(st.characters(codec="utf-8"))))
def test_model_names_match_the_python_rule_on_any_text(model: str) -> None:
    assert _native.model_names(model) == python_model_names(model)


def test_model_names_reject_lone_surrogates_and_non_text() -> None:
    with pytest.raises(InvalidTextError, match="lone surrogate at position 1") as info:
        _native.model_names("a\ud800b")
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidTextError, match="position 0"):
        _native.model_names("\udfff")
    with pytest.raises(InvalidTypeError, match="model must be a str, not int"):
        _native.model_names(5)  # type: ignore[arg-type]


def test_model_table_rows_are_what_lookups_find() -> None:
    rows = _native.model_table()
    assert {kind for _, kind, _ in rows} == {"encoding", "estimate"}
    assert ("gpt-4o", "encoding", "o200k_base") in rows
    assert ("claude-*", "estimate", "claude") in rows
    seen_estimate = False
    for pattern, kind, value in rows:
        model = pattern[:-1] + "x" if pattern.endswith("*") else pattern
        if kind == "encoding":
            # Lookup order: rows earlier in the table win, with the same answer here.
            assert not seen_estimate, "encoding rows come before estimate rows"
            assert _native.encoding_for_model(model) == value, pattern
        else:
            seen_estimate = True
            with pytest.raises(UnknownEncodingError):
                _native.encoding_for_model(model)
            tokenizer = Tokenizer.for_model(model)
            assert isinstance(tokenizer, EstimateTokenizer)
            assert tokenizer.family == value


def _history(n: int) -> TokenHistory:
    history = TokenHistory()
    for i in range(n):
        history.push(f"m{i}", i + 1)
    return history


class BigIndex:
    def __index__(self) -> int:
        return 2**100


@pytest.mark.parametrize("index", [10**30, -(10**30), 2**63, -(2**63) - 1, BigIndex()], ids=str)
def test_history_index_beyond_the_platform_is_out_of_range(index: object) -> None:
    history = _history(3)
    before = history.entries()
    with pytest.raises(HistoryIndexError, match=r"out of range for a history of 3 entries") as info:
        history[index]  # type: ignore[index]
    assert isinstance(info.value, IndexError)
    expected = str(index.__index__()) if isinstance(index, BigIndex) else str(index)
    assert f"index {expected} out of range" in str(info.value)
    with pytest.raises(HistoryIndexError):
        history.entry(index)  # type: ignore[arg-type]
    assert history.entries() == before
    assert history.total_tokens == 6


@pytest.mark.parametrize("index", [1.0, "0", None, True])
def test_history_index_of_another_type_is_a_type_error(index: object) -> None:
    history = _history(2)
    with pytest.raises(InvalidTypeError, match="history index must be an int"):
        history[index]  # type: ignore[index]
    assert len(history) == 2
