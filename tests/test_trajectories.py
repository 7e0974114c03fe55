"""What agents write to disk (mini-swe-agent trajectories, OpenHands completion logs, chat files with
their tools) read as conversations: records that are not chat messages are skipped and counted,
the tools are counted, and the CLI offers the estimate for models without a vocabulary and quotes
one fidelity figure in its report and its alerts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwindow import ContextWindow, Tokenizer
from ctxwindow.cli import load_conversation, load_trajectory, main
from ctxwindow.errors import MalformedMessageError
from ctxwindow.formats import responses_turns
from ctxwindow.messages import to_anthropic, to_responses
from ctxwindow.tokenizer import EstimateTokenizer, HeuristicTokenizer
from ctxwindow.tools import count_tools
from ctxwindow.trajectories import (
    from_mini_swe_agent,
    from_openhands_completion,
    infer_trajectory,
    read_openhands_folder,
    tools_of,
)
from tests.test_formats import chat_histories

NOT_MESSAGES = st.sampled_from([
    ("exit", {"role": "exit", "content": "diff --git a/x b/x", "extra": {"exit_status": "Submitted", "submission": ""}}),
    ("role 'debug'", {"role": "debug", "content": "x"}),
    ("str record", "a stray line"),
    ("record without a role", {"content": "no role"}),
])


def _extra(index: int) -> dict[str, Any]:
    return {"timestamp": 1_700_000_000.0 + index, "returncode": 0, "raw_output": "..."}


@given(chat_histories(), st.lists(st.tuples(st.integers(0, 40), NOT_MESSAGES), max_size=5))
def test_mini_swe_agent_chat_records_come_back_and_the_rest_is_counted(
        messages: list[dict[str, Any]], inserted: list[tuple[int, tuple[str, Any]]]) -> None:
    records: list[Any] = [{**m, "extra": _extra(i)} if i % 2 else dict(m) for i, m in enumerate(messages)]
    expected: dict[str, int] = {}
    for position, (kind, record) in inserted:
        records.insert(min(position, len(records)), record)
        expected[kind] = expected.get(kind, 0) + 1
    read = from_mini_swe_agent({"info": {"exit_status": "Submitted"}, "messages": records,
                                "trajectory_format": "mini-swe-agent-1.1"})
    assert read.messages == messages
    assert read.skipped == expected
    assert read.format == "mini-swe-agent trajectory"


def _mini_swe_agent_responses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Responses API run as mini-swe-agent saves it: each model turn a whole response object."""
    records: list[dict[str, Any]] = []
    turn: list[dict[str, Any]] = []
    for item in to_responses(messages):
        if item.get("type") in ("function_call", "reasoning") or item.get("role") == "assistant":
            turn.append(item)
            continue
        if turn:
            records.append({"object": "response", "id": f"resp_{len(records)}", "output": turn,
                            "usage": None, "extra": {"actions": [], "cost": 0.0}})
            turn = []
        records.append({**item, "extra": _extra(len(records))} if item.get("type") else item)
    if turn:
        records.append({"object": "response", "id": "resp_last", "output": turn, "extra": {}})
    return records


@given(chat_histories())
def test_mini_swe_agent_responses_runs_read_as_chat(messages: list[dict[str, Any]]) -> None:
    records = [*_mini_swe_agent_responses(messages), {"role": "exit", "content": "", "extra": {}}]
    records.insert(1, {"object": "response", "output": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}]})
    read = from_mini_swe_agent({"info": {"mini_version": "2.0.0"}, "messages": records})
    assert read.messages == messages
    assert read.skipped == {"exit": 1, "Responses item 'web_search_call'": 1}
    assert read.format == "mini-swe-agent trajectory (Responses items)"


def _openhands_log(messages: list[dict[str, Any]], stamp: float, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """One OpenHands completion log: the request as sent (content as parts, cache markers) and
    the reply as litellm dumps it."""
    request = []
    for m in messages[:-1]:
        content = m.get("content")
        if isinstance(content, str) and m["role"] != "tool":
            content = [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]
        request.append({**m, "content": content})
    reply: dict[str, Any] = {"content": messages[-1].get("content"), "role": "assistant", "function_call": None,
             "tool_calls": messages[-1].get("tool_calls"), "provider_specific_fields": {}}
    return {"messages": request, "response": {"id": "chatcmpl-1", "object": "chat.completion",
                                             "choices": [{"index": 0, "finish_reason": "stop", "message": reply}]},
            "args": [], "kwargs": {"tools": tools} if tools else {}, "timestamp": stamp, "cost": 0.0}


@given(chat_histories())
def test_an_openhands_completion_log_reads_as_its_request_and_reply(messages: list[dict[str, Any]]) -> None:
    log = _openhands_log(messages, 1.0, None)
    read = from_openhands_completion(log)
    assert read.messages[:-1] == log["messages"]  # the request as sent (text parts with cache markers)
    assert read.messages[-1] == messages[-1]  # the reply, without litellm's empty fields
    assert read.skipped == {} and read.tools is None


@given(chat_histories())
def test_an_openhands_responses_log_reads_as_instructions_input_and_output(messages: list[dict[str, Any]]) -> None:
    system = [m for m in messages if m["role"] == "system"]
    turns = responses_turns(to_responses([m for m in messages if m["role"] != "system"]))
    tools = [{"type": "function", "name": "bash", "description": "run", "parameters": {"type": "object"}}]
    log = {"context_window": 128_000, "llm_path": "responses", "instructions": system[0]["content"] if system else None,
           "input": [i for turn in turns[:-1] for i in turn], "tools": tools, "kwargs": {},
           "response": {"id": "resp_1", "object": "response", "output": list(turns[-1])},
           "cost": 0.0, "timestamp": 1.0, "latency_sec": 0.5}
    assert infer_trajectory(log) is not None
    read = from_openhands_completion(log)
    assert read.messages == messages
    assert read.tools == tools and read.skipped == {}
    assert read.format == "OpenHands completion log (Responses items)"


TOOLS = st.lists(st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True), min_size=1, max_size=4, unique=True)


@given(chat_histories(), TOOLS)
def test_the_tools_of_a_file_come_back_in_every_api_form(messages: list[dict[str, Any]], names: list[str]) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    chat = [{"type": "function", "function": {"name": n, "description": n, "parameters": schema}} for n in names]
    responses = [{"type": "function", "name": n, "description": n, "parameters": schema} for n in names]
    anthropic = [{"name": n, "description": n, "input_schema": schema} for n in names]
    read = infer_trajectory({"input": to_responses(messages), "tools": responses})
    assert read is not None and read.tools == responses
    system, turns = to_anthropic(messages)
    read = infer_trajectory({"system": system or "Be brief.", "messages": turns, "tools": anthropic})
    assert read is not None and read.tools == anthropic
    log = _openhands_log(messages, 1.0, chat)
    assert from_openhands_completion(log).tools == chat
    # The software agent SDK logs its own tool objects next to the request: not an API's form.
    assert from_openhands_completion({**log, "kwargs": {}, "tools": [{"name": n, "kind": "Tool"} for n in names]}).tools is None


def test_bad_records_that_claim_to_be_messages_get_typed_errors() -> None:
    with pytest.raises(MalformedMessageError, match="record 0: a response object needs an 'output' list"):
        from_mini_swe_agent({"messages": [{"object": "response", "output": None}]})
    with pytest.raises(MalformedMessageError, match="needs a 'messages' list"):
        from_mini_swe_agent({"messages": None})
    with pytest.raises(MalformedMessageError, match="needs a 'messages' list"):
        from_openhands_completion({"response": {}})
    assert tools_of([{"name": "bash", "description": "run", "action_type": "BashAction"}]) is None
    assert infer_trajectory([{"role": "user", "content": "hi"}]) is None


# --- real conversations in the agents' formats, through the CLI ------------------------------------


def _tau_messages(shared_data: Path) -> list[dict[str, Any]]:
    return load_conversation(shared_data / "tau_bench_airline" / "gpt-4o-airline.json", 7)[1]


def _tools_for(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = sorted({c["function"]["name"] for m in messages for c in m.get("tool_calls") or []})
    return [{"type": "function", "function": {
        "name": name, "description": f"Airline tool {name.replace('_', ' ')}.",
        "parameters": {"type": "object", "properties": {"user_id": {"type": "string"},
                                                        "reservation_id": {"type": "string"}}}}}
        for name in names]


def _replay(path: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "report.json"
    assert main(["replay", str(path), "--max-tokens", "4000", "--quiet", "--json", str(out), *extra]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_a_mini_swe_agent_file_replays_like_its_chat_form(shared_data: Path, tmp_path: Path) -> None:
    _, messages = load_conversation(shared_data / "swe_agent_trajs" / "gpt4_pydicom-1458.traj")
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(messages))
    traj = tmp_path / "run.traj.json"
    records = [{**m, "extra": _extra(i)} for i, m in enumerate(messages)]
    records.append({"role": "exit", "content": "patch", "extra": {"exit_status": "Submitted", "submission": "patch"}})
    traj.write_text(json.dumps({"info": {"exit_status": "Submitted", "mini_version": "2.0.0"},
                                "messages": records, "trajectory_format": "mini-swe-agent-1.1"}))
    expected, got = _replay(chat, tmp_path, "--max-tokens", "16000"), _replay(traj, tmp_path, "--max-tokens", "16000")
    assert got["format"] == "mini-swe-agent trajectory"
    assert got["skipped_records"] == {"exit": 1}
    for key in ("messages", "model_calls", "tokens_sent_managed", "tokens_sent_unmanaged", "evicted_messages"):
        assert got[key] == expected[key], key


def test_an_openhands_log_folder_replays_its_latest_request_with_its_tools(shared_data: Path, tmp_path: Path) -> None:
    messages = _tau_messages(shared_data)
    tools = _tools_for(messages)
    folder = tmp_path / "completions"
    folder.mkdir()
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    for n, i in enumerate(replies):
        (folder / f"gpt-4o-{1000 + n}.json").write_text(json.dumps(_openhands_log(messages[:i + 1], 1000.0 + n, tools)))
    (folder / "gpt-4o-2000-error.json").write_text(json.dumps({
        "messages": messages[:3], "tools": tools, "kwargs": {}, "error": {"type": "Timeout", "message": "t"},
        "timestamp": 2000.0, "latency_sec": 1.0, "cost": 0.0}))
    (folder / "notes.json").write_text("{}")
    read = read_openhands_folder(folder)
    assert read.skipped == {"earlier request (a prefix of the latest)": len(replies) - 1,
                            "error log (a request without a reply)": 1, "file that is not a completion log": 1}
    assert read.tools == tools
    assert [m["role"] for m in read.messages] == [m["role"] for m in messages[:replies[-1] + 1]]

    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(messages[:replies[-1] + 1]))
    plain, logged = _replay(chat, tmp_path, "--max-tokens", "12000"), _replay(folder, tmp_path, "--max-tokens", "12000")
    tool_tokens = count_tools(tools, Tokenizer.for_model("gpt-4o"))  # as the window counts them
    assert logged["tool_definitions"] == len(tools) and logged["tool_definition_tokens"] == tool_tokens
    assert logged["skipped_records"] == {k: v for k, v in read.skipped.items()}
    # The same conversation (text parts instead of strings cost nothing more) plus the tools, per call.
    assert logged["tokens_sent_unmanaged"] - plain["tokens_sent_unmanaged"] == tool_tokens * plain["model_calls"]
    assert logged["pairing_ok"] is True


def test_count_adds_the_tools_of_a_messages_and_tools_file(shared_data: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    messages = _tau_messages(shared_data)
    tools = _tools_for(messages)
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": messages, "tools": tools}))
    assert load_trajectory(path).tools == tools
    assert main(["count", str(path), "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)
    window = ContextWindow("gpt-4o", max_tokens=1_000_000, tools=tools)
    assert counted["tool_definitions"] == len(tools)
    assert counted["by_component"]["tool_definitions"] == window.usage.by_component["tool_definitions"] > 0
    assert counted["total"] == Tokenizer.for_model("gpt-4o").count_messages(messages) + \
        window.usage.by_component["tool_definitions"]


def test_a_model_without_a_vocabulary_is_offered_the_estimate(shared_data: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "swe_agent_trajs" / "gpt4_pydicom-1458.traj"
    messages = load_conversation(path)[1]
    assert main(["count", str(path), "--model", "claude-sonnet-4-5", "--json"]) == 0  # Claude's estimate
    counted = json.loads(capsys.readouterr().out)
    assert counted["exact"] is False and counted["encoding"] == "claude-estimate"
    assert counted["total"] == EstimateTokenizer("claude-sonnet-4-5").count_messages(messages)
    assert main(["count", str(path), "--model", "mistral-large"]) == 2
    error = capsys.readouterr().err
    assert "no vocabulary for model 'mistral-large'" in error and "--estimate" in error
    assert main(["count", str(path), "--model", "mistral-large", "--estimate", "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)
    assert counted["exact"] is False and counted["encoding"] == HeuristicTokenizer().name
    assert counted["total"] == HeuristicTokenizer().count_messages(messages)
    report = _replay(path, tmp_path, "--model", "claude-sonnet-4-5", "--estimate", "3.5", "--max-tokens", "16000")
    assert report["messages"] > 0 and report["pairing_ok"] is True


def test_report_and_alerts_quote_the_same_fidelity_figure(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["replay", "--max-tokens", "4000", "--quiet", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    figure = report["key_fact_fidelity"]
    assert figure is not None and figure == min(report["compaction_fidelity"])
    quoted = [float(m.group(1)) / 100 for a in report["alerts"] if a["metric"] == "fidelity"
              for m in [re.search(r"kept (\d+)% of the key facts", a["message"])] if m]
    below = [f for f in report["compaction_fidelity"] if f < report["key_fact_fidelity_threshold"]]
    assert report["compactions_below_fidelity_threshold"] == len(below)
    # Every compaction below the threshold is an alert quoting its figure, and the report's figure is one of them.
    assert len(quoted) == len(below) >= 1
    assert round(figure * 100) / 100 in quoted
