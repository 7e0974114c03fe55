"""Pydantic AI 2.x with the history processor, against the real package and its FunctionModel
recording every request (no network): multi-step tool-calling runs, sync and async, with large
tool returns under a small budget."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.capabilities import ProcessHistory  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from ctxwindow import Tokenizer  # noqa: E402
from ctxwindow.integrations.pydantic_ai import from_chat, history_processor, to_chat  # noqa: E402
from ctxwindow.messages import check_history  # noqa: E402

MAX_TOKENS = 6_000
SYSTEM = "You are a careful coding agent. Read files before answering."


def chat(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    flat = [m for message in messages for m in to_chat(message)]
    systems = [m for m in flat if m["role"] == "system"]
    return systems + [m for m in flat if m["role"] != "system"]


def recording_model(steps: int, received: list[list[ModelMessage]]) -> FunctionModel:
    calls: dict[str, int] = {}

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        question = [m["content"] for m in chat(messages) if m["role"] == "user"][-1]
        done = calls[question] = calls.get(question, -1) + 1
        if done < steps:
            return ModelResponse(parts=[TextPart(f"step {done}"), *[
                ToolCallPart("read_file", {"path": f"src/m{done}_{j}.py"}, tool_call_id=f"call_{done}_{j}")
                for j in range(1 + done % 2)]])
        return ModelResponse(parts=[TextPart("The value is 42.")])

    return FunctionModel(reply)


def make_agent(steps: int, received: list[list[ModelMessage]]) -> Agent[None, str]:
    processor = history_processor(model="gpt-4o", max_tokens=MAX_TOKENS)
    agent = Agent(recording_model(steps, received), system_prompt=SYSTEM, capabilities=[ProcessHistory(processor)])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Reads a file of the repository."""
        return f"# {path}\n" + "".join(f"line {i}: value = {i * 7}\n" for i in range(150))

    return agent


def check_requests(received: list[list[ModelMessage]], question: str) -> None:
    tokenizer = Tokenizer.for_model("gpt-4o")
    for messages in received:
        request = chat(messages)
        assert check_history(request) == [], request
        assert request[0] == {"role": "system", "content": SYSTEM}
        assert sum(m["role"] == "system" for m in request) == 1
        assert any(m["role"] == "user" and m["content"] == question for m in request)
        assert tokenizer.count_messages(request) <= MAX_TOKENS


@pytest.fixture
def fresh_event_loop() -> Any:
    """A current event loop of this test's own (another framework's ``run_sync`` earlier in the
    session may leave a shut-down loop set as current)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
    asyncio.set_event_loop(None)


def test_a_multi_step_run_sends_only_valid_requests_that_fit(fresh_event_loop: Any) -> None:
    received: list[list[ModelMessage]] = []
    question = "What is the value in m7?"
    result = make_agent(8, received).run_sync(question)
    assert result.output == "The value is 42."
    assert len(received) == 9
    check_requests(received, question)
    # What the tools returned over the run is several budgets long: the budget was the constraint.
    tokenizer = Tokenizer.for_model("gpt-4o")
    returns = {m["tool_call_id"]: m for r in received for m in chat(r) if m["role"] == "tool"}
    assert len(returns) == sum(1 + k % 2 for k in range(8))
    assert sum(tokenizer.count_message(m) for m in returns.values()) > 2.5 * MAX_TOKENS
    # The requests kept the newest tool round as the run's own objects.
    last = received[-1][-1]
    assert isinstance(last, ModelRequest) and isinstance(last.parts[0], ToolReturnPart)
    assert last.timestamp is not None


def test_async_runs_and_a_follow_up_with_the_message_history() -> None:
    received: list[list[ModelMessage]] = []
    agent = make_agent(4, received)

    async def run() -> None:
        first = await agent.run("first question")
        await agent.run("second question", message_history=first.all_messages())

    asyncio.run(run())
    later = [r for r in received if any(m["content"] == "second question" for m in chat(r) if m["role"] == "user")]
    assert later
    check_requests(later, "second question")


def test_parts_convert_both_ways() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("rules"), UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("let me look"), ToolCallPart("grep", {"q": "x"}, tool_call_id="a"),
                             ToolCallPart("ls", "{}", tool_call_id="b")]),
        ModelRequest(parts=[ToolReturnPart("grep", "found", tool_call_id="a"),
                            ToolReturnPart("ls", "bad args", tool_call_id="b", outcome="retried")]),
        ModelResponse(parts=[TextPart("done")]),
    ]
    flat = [m for message in messages for m in to_chat(message)]
    assert [m["role"] for m in flat] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert flat[2]["tool_calls"][0]["function"] == {"name": "grep", "arguments": '{"q":"x"}'}
    assert check_history(flat) == []
    back = from_chat(flat)
    assert [type(m) for m in back] == [ModelRequest, ModelResponse, ModelRequest, ModelResponse]
    assert [m for message in back for m in to_chat(message)][:4] == flat[:4]
    assert isinstance(back[2].parts[0], ToolReturnPart) and back[2].parts[0].tool_name == "grep"


# --- the window's blocks (standing instructions, notes) on a history kept over many runs ----------

RULE = "From now on, always answer in French."
NOTE = "The build uses meson, not make."
SMALL = 2_500


def block_agent(received: list[list[ModelMessage]], processor: Any, **options: Any) -> Agent[None, str]:
    calls: dict[str, int] = {}

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        question = [m["content"] for m in chat(messages) if m["role"] == "user"][-1]
        done = calls[question] = calls.get(question, -1) + 1
        if done < 2 and question != RULE:
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": f"src/{done}.py"},
                                                     tool_call_id=f"call_{len(received)}")])
        return ModelResponse(parts=[TextPart("Fini.")])

    agent = Agent(FunctionModel(reply), capabilities=[ProcessHistory(processor)], **options)

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Reads a file of the repository."""
        return f"# {path}\n" + "".join(f"line {i}: value = {i * 7}\n" for i in range(60))

    return agent


def sent(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The prompt as Pydantic AI sends it: the instructions of the latest request (they travel
    beside the history), the system prompt parts, then the conversation."""
    instructions = next((m.instructions for m in reversed(messages) if isinstance(m, ModelRequest) and m.instructions),
                        None)
    flat = chat([replace(m, instructions=None) if isinstance(m, ModelRequest) else m for m in messages])
    return ([{"role": "system", "content": instructions}] if instructions else []) + flat


def system_texts(messages: list[ModelMessage]) -> list[str]:
    return [str(m["content"]) for m in sent(messages) if m["role"] == "system"]


def runs(agent: Agent[None, str], prompts: list[str], history: list[ModelMessage] | None = None) -> list[ModelMessage]:
    messages = list(history or [])
    for prompt in prompts:
        messages = agent.run_sync(prompt, message_history=messages).all_messages()
    return messages


@pytest.mark.parametrize("options", [{"system_prompt": SYSTEM}, {"instructions": SYSTEM}], ids=["system_prompt", "instructions"])
def test_twelve_runs_on_one_history_send_each_block_once(fresh_event_loop: Any, options: dict[str, Any]) -> None:
    received: list[list[ModelMessage]] = []
    processor = history_processor(model="gpt-4o", max_tokens=SMALL)
    processor.window.write_note("decisions", NOTE)
    agent = block_agent(received, processor, **options)
    runs(agent, [RULE] + [f"Read the files of part {k}." for k in range(11)])
    assert len(received) == 1 + 11 * 3
    tokenizer = Tokenizer.for_model("gpt-4o")
    for messages in received:
        request = sent(messages)
        if "instructions" in options:  # travel on the request, as Pydantic AI sends them
            assert request[0] == {"role": "system", "content": SYSTEM}
        assert check_history(request) == [], request
        systems = system_texts(messages)
        assert sum(SYSTEM in t for t in systems) == 1, systems
        assert sum(NOTE in t for t in systems) == 1, systems
        assert sum("always answer in French" in str(m["content"]) for m in request) == 1, request
        assert tokenizer.count_messages(request) <= SMALL
    # The first request carries the blocks too, and the user's message left the later ones.
    assert NOTE in "".join(system_texts(received[0]))
    assert sum(not any(m["role"] == "user" and m["content"] == RULE for m in sent(r)) for r in received) >= 20


def test_a_removed_or_superseded_instruction_leaves_the_later_requests(fresh_event_loop: Any) -> None:
    received: list[list[ModelMessage]] = []
    processor = history_processor(model="gpt-4o", max_tokens=SMALL)
    agent = block_agent(received, processor, system_prompt=SYSTEM)
    history = runs(agent, [RULE, "Read part 1.", "Read part 2."])
    assert "always answer in French" in "".join(system_texts(received[-1]))
    window = processor.window
    window.remove_instruction(window.instructions[0].id)
    start = len(received)
    history = runs(agent, ["Read part 3.", "From now on, always answer in German.", "Read part 4.", "Read part 5."],
                   history)
    for messages in received[start:]:
        assert not any("French" in str(m["content"]) for m in sent(messages)), sent(messages)
    assert "always answer in German" in "".join(system_texts(received[-1]))
    # Superseded: a later rule on the same subject replaces the earlier one in the block.
    start = len(received)
    runs(agent, ["From now on, always answer in Spanish.", "Read part 6.", "Read part 7."], history)
    assert "German" not in "".join(system_texts(received[-1]))
    assert "always answer in Spanish" in "".join(system_texts(received[-1]))
    assert [i.text for i in window.instructions] == ["From now on, always answer in Spanish."]
