"""``python -m ctxwindow`` infers Responses and Anthropic files (made here from a real
trajectory) and replays them like the chat form of the same conversation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ctxwindow.cli import load_conversation
from ctxwindow.messages import to_anthropic, to_responses


def replay(path: Path, report: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "ctxwindow", "replay", str(path), "--max-tokens", "8000",
                           "--quiet", "--json", str(report)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(report.read_text())
    return result


def test_responses_and_anthropic_files_replay_like_their_chat_form(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "tau_bench_airline" / "gpt-4o-airline.json"
    _, messages = load_conversation(source, 7)
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(messages))
    responses = tmp_path / "items.json"
    responses.write_text(json.dumps(to_responses(messages)))
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"input": to_responses(messages)}))
    system, turns = to_anthropic(messages)
    anthropic = tmp_path / "anthropic.json"
    anthropic.write_text(json.dumps({"system": system, "messages": turns}))

    assert load_conversation(responses)[0] == "Responses items JSON"
    assert load_conversation(request)[0] == "Responses items JSON"
    assert load_conversation(anthropic)[0] == "Anthropic messages JSON"
    # Lossless but for the tool messages' legacy "name", which Responses items have no field for.
    assert load_conversation(responses)[1] == [{k: v for k, v in m.items() if k != "name"} for m in messages]
    expected = replay(chat, tmp_path / "chat-report.json")
    for path in (responses, request, anthropic):
        got = replay(path, tmp_path / "report.json")
        assert got["pairing_ok"] is True
        # The same conversation but for the tool results' names, which neither format keeps.
        assert 0 < expected["tokens_sent_unmanaged"] - got["tokens_sent_unmanaged"] < 2_000  # type: ignore[operator]


def test_a_nearly_empty_window_replays_without_health_alerts(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "ctxwindow", "replay", "--bundled", "tau-bench", "--max-tokens",
                           "1000000", "--quiet", "--json", str(report)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    assert result["peak_utilization"] < 0.02
    assert result["alerts"] == []
