"""Bad input at the public entry points of the message converters, the history checks, the
strategies, scoring, fidelity, the summarizer, the cost model and the command line: each bad value
gets the package's typed error (a :class:`~ctxwindow.CtxWindowError`, also the matching builtin)
with a message that says what was wrong, and leaves every argument as it was."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwindow import (
    CtxWindowError,
    InvalidArgumentError,
    InvalidTextError,
    InvalidTypeError,
    MalformedMessageError,
    Tokenizer,
)
from ctxwindow import scoring
from ctxwindow._embed import embed
from ctxwindow.archive import Archive
from ctxwindow.cli import main
from ctxwindow.cost import ANTHROPIC, OPENAI, CacheRules, Prices, RunCost, call_cost, rules_for, shared_prefix
from ctxwindow.fidelity import key_fact_retention
from ctxwindow.formats import (
    from_anthropic,
    from_mini_swe_agent,
    from_openhands_completion,
    from_responses,
    from_swe_agent,
    from_tau_bench,
    infer_format,
    infer_trajectory,
    responses_turns,
    to_anthropic,
    to_responses,
    tools_of,
)
from ctxwindow.messages import check_history, repair_history, validate_message
from ctxwindow.models import context_window, price_for
from ctxwindow.strategies import (
    CallableStrategy,
    Cascade,
    ClearToolResults,
    CompactionState,
    DropOldest,
    Entry,
    Notes,
    ProgressiveSummarize,
    ScoredEviction,
    SemanticMerge,
    SlidingWindow,
    Summarize,
    TruncateToolResults,
)
from ctxwindow.summarizers import extractive
from ctxwindow.tools import count_tools, render_tools, tools_json

TOKENIZER = Tokenizer("o200k_base")
GOOD = [{"role": "user", "content": "hi"}]


def bad(value: object) -> Any:
    """A bad value, typed as anything (what a caller without a type checker passes)."""
    return value


def unchanged_or_typed(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> BaseException | None:
    """Calls ``function``: it either succeeds or raises a CtxWindowError (any other exception
    propagates and fails the test); in both cases its arguments are left as they were."""
    before = repr((args, kwargs))
    try:
        function(*args, **kwargs)
    except CtxWindowError as error:
        assert str(error), "a typed error says what was wrong"
        return error
    finally:
        assert repr((args, kwargs)) == before, f"{getattr(function, '__name__', function)} changed its arguments"
    return None


# --- the named cases -------------------------------------------------------------------------------


@pytest.mark.parametrize("convert", [to_anthropic, to_responses, from_anthropic])
def test_a_converter_names_the_message_that_is_not_a_dict(convert: Callable[[Any], Any]) -> None:
    messages = [{"role": "user", "content": "hi"}, 5]
    before = copy.deepcopy(messages)
    with pytest.raises(MalformedMessageError, match=r"message 1: a message must be a dict, not int"):
        convert(messages)
    assert messages == before


def test_every_converter_names_the_record_that_is_not_a_dict() -> None:
    cases: list[tuple[Callable[[Any], Any], Any, str | None]] = [
        (from_responses, [{"role": "user", "content": "hi"}, "x"], r"item 1: a Responses item must be a dict, not str"),
        (responses_turns, [None], r"item 0: a Responses item must be a dict, not NoneType"),
        (from_swe_agent, {"history": [{"role": "user", "content": "a"}, 3.5]}, r"history\[1\]: .* not float"),
        (from_tau_bench, {"traj": [[]]}, r"message 0: a message must be a dict, not list"),
        (from_openhands_completion, {"messages": [], "response": {"choices": [{"message": {"role": 5}}]}},
         None),
    ]
    for convert, value, pattern in cases:
        before = copy.deepcopy(value)
        if pattern is None:
            convert(value)
        else:
            with pytest.raises(MalformedMessageError, match=pattern):
                convert(value)
        assert value == before


@pytest.mark.parametrize("convert", [to_anthropic, to_responses, from_anthropic, from_responses, responses_turns,
                                     check_history, repair_history])
@pytest.mark.parametrize("value", [None, 5, "user", {"role": "user", "content": "hi"}, b"[]"])
def test_a_list_of_messages_that_is_not_a_list_is_a_type_error(convert: Callable[[Any], Any], value: Any) -> None:
    with pytest.raises(InvalidTypeError, match=r"must be a list, not"):
        convert(value)


def test_nested_parts_that_are_not_dicts_are_named() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": ["not a call"]}
    with pytest.raises(MalformedMessageError, match=r"message 1: a tool call must be a dict, not str"):
        to_anthropic([{"role": "user", "content": "hi"}, call])
    with pytest.raises(MalformedMessageError, match=r"message 1: a tool call must be a dict, not str"):
        to_responses([{"role": "user", "content": "hi"}, call])
    with pytest.raises(MalformedMessageError, match=r"message 0: a content part must be a dict, not int"):
        to_anthropic([{"role": "user", "content": [5]}])
    with pytest.raises(MalformedMessageError, match=r"message 0: content must be a str, None or a list"):
        to_responses([{"role": "user", "content": 5}])
    with pytest.raises(MalformedMessageError, match=r"message 0: a tool_use input must be JSON data"):
        from_anthropic([{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "input": {1, 2}}]}])
    with pytest.raises(MalformedMessageError, match=r"message 0: the arguments of tool call 'a' must be a JSON str"):
        to_anthropic([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": 5}}]}])
    with pytest.raises(InvalidTypeError, match=r"system must be a str or None, not int"):
        from_anthropic([], system=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -math.inf, -1.0, 0, 0.0,
                                     pytest.param(10**400, id="10**400")])
def test_summarize_refuses_a_timeout_that_is_not_a_finite_positive_number(timeout: float) -> None:
    with pytest.raises(InvalidArgumentError, match=r"timeout \(seconds, or None for no limit\) must be a finite number"):
        Summarize(timeout=timeout)


@pytest.mark.parametrize("timeout", [True, "30", [30]])
def test_summarize_refuses_a_timeout_of_another_type(timeout: Any) -> None:
    with pytest.raises(InvalidTypeError, match=r"timeout .* must be a number, not"):
        Summarize(timeout=timeout)


def test_summarize_keeps_its_valid_timeouts() -> None:
    assert Summarize(timeout=None).timeout is None
    assert Summarize(timeout=0.5).timeout == 0.5
    assert Summarize(timeout=3).timeout == 3


@pytest.mark.parametrize("make, error, pattern", [
    (lambda: Summarize(preserve_recent=bad(-1)), InvalidArgumentError, r"preserve_recent must be >= 0, got -1"),
    (lambda: Summarize(preserve_recent=bad(2.5)), InvalidTypeError, r"preserve_recent must be an int, not float"),
    (lambda: Summarize(preserve_recent=bad(True)), InvalidTypeError, r"preserve_recent must be an int, not bool"),
    (lambda: Summarize(summarizer=bad("extractive")), InvalidTypeError, r"summarizer must be a callable"),
    (lambda: ProgressiveSummarize(levels=bad((1, 5))), InvalidTypeError, r"levels must be three ints"),
    (lambda: ProgressiveSummarize(levels=bad((1.0, 5, 20))), InvalidTypeError, r"levels must be three ints"),
    (lambda: ProgressiveSummarize(levels=bad(5)), InvalidTypeError, r"levels must be three ints"),
    (lambda: ProgressiveSummarize(levels=bad((5, 1, 20))), InvalidArgumentError, r"levels must be three increasing"),
    (lambda: ClearToolResults(keep=bad(math.nan)), InvalidTypeError, r"keep must be an int, not float"),
    (lambda: ClearToolResults(keep=bad(-1)), InvalidArgumentError, r"keep must be >= 0, got -1"),
    (lambda: ClearToolResults(clear_at_least=bad("5")), InvalidTypeError, r"clear_at_least must be an int, not str"),
    (lambda: ClearToolResults(exclude_tools=bad("bash")), InvalidTypeError, r"exclude_tools must be a list"),
    (lambda: ClearToolResults(exclude_tools=bad([1])), InvalidTypeError, r"exclude_tools must hold tool names"),
    (lambda: DropOldest(low_watermark=bad(True)), InvalidTypeError, r"low_watermark must be a number, not bool"),
    (lambda: DropOldest(low_watermark=bad(math.nan)), InvalidArgumentError, r"low_watermark must be in \(0, 1\]"),
    (lambda: DropOldest(low_watermark=bad("0.5")), InvalidTypeError, r"low_watermark must be a number, not str"),
    (lambda: TruncateToolResults(max_chars=bad(math.inf)), InvalidTypeError, r"max_chars must be an int, not float"),
    (lambda: TruncateToolResults(max_chars=bad(0)), InvalidArgumentError, r"max_chars must be >= 1, got 0"),
    (lambda: SlidingWindow(n=bad(-3)), InvalidArgumentError, r"n must be >= 0, got -3"),
    (lambda: ScoredEviction(policy=bad("oldest")), InvalidArgumentError, r"unknown policy 'oldest'; known: retention"),
    (lambda: ScoredEviction(policy=bad(None)), InvalidTypeError, r"policy must be a str, not NoneType"),
    (lambda: SemanticMerge(threshold=bad(math.nan)), InvalidArgumentError, r"threshold must be in \(0, 1\]"),
    (lambda: SemanticMerge(threshold=bad("high")), InvalidTypeError, r"threshold must be a number, not str"),
    (lambda: SemanticMerge(embedder=bad([1.0])), InvalidTypeError, r"embedder must be a callable"),
    (lambda: Notes(max_tokens=bad(math.inf)), InvalidTypeError, r"max_tokens must be an int, not float"),
    (lambda: Cascade(bad(5)), InvalidTypeError, r"strategies must be a list of strategies, not int"),
    (lambda: Cascade(bad([None])), InvalidTypeError, r"a strategy must have name, cost and apply"),
    (lambda: CallableStrategy(bad(5)), InvalidTypeError, r"function must be a callable"),
])
def test_strategies_check_their_parameters_at_construction(make: Callable[[], object], error: type[Exception],
                                                           pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        make()


def test_a_strategys_list_argument_is_not_changed() -> None:
    tools = ["bash", "grep"]
    strategy = ClearToolResults(exclude_tools=tools)
    assert tools == ["bash", "grep"] and strategy.exclude_tools == ("bash", "grep")
    levels = [1, 5, 20]
    assert ProgressiveSummarize(levels=levels).levels == (1, 5, 20)  # type: ignore[arg-type]
    assert levels == [1, 5, 20]


@pytest.mark.parametrize("output_tokens, tool_tokens, error, pattern", [
    (math.nan, 0, InvalidTypeError, r"output_tokens must be an int, not float"),
    (-1, 0, InvalidArgumentError, r"output_tokens must be >= 0, got -1"),
    (10, -5, InvalidArgumentError, r"tool_tokens must be >= 0, got -5"),
    (10, math.inf, InvalidTypeError, r"tool_tokens must be an int, not float"),
    (True, 0, InvalidTypeError, r"output_tokens must be an int, not bool"),
])
def test_run_cost_refuses_bad_token_counts_and_changes_nothing(output_tokens: Any, tool_tokens: Any,
                                                               error: type[Exception], pattern: str) -> None:
    run = RunCost(TOKENIZER, Prices(2.5, 1.25, 10.0), OPENAI)
    run.call([{"role": "user", "content": "hello"}], 5)
    before = (run.summary(), list(run.calls), list(run.prefixes))
    prompt = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    with pytest.raises(error, match=pattern):
        run.call(prompt, output_tokens, tool_tokens)
    assert (run.summary(), run.calls, run.prefixes) == before
    assert prompt == [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    run.call(prompt, 5)  # the run goes on from the call before the refused one
    assert len(run.calls) == 2


def test_run_cost_refuses_a_prompt_of_non_messages_and_changes_nothing() -> None:
    run = RunCost(TOKENIZER, Prices(2.5, 1.25, 10.0), OPENAI)
    with pytest.raises(MalformedMessageError):
        run.call([{"role": "user", "content": "hello"}, "hi"], 5)  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError, match=r"prompt must be a list, not NoneType"):
        run.call(None, 5)  # type: ignore[arg-type]
    assert run.calls == [] and run.summary()["input_tokens"] == 0
    with pytest.raises(InvalidTypeError, match=r"prices must be a Prices, not dict"):
        RunCost(TOKENIZER, {"input": 1.0}, OPENAI)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"counter must be a token counter"):
        RunCost("o200k_base", Prices(2.5, 1.25, 10.0), OPENAI)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"CacheRules.minimum must be >= 0, got -1"):
        CacheRules("x", -1, 0)
    with pytest.raises(InvalidTypeError, match=r"prompt_tokens must be an int, not float"):
        call_cost(math.nan, 0, 0, Prices(2.5, 1.25, 10.0))  # type: ignore[arg-type]


def _state(contents: list[str]) -> CompactionState:
    entries = [Entry({"role": "tool", "tool_call_id": f"c{i}", "name": "poll", "content": text}, 20, i, i, i)
               for i, text in enumerate(contents)]
    return CompactionState(entries=entries, count_message=TOKENIZER.count_message, overhead=0, budget=40,
                           target=10, archive=Archive(), current_turn=len(contents))


@pytest.mark.parametrize("returned, error, pattern", [
    (lambda texts: list(texts), InvalidTypeError, r"the embedder returned a list of str, expected an array of numbers"),
    (lambda texts: [["0.5", "x"] for _ in texts], InvalidTypeError, r"returned a list of list of str"),
    (lambda texts: None, InvalidTypeError, r"the embedder returned a NoneType"),
    (lambda texts: [[1.0], [1.0, 2.0]], InvalidTypeError, r"the embedder returned a list of list of float"),
    (lambda texts: np.ones(3), InvalidArgumentError, r"returned an array of dtype float64 and shape \(3,\), expected"),
    (lambda texts: np.full((len(texts), 4), np.nan), InvalidArgumentError, r"NaN or infinite"),
])
def test_an_embedder_that_returns_no_array_of_numbers_is_a_typed_error(
        returned: Callable[[Any], Any], error: type[Exception], pattern: str) -> None:
    state = _state(["status: running 1", "status: running 2"])
    before = list(state.entries)
    with pytest.raises(error, match=pattern):
        SemanticMerge(embedder=returned).apply(state)
    assert state.entries == before and state.evicted == []
    with pytest.raises(error, match=pattern):
        embed(returned, ["a", "b"])


@pytest.mark.parametrize("call", [
    lambda: key_fact_retention("order ABC123 \ud800", "ABC123"),
    lambda: key_fact_retention("ABC123", "\udfff"),
    lambda: extractive("", "<transcript>\nuser: hi \ud83d\n</transcript>"),
    lambda: Notes().write_note("bugs", "the parser drops \udc80"),
])
def test_python_text_entry_points_refuse_lone_surrogates(call: Callable[[], object]) -> None:
    with pytest.raises(InvalidTextError, match=r"not valid Unicode: a lone surrogate"):
        call()


def test_a_refused_note_leaves_the_notebook_as_it_was() -> None:
    notes = Notes()
    notes.write_note("bugs", "first")
    with pytest.raises(InvalidTextError):
        notes.write_note("bugs", "\ud800")
    with pytest.raises(InvalidArgumentError, match=r"unknown importance \[\]"):
        notes.write_note("bugs", "x", [])  # type: ignore[arg-type]
    assert [n.text for n in notes.notes] == ["first"]


def test_text_entry_points_refuse_what_is_not_text() -> None:
    with pytest.raises(InvalidTypeError, match=r"original must be a str, not bytes"):
        key_fact_retention(b"ABC123", "ABC123")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"user must be a str, not NoneType"):
        extractive("", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"tokenizer must be a token counter"):
        count_tools([{"name": "f"}], "o200k_base")  # a str has a count method, of another kind


def _chat_file(tmp_path: Path) -> str:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]))
    return str(path)


@pytest.mark.parametrize("extra", [
    ["count", "--estimate", "nan"], ["count", "--estimate", "-1"], ["count", "--estimate", "inf"],
    ["count", "--estimate", "0"], ["count", "--index", "99"], ["count", "--model", "no-such-model"],
    ["replay", "--quiet", "--max-tokens", "-5"], ["replay", "--quiet", "--reserve-output", "-1"],
    ["replay", "--quiet", "--preserve-recent", "-1"], ["replay", "--quiet", "--estimate", "nan"],
    ["replay", "--quiet", "--max-tokens", "10"],
])
def test_the_command_line_answers_bad_settings_with_one_line_and_exit_code_2(
        tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    command, *options = extra
    code = main([command, _chat_file(tmp_path), *options])
    assert code in (0, 2)
    if code == 2:
        err = capsys.readouterr().err
        assert err.startswith("ctxwindow: ") and err.count("\n") == 1, err


# --- the property ----------------------------------------------------------------------------------

KEYS = ["role", "content", "type", "text", "tool_calls", "tool_call_id", "id", "function", "name", "arguments",
        "source", "input", "output", "call_id", "image_url", "url", "history", "traj", "messages", "responses",
        "tool_use_id", "input_schema", "parameters", "properties", "items", "default", "enum", "info",
        "trajectory_format", "response", "choices", "kwargs", "tools", "object", "llm_path", "system"]
WORDS = ["user", "assistant", "tool", "system", "developer", "exit", "text", "image", "image_url", "tool_use",
         "tool_result", "function", "function_call", "function_call_output", "message", "reasoning", "input_text",
         "output_text", "input_image", "refusal", "base64", "object", "string", "array", "{}", "[1]", "response",
         "mini-swe-agent-1.1", "responses"]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.binary(max_size=6),
    st.text(max_size=6), st.sampled_from(WORDS), st.sampled_from(["\ud800", "a\udfffb", "\udc80\ud800"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=3)), children, max_size=5),
    ),
    max_leaves=14,
)
#: Parts and blocks of a known type whose other fields are anything.
PARTS = st.fixed_dictionaries(
    {"type": st.sampled_from(WORDS)},
    optional={key: VALUES for key in ("text", "image_url", "source", "input", "content", "id", "name",
                                      "tool_use_id", "refusal", "detail", "call_id", "arguments", "output")},
)
#: Messages and items of a known role or type whose other fields are anything (or parts).
MESSAGES = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool"])},
    optional={"content": st.one_of(VALUES, st.lists(PARTS, max_size=3)), "tool_calls": st.one_of(
        VALUES, st.lists(st.fixed_dictionaries({"id": VALUES, "function": st.one_of(VALUES, st.fixed_dictionaries(
            {"name": VALUES, "arguments": VALUES}))}), max_size=2)),
        "tool_call_id": VALUES, "name": VALUES, "responses": st.one_of(VALUES, st.lists(PARTS, max_size=2)),
        "type": st.sampled_from(WORDS), "call_id": VALUES, "output": VALUES, "arguments": VALUES},
)
MESSAGE_LISTS = st.lists(st.one_of(VALUES, MESSAGES, PARTS), max_size=5)
ANY = st.one_of(VALUES, MESSAGE_LISTS)

CONVERTERS: list[Callable[..., Any]] = [
    from_anthropic, to_anthropic, from_responses, to_responses, responses_turns, infer_format, infer_trajectory,
    from_swe_agent, from_tau_bench, from_mini_swe_agent, from_openhands_completion, tools_of, check_history,
    repair_history, validate_message, render_tools, tools_json, price_for, rules_for, context_window,
]
STRATEGIES: list[tuple[Callable[..., Any], str]] = [
    (TruncateToolResults, "max_chars"), (ClearToolResults, "keep"), (ClearToolResults, "clear_at_least"),
    (ClearToolResults, "exclude_tools"), (DropOldest, "low_watermark"), (SlidingWindow, "n"),
    (ScoredEviction, "policy"), (Summarize, "summarizer"), (Summarize, "preserve_recent"), (Summarize, "timeout"),
    (ProgressiveSummarize, "levels"), (ProgressiveSummarize, "summarizer"), (Notes, "max_tokens"),
    (SemanticMerge, "threshold"), (SemanticMerge, "embedder"), (Cascade, "strategies"),
    (CallableStrategy, "function"),
]
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.sampled_from(CONVERTERS), ANY)
def test_converters_and_checks_answer_any_value_with_a_result_or_a_typed_error(
        convert: Callable[..., Any], value: Any) -> None:
    unchanged_or_typed(convert, value)


@PROPERTY
@given(MESSAGE_LISTS, VALUES)
def test_from_anthropic_with_any_system(messages: list[Any], system: Any) -> None:
    unchanged_or_typed(from_anthropic, messages, system)


@PROPERTY
@given(st.sampled_from(STRATEGIES), ANY)
def test_strategy_constructors_answer_any_parameter_with_a_strategy_or_a_typed_error(
        strategy: tuple[Callable[..., Any], str], value: Any) -> None:
    make, parameter = strategy
    unchanged_or_typed(make, **{parameter: value})


@PROPERTY
@given(VALUES, VALUES, VALUES)
def test_notes_answer_any_note_with_a_note_or_a_typed_error(category: Any, text: Any, importance: Any) -> None:
    notes = Notes()
    error = unchanged_or_typed(notes.write_note, category, text, importance)
    assert len(notes.notes) == (0 if error is not None else 1)


@PROPERTY
@given(st.one_of(VALUES, st.sampled_from(scoring.POLICIES)), VALUES, st.sampled_from(
    ["tokens", "created_turn", "last_access_turn", "access_count", "content_type", "priority", "pinned",
     "reference_count", "embedding", "params"]), ANY)
def test_scoring_answers_any_column_with_scores_or_a_typed_error(policy: Any, turn: Any, column: str,
                                                                   value: Any) -> None:
    unchanged_or_typed(scoring.score, policy, current_turn=turn, **{column: value})
    columns = {"last_access_turn": [1, 2], "access_count": [0, 1], column: value}
    unchanged_or_typed(scoring.score, "retention", current_turn=3, **columns)


@PROPERTY
@given(ANY, st.sampled_from(["tokens", "pinned", "content_type", "target_free_tokens", "ratio", "min_keep"]), ANY)
def test_selection_answers_any_input_with_indices_or_a_typed_error(scores: Any, name: str, value: Any) -> None:
    unchanged_or_typed(scoring.select_evictions, scores, ratio=0.5)
    options: dict[str, Any] = {"tokens": [1, 2, 3], name: value}
    if name != "target_free_tokens":
        options.setdefault("ratio", 0.5)
    unchanged_or_typed(scoring.select_evictions, [0.5, 0.1, 0.9], **options)


@PROPERTY
@given(ANY, ANY)
def test_text_functions_answer_any_value_with_a_result_or_a_typed_error(first: Any, second: Any) -> None:
    unchanged_or_typed(key_fact_retention, first, second)
    unchanged_or_typed(extractive, first, second)
    unchanged_or_typed(key_fact_retention, "order ABC123 at 10:30", first)
    unchanged_or_typed(extractive, "", first)


@PROPERTY
@given(ANY, VALUES, VALUES, VALUES)
def test_the_cost_model_answers_any_value_with_a_price_or_a_typed_error(prompt: Any, output: Any, tools: Any,
                                                                         price: Any) -> None:
    run = RunCost(TOKENIZER, Prices(2.5, 1.25, 10.0), ANTHROPIC)
    error = unchanged_or_typed(run.call, prompt, output, tools)
    assert len(run.calls) == (0 if error is not None else 1)
    unchanged_or_typed(Prices, price, 0.1, 1.0)
    unchanged_or_typed(Prices, 1.0, 0.1, price, price)
    unchanged_or_typed(CacheRules, "x", price, 0)
    unchanged_or_typed(RunCost, TOKENIZER, price, OPENAI)
    unchanged_or_typed(call_cost, 10, price, 0, Prices(1.0, 0.5, 2.0))
    unchanged_or_typed(shared_prefix, GOOD, prompt, TOKENIZER, tool_tokens=0)


@PROPERTY
@given(ANY, ANY)
def test_counting_tools_answers_any_definitions_with_a_count_or_a_typed_error(tools: Any, other: Any) -> None:
    unchanged_or_typed(count_tools, tools, TOKENIZER)
    unchanged_or_typed(count_tools, [{"type": "function", "function": {"name": "f", "parameters": tools}}],
                       TOKENIZER)
    unchanged_or_typed(count_tools, [{"name": "f", "input_schema": {"type": "object", "properties": {
        "x": {"type": "string", "default": other, "enum": tools}}}}], TOKENIZER)
    unchanged_or_typed(count_tools, [{"name": "f"}], other)
