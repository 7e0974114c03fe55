"""OpenAI Agents SDK with the session wrapper and the input filter, against the real package and
its ScriptedModel recording every call (no network): a multi-step tool-calling run with large tool
results under a small budget, then a second run reading the session."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing.model import ModelCall, ScriptedModel, assistant_message, function_call  # noqa: E402

from ctxwindow import Tokenizer  # noqa: E402
from ctxwindow.integrations.openai_agents import ContextWindowSession, call_model_input_filter  # noqa: E402
from ctxwindow.messages import check_history, from_responses  # noqa: E402

MAX_TOKENS = 6_000
set_tracing_disabled(True)  # no trace export: the tests run offline
INSTRUCTIONS = "You are a careful coding agent. Read files before answering."


@function_tool
def read_file(path: str) -> str:
    """Reads a file of the repository."""
    return f"# {path}\n" + "".join(f"line {i}: value = {i * 7}\n" for i in range(150))


def steps(count: int, tag: str) -> list[Any]:
    out: list[Any] = [[function_call("read_file", {"path": f"src/{tag}{k}_{j}.py"}, call_id=f"{tag}_{k}_{j}")
                       for j in range(1 + k % 2)] for k in range(count)]
    return out + [[assistant_message(f"The value is 42 ({tag}).", item_id=f"msg_{tag}")]]


def check_calls(calls: Sequence[ModelCall], question: str) -> None:
    tokenizer = Tokenizer.for_model("gpt-4o")
    for call in calls:
        messages = [{"role": "system", "content": call.system_instructions}] + from_responses(call.input)
        assert call.system_instructions == INSTRUCTIONS
        assert check_history(messages) == [], messages
        assert any(m["role"] == "user" and m["content"] == question for m in messages)
        assert tokenizer.count_messages(messages) <= MAX_TOKENS


def test_runs_with_session_and_filter_send_only_valid_inputs_that_fit(tmp_path: Any) -> None:
    model = ScriptedModel(steps(8, "a") + steps(3, "b"))
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=[read_file])
    inner = SQLiteSession("s1", str(tmp_path / "chats.db"))
    session = ContextWindowSession(inner, model="gpt-4o", max_tokens=MAX_TOKENS)
    config = RunConfig(call_model_input_filter=call_model_input_filter(model="gpt-4o", max_tokens=MAX_TOKENS))

    async def run() -> None:
        first = await Runner.run(agent, "What is the value in a7?", session=session, run_config=config)
        assert first.final_output == "The value is 42 (a)."
        second = await Runner.run(agent, "And in b2?", session=session, run_config=config)
        assert second.final_output == "The value is 42 (b)."

    asyncio.run(run())
    calls = model.calls
    assert len(calls) == 9 + 4
    check_calls(calls[:9], "What is the value in a7?")
    check_calls(calls[9:], "And in b2?")
    # The inner session keeps every item; the wrapper returns a managed, valid, budgeted history.
    everything = asyncio.run(inner.get_items())
    managed = asyncio.run(session.get_items())
    tokenizer = Tokenizer.for_model("gpt-4o")
    assert tokenizer.count_messages(from_responses(everything)) > 2.5 * MAX_TOKENS
    assert len(managed) < len(everything)
    assert check_history(from_responses(managed)) == []
    assert tokenizer.count_messages(from_responses(managed)) <= MAX_TOKENS
    # Kept items are the session's own items, unchanged.
    assert managed[-1] == everything[-1]


def test_the_filter_alone_keeps_a_long_run_within_budget() -> None:
    model = ScriptedModel(steps(10, "c"))
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=[read_file])
    config = RunConfig(call_model_input_filter=call_model_input_filter(model="gpt-4o", max_tokens=MAX_TOKENS))
    result = asyncio.run(Runner.run(agent, "Scan the c files.", run_config=config, max_turns=20))
    assert result.final_output == "The value is 42 (c)."
    check_calls(model.calls, "Scan the c files.")
    # The last call carried the newest tool results verbatim.
    last = model.calls[-1].input
    assert last[-1]["type"] == "function_call_output" and last[-1]["call_id"] == "c_9_1"


def test_bad_settings_fail_when_the_adapter_is_made() -> None:
    from ctxwindow import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="unknown ContextWindow settings"):
        call_model_input_filter(model="gpt-4o", max_tokens=MAX_TOKENS, bogus=1)


# --- the window's blocks (standing instructions, notes) reach every model call ----------------------

RULE = "From now on, always answer in French."
NOTE = "The build uses meson, not make."
SMALL = 2_500


@function_tool
def read_small(path: str) -> str:
    """Reads a file of the repository."""
    return f"# {path}\n" + "".join(f"line {i}: value = {i * 7}\n" for i in range(60))


def small_steps(count: int, tag: str) -> list[Any]:
    out: list[Any] = [[function_call("read_small", {"path": f"src/{tag}{k}.py"}, call_id=f"{tag}_{k}")]
                      for k in range(count)]
    return out + [[assistant_message(f"Fini ({tag}).", item_id=f"msg_{tag}")]]


def prompt_of(call: ModelCall) -> list[dict[str, Any]]:
    system = [{"role": "system", "content": call.system_instructions}] if call.system_instructions else []
    return system + from_responses(call.input)


def block_texts(call: ModelCall) -> list[str]:
    return [str(m["content"]) for m in prompt_of(call) if m["role"] in ("system", "developer")]


def check_block_calls(calls: Sequence[ModelCall], fits: bool = True) -> None:
    tokenizer = Tokenizer.for_model("gpt-4o")
    for call in calls:
        messages = prompt_of(call)
        assert check_history(messages) == [], messages
        assert sum("always answer in French" in str(m["content"]) for m in messages) == 1, messages
        assert sum(NOTE in t for t in block_texts(call)) == 1, messages
        assert sum(INSTRUCTIONS in t for t in block_texts(call)) == 1, messages
        # A session alone manages the history it returns, not the items a run adds to it.
        assert not fits or tokenizer.count_messages(messages) <= SMALL
    # The user's message left the later calls: the rule travelled in the instructions block.
    assert sum(not any(m["role"] == "user" and m["content"] == RULE for m in prompt_of(c)) for c in calls) >= 3


@pytest.mark.parametrize("use", ["session", "filter", "both"])
def test_a_rule_of_the_first_message_and_the_notes_reach_every_call(tmp_path: Any, use: str) -> None:
    model = ScriptedModel([[assistant_message("D'accord.", item_id="msg_ok")]] + small_steps(4, "a")
                          + small_steps(4, "b"))
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=[read_small])
    session = ContextWindowSession(SQLiteSession("s1", str(tmp_path / "chats.db")), model="gpt-4o",
                                   max_tokens=SMALL, system=INSTRUCTIONS)
    input_filter = call_model_input_filter(model="gpt-4o", max_tokens=SMALL)
    windows = {"session": [session.window], "filter": [input_filter.window],
               "both": [session.window, input_filter.window]}[use]
    for window in windows[:1]:
        window.write_note("decisions", NOTE)
    config = RunConfig(call_model_input_filter=input_filter) if use != "session" else RunConfig()

    async def run() -> None:
        history: list[Any] = []
        for question in [RULE, "Read the a files.", "Read the b files."]:
            if use == "filter":  # no session: the caller carries the history
                result = await Runner.run(agent, history + [{"role": "user", "content": question}],
                                          run_config=config)
                history = result.to_input_list()
            else:
                await Runner.run(agent, question, session=session, run_config=config)

    asyncio.run(run())
    assert len(model.calls) == 1 + 5 + 5
    check_block_calls(model.calls, fits=use != "session")
    assert [i.text for i in windows[0].instructions] == [RULE]


def test_a_removed_instruction_leaves_the_session_calls(tmp_path: Any) -> None:
    model = ScriptedModel([[assistant_message("D'accord.", item_id="msg_ok")]] + small_steps(4, "a")
                          + small_steps(2, "b") + small_steps(2, "c"))
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=[read_small])
    session = ContextWindowSession(SQLiteSession("s1", str(tmp_path / "chats.db")), model="gpt-4o",
                                   max_tokens=SMALL, system=INSTRUCTIONS)

    def run(question: str) -> list[ModelCall]:
        start = len(model.calls)
        asyncio.run(Runner.run(agent, question, session=session))
        return list(model.calls[start:])

    run(RULE)
    run("Read the a files.")
    for call in run("Read the b files."):  # the session evicted the rule's message: its block carries it
        assert not any(m["role"] == "user" and m["content"] == RULE for m in prompt_of(call))
        assert sum("always answer in French" in t for t in block_texts(call)) == 1
    session.window.remove_instruction(session.window.instructions[0].id)
    later = run("Read the c files.")
    assert len(later) == 3
    for call in later:
        assert not any("French" in str(m["content"]) for m in prompt_of(call)), prompt_of(call)
        assert sum(INSTRUCTIONS in t for t in block_texts(call)) == 1
