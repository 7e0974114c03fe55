"""Every Python block of the README and of the documentation pages runs, in order, as a reader meets them.

Each page (README.md, then every docs/**/*.md) runs as written in its own namespace, its blocks in
order (a later block of a page uses the ``window`` of an earlier one). What a page leaves to the
reader (their system prompt, tool schemas, provider client, data columns, ...) is supplied by
:func:`reader_names` with real objects; the provider is a server started here on localhost that
speaks OpenAI's chat completions and Anthropic's Messages API, answers every request and reports
the prompt's tokens counted with a real vocabulary. Two placeholders for the reader's
infrastructure are replaced: the PostgreSQL DSN by a throwaway server's, the ``s3://`` dataset by a
local Parquet file.
"""

from __future__ import annotations

import ast
import asyncio
import http.server
import inspect
import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxwindow import Tokenizer
from tests.conftest import send_json

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DSN_PLACEHOLDER = "postgresql://agents@db.internal/agents"
S3_PLACEHOLDER = "s3://bucket/memory-items/"


def pages() -> list[Path]:
    """The README, then every page of the documentation site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(line, code) of every ```python block of ``page``."""
    text = page.read_text()
    return [(text[:m.start()].count("\n") + 2, m.group(1)) for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def readme_blocks() -> list[tuple[int, str]]:
    """(line, code) of every ```python block of the README."""
    return python_blocks(README)


class _ChatCompletions(http.server.BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: a short reply, with usage counted by o200k_base; ``POST
    /v1/messages``: the same as Anthropic's Messages API answers it, counted by cl100k_base."""

    counter = Tokenizer("o200k_base")
    anthropic_counter = Tokenizer("cl100k_base")
    requests: list[dict[str, Any]] = []
    anthropic_requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/v1/messages"):
            self.anthropic_requests.append(body)
            self._anthropic_reply(body)
            return
        self.requests.append(body)
        if not self.path.endswith("/chat/completions"):
            self.send_error(404, f"only chat completions and messages here, not {self.path}")
            return
        prompt = self.counter.count_messages(body["messages"])
        reply = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 1_700_000_000,
                 "model": body.get("model", "gpt-4o"),
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "Summary: the task so far."}}],
                 "usage": {"prompt_tokens": prompt, "completion_tokens": 6, "total_tokens": prompt + 6}}
        send_json(self, reply)

    def _anthropic_reply(self, body: dict[str, Any]) -> None:
        from ctxwindow.messages import from_anthropic

        prompt = self.anthropic_counter.count_messages(from_anthropic(body["messages"], body.get("system")))
        reply = {"id": f"msg_{len(self.anthropic_requests)}", "type": "message", "role": "assistant",
                 "model": body.get("model", "claude-sonnet-4-5"), "stop_reason": "end_turn", "stop_sequence": None,
                 "content": [{"type": "text", "text": "Summary: the task so far."}],
                 "usage": {"input_tokens": prompt, "output_tokens": 6,
                           "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}
        send_json(self, reply)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        pass


@pytest.fixture()
def provider() -> Iterator[str]:
    """A started OpenAI-compatible server; its base URL. Stopped at the end."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ChatCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def reader_names(base_url: str) -> dict[str, Any]:
    """The names the README's blocks use without defining them, as a reader would have them."""
    import openai
    from ctxwindow.cli import load_conversation
    from ctxwindow.scoring import ContentType

    bundled = Path(__file__).resolve().parent.parent / "python" / "ctxwindow" / "data"
    _, messages = load_conversation(bundled / "tau_bench_airline_trajectory.json")
    names = sorted({c["function"]["name"] for m in messages for c in m.get("tool_calls") or []})
    tool_schemas = [{"type": "function", "function": {"name": n, "description": n.replace("_", " "),
                                                      "parameters": {"type": "object", "properties": {}}}}
                    for n in names]
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_reservation_details",
                                                          "arguments": '{"reservation_id": "ZFA04Y"}'}}]}
    rng = np.random.default_rng(7)
    n = 2_000
    archived: list[Any] = []
    alerts: list[Any] = []
    return {
        "policy_text": messages[0]["content"], "tool_schemas": tool_schemas, "tools": [],
        "archive": archived.extend, "log": logging.getLogger("readme"), "page_oncall": alerts.append,
        "assistant_message_with_tool_calls": call,
        "reservation_json": json.dumps({"reservation_id": "ZFA04Y", "origin": "SFO", "destination": "JFK"}),
        "client": openai.OpenAI(base_url=base_url, api_key="local"),
        "texts": [str(m.get("content") or "") for m in messages], "messages": messages,
        "user_message": {"role": "user", "content": "Change my flight to Friday."},
        "assistant_with_tool_calls": call,
        "tool_result": {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
        "created": rng.integers(0, 120, n), "last_used": rng.integers(0, 121, n),
        "types": rng.integers(0, len(ContentType), n).astype(np.uint8), "pinned": rng.random(n) < 0.05,
        "refs": rng.integers(0, 4, n), "emb": rng.random((n, 16), dtype=np.float32),
        "task": rng.random(16, dtype=np.float32), "tokens": rng.integers(1, 400, n),
    }


def run_block(code: str, line: int, namespace: dict[str, Any], page: Path = README) -> None:
    """Runs one block as a reader would paste it (top-level ``await`` included)."""
    compiled = compile(code, f"{page.relative_to(ROOT)}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, namespace)  # noqa: S307 (the documentation's own code)
    if inspect.iscoroutine(result):
        asyncio.run(result)


def test_every_readme_python_block_runs(provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        request: pytest.FixtureRequest) -> None:
    """The README's blocks and every documentation page's blocks run against the local provider."""
    import pandas as pd  # type: ignore[import-untyped]

    monkeypatch.chdir(tmp_path)  # the blocks' files (agent.db, chats.db, health.jsonl) go here
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setenv("OPENAI_BASE_URL", provider)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "local")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", provider.removesuffix("/v1"))
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    from agents import set_default_openai_api, set_tracing_disabled

    set_tracing_disabled(True)
    set_default_openai_api("chat_completions")  # the local provider serves chat completions
    items = tmp_path / "memory-items.parquet"
    rng = np.random.default_rng(3)
    pd.DataFrame({"tokens": rng.integers(1, 60, 500), "created_turn": rng.integers(0, 120, 500),
                  "last_access_turn": rng.integers(0, 121, 500), "access_count": rng.integers(0, 6, 500),
                  "content_type": rng.integers(0, 6, 500).astype(np.uint8), "priority": rng.random(500),
                  "pinned": rng.random(500) < 0.1, "reference_count": rng.integers(0, 3, 500)}).to_parquet(items)
    blocks = [(page, line, code) for page in pages() for line, code in python_blocks(page)]
    assert len(blocks) >= 14
    namespaces: dict[str, dict[str, Any]] = {}
    ran = 0
    try:
        for page, line, code in blocks:
            # each page is read on its own: it starts from the reader's names, not another page's
            namespace = namespaces.setdefault(str(page.relative_to(ROOT)), reader_names(provider))
            if DSN_PLACEHOLDER in code:
                if os.environ.get("CTXWINDOW_SKIP_POSTGRES") == "1":  # as the PostgreSQL tests: skipped explicitly
                    ran += 1
                    continue
                server = request.getfixturevalue("postgres_server")
                code = code.replace(DSN_PLACEHOLDER, server.new_schema())
            code = code.replace(S3_PLACEHOLDER, str(items))
            run_block(code, line, namespace, page)
            ran += 1
    finally:
        set_default_openai_api("responses")
    assert ran == len(blocks)
    # The blocks did what they say: the window guide's call reached the provider with the window's
    # messages and tools, the Agents SDK runs (README and guide) got the provider's reply, and the
    # README's Anthropic example sent the window's system prompt and kept the reply.
    sent = [r for r in _ChatCompletions.requests if r.get("tools") == namespaces["docs/guides/window.md"]["tool_schemas"]]
    assert sent and sent[0]["messages"][0]["content"] == namespaces["docs/guides/window.md"]["policy_text"]
    for name in ("README.md", "docs/guides/frameworks.md"):
        assert namespaces[name]["result"].final_output == "Summary: the task so far."
    assert [r["system"] for r in _ChatCompletions.anthropic_requests] == ["You are terse."]
    readme_window = namespaces["README.md"]["window"]
    assert [m["role"] for m in readme_window.messages()] == ["system", "user", "assistant"]
    assert readme_window.messages()[-1]["content"] == "Summary: the task so far."
    assert (tmp_path / "agent.db").exists() and (tmp_path / "health.jsonl").exists()
