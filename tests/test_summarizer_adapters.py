"""The provider summarizers against a local HTTP server that speaks the OpenAI chat completions
and Anthropic Messages wire formats (no network)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ctxwindow import ContextWindow
from ctxwindow.strategies import Summarize
from ctxwindow.summarizers import SUMMARY_HEADER, anthropic_summarizer, openai_summarizer

from .conftest import send_json
from .test_summaries import conversation, assert_fell_back

pytest.importorskip("openai")
pytest.importorskip("anthropic")


class Provider(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict[str, Any]]] = []
    fail = False

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Provider.requests.append((self.path, body))
        if Provider.fail:
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "overloaded", "type": "server_error"}}')
            return
        summary = f"{SUMMARY_HEADER}\n- summarized {len(body['messages'])} messages"
        if self.path.endswith("/chat/completions"):
            reply = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": summary}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        else:
            reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                     "content": [{"type": "text", "text": summary}], "stop_reason": "end_turn",
                     "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
        send_json(self, reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    Provider.requests, Provider.fail = [], False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_openai_summarizer(server: str) -> None:
    summarize = openai_summarizer("gpt-4o-mini", base_url=f"{server}/v1", api_key="test", max_retries=0)
    assert summarize("rules", "transcript").startswith(SUMMARY_HEADER)
    path, body = Provider.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "system", "content": "rules"}, {"role": "user", "content": "transcript"}]
    async_summarize = openai_summarizer("gpt-4o-mini", base_url=f"{server}/v1", api_key="test",
                                        max_retries=0, asynchronous=True)
    assert asyncio.run(async_summarize("rules", "transcript")).startswith(SUMMARY_HEADER)


def test_anthropic_summarizer(server: str) -> None:
    summarize = anthropic_summarizer("claude-test", base_url=server, api_key="test", max_retries=0)
    assert summarize("rules", "transcript").startswith(SUMMARY_HEADER)
    path, body = Provider.requests[-1]
    assert path == "/v1/messages" and body["system"] == "rules"
    assert body["messages"] == [{"role": "user", "content": "transcript"}]


def test_a_provider_outage_loses_nothing(server: str) -> None:
    Provider.fail = True
    summarize = openai_summarizer("gpt-4o-mini", base_url=f"{server}/v1", api_key="test", max_retries=0)
    messages = conversation(30)
    window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                           strategies=[Summarize(summarize, preserve_recent=4)])
    window.extend(messages)
    assert Provider.requests
    assert_fell_back(window, messages)  # the last resort, with the kept facts of what it dropped
    Provider.fail = False
    window.extend(conversation(5))
    assert window.messages()[1]["content"].startswith(SUMMARY_HEADER)
