"""LangChain v1 ``create_agent`` with the middleware, against the real package and a chat model
that records every request it receives (no network): a multi-step tool-calling run with large
tool results under a small budget."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_openai_messages, trim_messages  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from pydantic import Field  # noqa: E402

from ctxwindow import Tokenizer  # noqa: E402
from ctxwindow.tools import count_tools  # noqa: E402
from ctxwindow.integrations.langchain import ContextWindowMiddleware, token_counter  # noqa: E402
from ctxwindow.messages import check_history  # noqa: E402

MAX_TOKENS = 6_000
SYSTEM = "You are a careful coding agent. Read files before answering."


class RecordingModel(BaseChatModel):
    """Replies from a script (tool calls, then an answer) and records each request as chat dicts."""

    script: list[AIMessage]
    received: list[list[dict[str, Any]]] = Field(default_factory=list)
    ids: list[list[str | None]] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.received.append(convert_to_openai_messages(messages))
        self.ids.append([m.id for m in messages if m.type != "system"])
        reply = self.script[min(len(self.received), len(self.script)) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tools = list(tools)
        return self


@tool
def read_file(path: str) -> str:
    """Reads a file of the repository."""
    return f"# {path}\n" + "".join(f"line {i}: value = {i * 7}\n" for i in range(150))


def script(steps: int) -> list[AIMessage]:
    replies = [AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": f"src/m{k}_{j}.py"},
                                          "id": f"call_{k}_{j}", "type": "tool_call"} for j in range(1 + k % 2)])
               for k in range(steps)]
    return replies + [AIMessage("The value is 42.")]


def check_requests(model: RecordingModel, question: str) -> None:
    tokenizer = Tokenizer.for_model("gpt-4o")
    assert len(model.received) >= 2
    from langchain_core.utils.function_calling import convert_to_openai_tool
    tools = [convert_to_openai_tool(t) for t in model.tools]
    tool_tokens = count_tools(tools, tokenizer)
    for request in model.received:
        assert check_history(request) == [], request
        assert request[0] == {"role": "system", "content": SYSTEM}
        assert any(m["role"] == "user" and m["content"] == question for m in request)
        assert tokenizer.count_messages(request) + tool_tokens <= MAX_TOKENS


def test_create_agent_requests_fit_and_are_valid_while_the_state_keeps_everything() -> None:
    model = RecordingModel(script=script(8))
    middleware = ContextWindowMiddleware(model="gpt-4o", max_tokens=MAX_TOKENS)
    agent = create_agent(model, tools=[read_file], system_prompt=SYSTEM, middleware=[middleware])
    question = "What is the value in m7?"
    result = agent.invoke({"messages": [HumanMessage(question)]})
    assert len(model.received) == 9
    check_requests(model, question)
    # The full history stays in the state: 1 question, 8 tool rounds, the answer.
    assert len(result["messages"]) == 1 + sum(1 + (1 + k % 2) for k in range(8)) + 1
    assert result["messages"][-1].content == "The value is 42."
    unmanaged = Tokenizer.for_model("gpt-4o").count_messages(convert_to_openai_messages(result["messages"]))
    assert unmanaged > 2.5 * MAX_TOKENS  # the budget really was the constraint
    # The last request ends with the newest tool round, verbatim, and its messages are the
    # state's own objects (same ids).
    assert model.received[-1][-1] == {"role": "tool", "tool_call_id": "call_7_1", "name": "read_file",
                                      "content": read_file.invoke({"path": "src/m7_1.py"})}
    state_ids = {m.id for m in result["messages"]}
    assert all(i in state_ids for i in model.ids[-1])


def test_async_agent_and_a_second_turn_on_the_same_thread() -> None:
    asyncio.run(async_agent_and_a_second_turn())


async def async_agent_and_a_second_turn() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = RecordingModel(script=script(4) + script(3))
    agent = create_agent(model, tools=[read_file], system_prompt=SYSTEM, checkpointer=InMemorySaver(),
                         middleware=[ContextWindowMiddleware(model="gpt-4o", max_tokens=MAX_TOKENS)])
    config: Any = {"configurable": {"thread_id": "t1"}}
    await agent.ainvoke({"messages": [HumanMessage("first question")]}, config)
    first = len(model.received)
    await agent.ainvoke({"messages": [HumanMessage("second question")]}, config)
    assert len(model.received) > first
    check_requests(model.model_copy(update={"received": model.received[first:]}), "second question")


def test_persist_writes_the_compaction_into_the_state() -> None:
    model = RecordingModel(script=script(6))
    from langchain_core.utils.function_calling import convert_to_openai_tool

    middleware = ContextWindowMiddleware(model="gpt-4o", max_tokens=MAX_TOKENS, persist=True, system=SYSTEM,
                                         tools=[convert_to_openai_tool(read_file)])
    agent = create_agent(model, tools=[read_file], system_prompt=SYSTEM, middleware=[middleware])
    question = "Where is the bug?"
    result = agent.invoke({"messages": [HumanMessage(question)]})
    full = 1 + sum(1 + (1 + k % 2) for k in range(6)) + 1
    assert len(result["messages"]) < full  # the state itself was compacted
    chat = convert_to_openai_messages(result["messages"])
    assert check_history(chat) == []
    assert any(m["content"] == question for m in chat if m["role"] == "user")
    check_requests(model, question)


def test_token_counter_matches_the_chat_accounting_and_works_in_trim_messages() -> None:
    counter = token_counter("gpt-4o")
    messages: list[BaseMessage] = [HumanMessage("hello " * 50), AIMessage("", tool_calls=[
        {"name": "read_file", "args": {"path": "a.py"}, "id": "c1", "type": "tool_call"}])]
    from langchain_core.messages import ToolMessage
    messages.append(ToolMessage("x = 1\n" * 100, tool_call_id="c1"))
    messages.append(AIMessage("done"))
    exact = Tokenizer.for_model("gpt-4o").count_messages(convert_to_openai_messages(messages))
    assert counter(messages) == exact
    assert counter(messages) == exact  # from the cache, same figure
    trimmed = trim_messages(messages, max_tokens=exact - 1, token_counter=counter, strategy="last",
                            start_on="human", allow_partial=False)
    assert counter(trimmed) <= exact - 1


# --- the window's blocks (standing instructions, notes) reach every request ------------------------

RULE = "From now on, always answer in French."
NOTE = "The build uses meson, not make."
SMALL = 2_500


def scan(path: str) -> str:
    return f"# {path}\n" + "".join(f"line {i}: value = {i * 7}\n" for i in range(60))


@tool
def read_small(path: str) -> str:
    """Reads a file of the repository."""
    return scan(path)


def rounds(tag: str, count: int) -> list[AIMessage]:
    return [AIMessage("", tool_calls=[{"name": "read_small", "args": {"path": f"{tag}{k}.py"}, "id": f"{tag}_{k}",
                                       "type": "tool_call"}]) for k in range(count)] + [AIMessage(f"Fini ({tag}).")]


def texts(request: list[dict[str, Any]], role: str | None = None) -> list[str]:
    return [str(m["content"]) for m in request if role is None or m["role"] == role]


def carries(request: list[dict[str, Any]], text: str) -> bool:
    return any(text in t for t in texts(request))


class Conversation:
    """A ``create_agent`` agent with the middleware on one thread, kept by a checkpointer."""

    def __init__(self, persist: bool, replies: list[AIMessage]) -> None:
        from langchain_core.utils.function_calling import convert_to_openai_tool
        from langgraph.checkpoint.memory import InMemorySaver

        self.model = RecordingModel(script=replies)
        extra: dict[str, Any] = {"system": SYSTEM, "tools": [convert_to_openai_tool(read_small)]} if persist else {}
        self.middleware = ContextWindowMiddleware(model="gpt-4o", max_tokens=SMALL, persist=persist, **extra)
        self.agent = create_agent(self.model, tools=[read_small], system_prompt=SYSTEM,
                                  checkpointer=InMemorySaver(), middleware=[self.middleware])
        self.window = self.middleware.window("t1")
        self.window.write_note("decisions", NOTE)

    def ask(self, *questions: str) -> list[list[dict[str, Any]]]:
        """The requests the model received for these questions, asked in turn."""
        start = len(self.model.received)
        for question in questions:
            self.agent.invoke({"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": "t1"}})
        return self.model.received[start:]


@pytest.mark.parametrize("persist", [False, True])
def test_a_rule_of_the_first_message_and_the_notes_reach_every_request_after_its_eviction(persist: bool) -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    replies = [AIMessage("D'accord.")] + rounds("a", 4) + rounds("b", 4)
    conversation = Conversation(persist, replies)
    received = conversation.ask(RULE, "Read the a files.", "Read the b files.")
    assert len(received) == len(replies)
    tokenizer = Tokenizer.for_model("gpt-4o")
    tool_tokens = count_tools([convert_to_openai_tool(read_small)], tokenizer)
    for request in received:
        assert check_history(request) == [], request
        assert request[0] == {"role": "system", "content": SYSTEM}
        assert carries(request, "always answer in French"), request
        assert sum(NOTE in t for t in texts(request, "system")) == 1, request
        assert tokenizer.count_messages(request) + tool_tokens <= SMALL
    # The user's message did leave the requests: the rule then travelled in the instructions block.
    evicted = [r for r in received if RULE not in texts(r, "user")]
    assert len(evicted) >= 3
    assert all(sum("always answer in French" in t for t in texts(r, "system")) == 1 for r in evicted)
    assert [i.text for i in conversation.window.instructions] == [RULE]


@pytest.mark.parametrize("persist", [False, True])
def test_a_removed_instruction_leaves_the_requests(persist: bool) -> None:
    conversation = Conversation(persist, [AIMessage("D'accord.")] + rounds("a", 4) + rounds("b", 2))
    last = conversation.ask(RULE, "Read the a files.")[-1]
    assert carries(last, "always answer in French")
    assert RULE not in texts(last, "user")  # only the block carries it by now
    window = conversation.window
    window.remove_instruction(window.instructions[0].id)
    later = conversation.ask("Read the b files.")
    assert len(later) == 3
    for request in later:
        assert not carries(request, "French"), request
        assert sum(NOTE in t for t in texts(request, "system")) == 1
