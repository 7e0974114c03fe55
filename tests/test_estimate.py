"""Estimates for models without a public vocabulary (Claude, Gemini) and the calibration that
brings them to what the provider bills."""

from __future__ import annotations

import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import (
    ContextOverflowError,
    ContextWindow,
    EstimateTokenizer,
    HeuristicTokenizer,
    InvalidArgumentError,
    InvalidTypeError,
    Tokenizer,
    UnknownEncodingError,
    image_tokens,
)
from ctxwindow.models import context_window, price_for
from ctxwindow.state import calibration_bounds
from ctxwindow.tools import count_tools, tools_json
from tests import estimate_eval as ee

WEATHER = [{"name": "get_weather", "description": "Weather of a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


def test_claude_and_gemini_get_a_named_estimate() -> None:
    claude = Tokenizer.for_model("claude-sonnet-4-5-20250929")
    assert isinstance(claude, EstimateTokenizer)
    assert (claude.name, claude.exact, claude.family, claude.model) == \
        ("claude-estimate", False, "claude", "claude-sonnet-4-5-20250929")
    assert claude.scale == pytest.approx(claude.ratio * (1 + claude.margin))
    assert claude.margin > 0  # errs high until calibrated
    base = Tokenizer(claude.encoding)
    text = "Refund the reservation ABC123 and email the receipt. " * 20
    assert claude.count(text) == math.ceil(base.count(text) * claude.scale)
    assert list(claude.count_many(["", text])) == [0, claude.count(text)]
    gemini = Tokenizer.for_model("gemini-2.5-flash")
    assert isinstance(gemini, EstimateTokenizer) and gemini.name == "gemini-estimate"
    assert isinstance(Tokenizer.for_model("gpt-4o"), Tokenizer)  # exact where a vocabulary exists


def test_the_claude_profile_is_the_fit_of_the_tuning_half() -> None:
    tuning, held_out = ee.halves(ee.load())
    assert tuning and held_out and not set(c.source for c in tuning) & set(c.source for c in held_out)
    claude = EstimateTokenizer("claude-sonnet-4-5")
    assert claude.encoding == "cl100k_base"
    fit = ee.fit(tuning, claude.encoding)
    assert (claude.ratio, claude.tool_overhead, claude.margin) == (fit.ratio, fit.tool_overhead, fit.margin)
    covered = sum(ee.estimate(c, claude) >= c.billed for c in tuning)
    assert covered >= ee.COVERED * len(tuning)


def test_tools_are_counted_as_json_plus_the_tool_use_overhead() -> None:
    claude = EstimateTokenizer("claude-haiku-4-5")
    assert count_tools(WEATHER, claude) == claude.count(tools_json(WEATHER)) + claude.tool_overhead
    openai_shape = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                                      "parameters": WEATHER[0]["input_schema"]}}]
    assert tools_json(openai_shape) == tools_json(WEATHER)  # one rendering whatever the shape
    assert count_tools(None, claude) == count_tools([], claude) == 0
    exact = Tokenizer("o200k_base")  # Anthropic-shaped tools keep their parameters in OpenAI's rendering
    assert count_tools(WEATHER, exact) == count_tools(openai_shape, exact)


def test_a_window_for_claude_needs_no_tokenizer_or_budget() -> None:
    window = ContextWindow("claude-sonnet-4-5", tools=WEATHER)
    assert isinstance(window.tokenizer, EstimateTokenizer)
    assert window.max_tokens == 200_000
    window.add({"role": "user", "content": "What is the weather in Paris?"})
    assert window.usage.by_component["tool_definitions"] == count_tools(WEATHER, window.tokenizer)


def test_provider_prefixed_names_find_the_estimate_and_the_window() -> None:
    for model in ("anthropic:claude-sonnet-4-5", "us.anthropic.claude-opus-4-1-20250805-v1:0"):
        window = ContextWindow(model)
        assert window.tokenizer.name == "claude-estimate" and window.max_tokens == 200_000
    assert ContextWindow("google-gla:gemini-2.5-flash").max_tokens == 1_048_576
    assert price_for("anthropic:claude-sonnet-4-5") == price_for("claude-sonnet-4-5")
    assert context_window("gpt-4.5-preview") is None and context_window("openai:gpt-4o") == 128_000
    # Only dates, snapshots and version tags follow a known name: other suffixes are other models.
    for other in ("gemini-2.5-flash-preview-tts", "gpt-4-32k", "gemini-2.5-flash-image"):
        assert context_window(other) is None, other
    assert context_window("claude-3-5-sonnet-20240620") == 200_000
    assert context_window("gpt-3.5-turbo-0125") == 16_385


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(UnknownEncodingError, match="claude-\\*"):
        EstimateTokenizer("llama-3-70b")
    with pytest.raises(InvalidArgumentError, match="scale must be a number > 0 and <= 100, got 0"):
        EstimateTokenizer("claude-sonnet-4-5", scale=0.0)
    with pytest.raises(InvalidArgumentError, match="scale"):
        EstimateTokenizer("claude-sonnet-4-5", scale=float("nan"))
    with pytest.raises(InvalidTypeError, match="scale must be a number, not bool"):
        EstimateTokenizer("claude-sonnet-4-5", scale=True)
    with pytest.raises(InvalidTypeError, match="scale must be a number, not str"):
        EstimateTokenizer("claude-sonnet-4-5", scale="1.2")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="model"):
        EstimateTokenizer(3)  # type: ignore[arg-type]
    for huge in (1e300, 10**400, 100.5):
        with pytest.raises(InvalidArgumentError, match="<= 100"):
            EstimateTokenizer("claude-sonnet-4-5", scale=huge)
    bad_tools = [{"name": "f", "input_schema": {"type": "object", "default": {1, 2}}}]
    window = ContextWindow("claude-sonnet-4-5", tools=WEATHER)
    with pytest.raises(InvalidTypeError, match="tool definitions must be JSON data"):
        window.set_tools(bad_tools)
    assert window.tools == WEATHER


def test_images_are_counted_as_the_family_bills_them() -> None:
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]}
    claude = EstimateTokenizer("claude-sonnet-4-5")
    assert claude.count_message(image) >= 1600  # unknown size: the most Claude bills, detail aside
    assert claude.count_messages([image]) == claude.count_message(image) + 3
    assert image_tokens(model="claude-3-5-haiku", width=1092, height=1092) == 1590  # Anthropic's example
    assert image_tokens(model="claude-opus-4-1", width=200, height=200) == 54
    assert image_tokens(model="claude-opus-4-1", width=4000, height=3000) <= 1600  # resized first
    assert image_tokens(model="gemini-2.0-flash", width=384, height=300) == 258
    assert image_tokens(model="gemini-2.0-flash", width=1000, height=1000) == 4 * 258
    # A provider prefix keeps the model's own image pricing (and so its budget).
    for model in ("gpt-4o-mini", "gpt-4.1-mini", "o4-mini"):
        exact = Tokenizer.for_model(model)
        assert isinstance(exact, Tokenizer)
        for prefixed in (f"openai:{model}", f"openai/{model}"):
            again = Tokenizer.for_model(prefixed)
            assert again.count_message(image) == exact.count_message(image)
            assert again.count_messages([image]) == exact.count_messages([image])
    window = ContextWindow("openai:gpt-4o-mini", max_tokens=20_000)
    with pytest.raises(ContextOverflowError):
        window.add({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]})


def test_estimates_pickle() -> None:
    claude = EstimateTokenizer("claude-opus-4-1", scale=1.3)
    again = pickle.loads(pickle.dumps(claude))
    assert (again.model, again.scale, again.count("hello there")) == ("claude-opus-4-1", 1.3, claude.count("hello there"))


def _window(tokenizer: object) -> ContextWindow:
    window = ContextWindow("gpt-4o", max_tokens=4_000, tokenizer=tokenizer)  # type: ignore[arg-type]
    for turn in range(6):
        window.add({"role": "user", "content": f"question {turn} " + "about the booking " * 20})
        window.add({"role": "assistant", "content": f"answer {turn} " + "with the details " * 20})
    return window


def test_calibration_lowers_an_estimate_but_never_an_exact_count() -> None:
    estimate = _window(EstimateTokenizer("claude-sonnet-4-5"))
    counted = estimate.usage.total
    for _ in range(8):
        estimate.record_usage(int(counted * 0.8))
    assert estimate.usage.calibration == pytest.approx(0.8, abs=0.01)
    exact = _window(Tokenizer("o200k_base"))
    exact.record_usage(int(exact.usage.total * 0.8))
    assert exact.usage.calibration == 1.0
    assert calibration_bounds(exact=True) == (1.0, 1.5) and calibration_bounds(exact=False) == (0.5, 3.0)


def test_a_lowered_calibration_restored_into_an_exact_window_is_clamped() -> None:
    estimate = _window(EstimateTokenizer("claude-sonnet-4-5"))
    for _ in range(8):
        estimate.record_usage(int(estimate.usage.total * 0.7))
    checkpoint = estimate.checkpoint("keep going")
    exact = ContextWindow("gpt-4o", max_tokens=4_000)
    exact.restore(checkpoint)
    assert exact.usage.calibration == 1.0
    again = ContextWindow("gpt-4o", max_tokens=4_000, tokenizer=EstimateTokenizer("claude-sonnet-4-5"))
    again.restore(checkpoint)
    assert again.usage.calibration == pytest.approx(estimate.usage.calibration)


@settings(max_examples=60, deadline=None)
@given(exact=st.booleans(), reports=st.lists(st.floats(0.05, 8.0), min_size=1, max_size=12))
def test_calibration_stays_in_bounds_and_the_budget_holds(exact: bool, reports: list[float]) -> None:
    tokenizer = Tokenizer("o200k_base") if exact else HeuristicTokenizer(4.0)
    window = _window(tokenizer)
    low, high = calibration_bounds(tokenizer.exact)
    for factor in reports:
        before = (window.usage.calibration, window.messages())
        try:
            window.record_usage(max(1, int(window.usage.total * factor)))
        except ContextOverflowError:  # an overflow once calibrated leaves the window as it was
            assert (window.usage.calibration, window.messages()) == before
            continue
        usage = window.usage
        assert low <= usage.calibration <= high
        assert math.ceil(usage.total * usage.calibration) <= usage.budget
