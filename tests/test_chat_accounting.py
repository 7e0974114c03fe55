"""Chat accounting (DESIGN 5.1): every path of count_messages held to the published convention,
recomputed here from plain text counts."""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxwindow
from ctxwindow import MalformedMessageError, Tokenizer

from .conftest import tau_bench_trajectories

TOKENIZER = Tokenizer("o200k_base")


def convention(message: dict[str, Any], count: Any = TOKENIZER.count) -> int:
    """The convention, written independently of the implementation."""
    tokens = 3 + count(message["role"])
    content = message.get("content")
    if isinstance(content, str):
        tokens += count(content)
    elif isinstance(content, list):
        for part in content:
            if part["type"] == "text":
                tokens += count(part["text"])
            elif part["type"] == "image_url":
                detail = part["image_url"].get("detail", "auto")
                size = (part["image_url"].get("width"), part["image_url"].get("height"))
                tokens += expected_image_tokens(detail, size)
    if message.get("name"):
        tokens += 1 + count(message["name"])
    if message.get("tool_call_id"):
        tokens += count(message["tool_call_id"])
    for call in message.get("tool_calls") or []:
        tokens += 3 + count(call["function"]["name"]) + count(call["function"]["arguments"])
    return int(tokens)


def expected_image_tokens(detail: str, size: tuple[int | None, int | None]) -> int:
    if detail == "low":
        return 85
    width, height = size
    if width is None or height is None:
        return 85 + 170 * 8
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = max(1, -(-w // 512)) * max(1, -(-h // 512))
    return int(85 + 170 * tiles)


def test_every_tau_bench_message_follows_the_convention(shared_data: Path) -> None:
    for trajectory in tau_bench_trajectories(shared_data):
        for message in trajectory:
            assert TOKENIZER.count_message(message) == convention(message)
        assert TOKENIZER.count_messages(trajectory) == 3 + sum(map(convention, trajectory))


def test_reply_priming_and_names() -> None:
    assert TOKENIZER.count_messages([]) == 3
    plain = {"role": "user", "content": "hello world"}
    named = {"role": "user", "content": "hello world", "name": "alice"}
    assert TOKENIZER.count_message(plain) == 3 + 1 + 2
    assert TOKENIZER.count_message(named) == 3 + 1 + 2 + 1 + TOKENIZER.count("alice")
    assert TOKENIZER.count_messages([plain, named]) == 3 + 6 + TOKENIZER.count_message(named)


def test_tool_calls_and_results() -> None:
    call: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_user_details", "arguments": '{"user_id": "mia_li_3668"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "calculate", "arguments": '{"expression": "2 + 2"}'}},
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "name": "get_user_details",
              "content": '{"name": "Mia"}'}
    assert TOKENIZER.count_message(call) == convention(call)
    assert TOKENIZER.count_message(result) == convention(result)
    # The call id is not counted; the function name and arguments are, plus 3 per call.
    assert convention(call) == 3 + 1 + sum(
        3 + TOKENIZER.count(c["function"]["name"]) + TOKENIZER.count(c["function"]["arguments"])
        for c in call["tool_calls"]
    )


def png_data_url(width: int, height: int) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", width, height) + b"\x08\x06\0\0\0"
    return "data:image/png;base64," + base64.b64encode(header + b"\0" * 64).decode()


@pytest.mark.parametrize(
    ("image_url", "expected"),
    [
        ({"url": "https://x/y.png", "detail": "low"}, 85),
        ({"url": "https://x/y.png", "detail": "high", "width": 1024, "height": 1024}, 765),
        ({"url": "https://x/y.png", "detail": "high", "width": 2048, "height": 4096}, 1105),
        ({"url": "https://x/y.png", "detail": "high", "width": 100, "height": 100}, 255),
        ({"url": "https://x/y.png"}, 1445),
        ({"url": png_data_url(1024, 1024), "detail": "high"}, 765),
        ({"url": png_data_url(640, 480)}, 85 + 170 * 2),
        (png_data_url(512, 512), 255),
    ],
)
def test_images_by_tiles_never_base64_as_text(image_url: Any, expected: int) -> None:
    message = {"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": image_url},
    ]}
    text_part = 3 + 1 + TOKENIZER.count("what is this?")
    assert TOKENIZER.count_message(message) == text_part + expected


def test_image_tokens_helper() -> None:
    assert ctxwindow.image_tokens("low") == 85
    assert ctxwindow.image_tokens("high", 1024, 1024) == 765
    assert ctxwindow.image_tokens() == 1445
    with pytest.raises(ctxwindow.InvalidArgumentError, match="detail"):
        ctxwindow.image_tokens("medium")


@given(
    st.integers(min_value=1, max_value=10_000),
    st.integers(min_value=1, max_value=10_000),
    st.sampled_from(["high", "auto"]),
)
def test_image_tiles_formula(width: int, height: int, detail: str) -> None:
    got = ctxwindow.image_tokens(detail, width, height)
    assert got == expected_image_tokens(detail, (width, height))
    assert 85 + 170 <= got <= 1445


text_values = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


@given(
    role=st.sampled_from(["system", "user", "assistant", "tool", "developer"]),
    content=st.one_of(st.none(), text_values, st.lists(text_values, max_size=3)),
    name=st.one_of(st.none(), text_values.filter(bool)),
    tool_call_id=st.one_of(st.none(), text_values.filter(bool)),
    calls=st.lists(st.tuples(text_values, text_values), max_size=3),
)
def test_generated_messages_follow_the_convention(
    role: str, content: Any, name: str | None, tool_call_id: str | None,
    calls: list[tuple[str, str]],
) -> None:
    message: dict[str, Any] = {"role": role}
    if isinstance(content, list):
        message["content"] = [{"type": "text", "text": t} for t in content]
    else:
        message["content"] = content
    if name:
        message["name"] = name
    if tool_call_id:
        message["tool_call_id"] = tool_call_id
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
    assert TOKENIZER.count_message(message) == convention(message)
    heuristic = ctxwindow.HeuristicTokenizer()
    assert heuristic.count_message(message) == convention(message, heuristic.count)


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ({"content": "no role"}, "message 0: missing 'role'"),
        ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
        ({"role": 3, "content": "x"}, "role must be a str, not int"),
        ({"role": "user", "content": 42}, "content .* must be a list, not int"),
        ({"role": "user", "content": [{"text": "x"}]}, "needs a 'type'"),
        ({"role": "user", "content": [{"type": "audio"}]}, "unsupported content part type 'audio'"),
        ({"role": "user", "content": [{"type": "text"}]}, "needs a str 'text'"),
        ({"role": "user", "content": [{"type": "image_url"}]}, "needs an 'image_url'"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "max"}}]},
         "detail must be 'low', 'high' or 'auto'"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "width": -1, "height": 5}}]},
         "width must be an int of pixels"),
        ({"role": "assistant", "tool_calls": [{"id": "c"}]}, "needs a 'function'"),
        ({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
         "arguments must be a str"),
        ({"role": "assistant", "tool_calls": "f()"}, "tool_calls must be a list"),
        ("just text", "a message must be a dict, not str"),
    ],
)
def test_malformed_messages(message: Any, match: str) -> None:
    with pytest.raises(MalformedMessageError, match=match) as info:
        TOKENIZER.count_messages([message])
    assert isinstance(info.value, ValueError)


def test_malformed_message_error_names_its_position() -> None:
    messages = [{"role": "user", "content": "fine"}, {"content": "no role"}]
    with pytest.raises(MalformedMessageError, match="message 1: missing 'role'"):
        TOKENIZER.count_messages(messages)


def test_lone_surrogates_count_as_tiktoken_replaces_them() -> None:
    # Python tiktoken encodes a str with lone surrogates after replacing each with U+FFFD.
    with_surrogates = [{"role": "user", "name": "a\udc00", "content": "x \ud800 y"}]
    replaced = [{"role": "user", "name": "a\ufffd", "content": "x \ufffd y"}]
    assert TOKENIZER.count_messages(with_surrogates) == TOKENIZER.count_messages(replaced)
