"""Accounting that matches the provider: image tokens per model family and tool definitions as
OpenAI renders them. Each formula is recomputed here independently of the implementation; the tool
rendering is held to OpenAI's own renderer (the `openai-harmony` package) on generated schemas."""

from __future__ import annotations

import gzip
import json
import math
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxwindow
from ctxwindow import ContextWindow, Tokenizer
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.tools import count_tools, render_tools

# Base and tile tokens of the tile models, and the multipliers of the 32 px patch models, from
# OpenAI's "Images and vision" guide, section "Calculating costs"
# (https://platform.openai.com/docs/guides/images-vision#calculating-costs).
TILE_MODELS = {
    "gpt-4o": (85, 170), "gpt-4o-2024-08-06": (85, 170), "gpt-4.1": (85, 170),
    "gpt-4.5-preview": (85, 170), "gpt-4o-mini": (2833, 5667), "gpt-4o-mini-2024-07-18": (2833, 5667),
    "o1": (75, 150), "o3": (75, 150), "gpt-5": (70, 140), "computer-use-preview": (65, 129),
}
PATCH_MODELS = {"gpt-4.1-mini": 1.62, "gpt-4.1-nano": 2.46, "o4-mini": 1.72, "gpt-5-mini": 1.62,
                "gpt-5-nano": 2.46}


def tiles(width: int, height: int) -> int:
    """512 px tiles after the resize: fit in 2048 x 2048, then shorter side at most 768."""
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return max(1, math.ceil(w / 512)) * max(1, math.ceil(h / 512))


def patches(width: int, height: int) -> int:
    """The published patch algorithm, step by step."""
    covering = math.ceil(width / 32) * math.ceil(height / 32)
    if covering <= 1536:
        return covering
    shrink = math.sqrt(32 * 32 * 1536 / (width * height))
    resized_w, resized_h = width * shrink, height * shrink
    shrink *= min(math.floor(resized_w / 32) / (resized_w / 32),
                  math.floor(resized_h / 32) / (resized_h / 32))
    resized_w, resized_h = width * shrink, height * shrink
    return min(1536, math.ceil(round(resized_w / 32, 6)) * math.ceil(round(resized_h / 32, 6)))


def test_published_image_examples() -> None:
    assert ctxwindow.image_tokens("high", 1024, 1024, model="gpt-4o") == 765
    assert ctxwindow.image_tokens("high", 2048, 4096, model="gpt-4.1") == 1105
    assert ctxwindow.image_tokens("low", 4096, 8192, model="gpt-4o-mini") == 2833
    assert ctxwindow.image_tokens("high", 1024, 1024, model="gpt-4o-mini") == 2833 + 4 * 5667
    # Patch models: 1024 x 1024 is 1024 patches, 1800 x 2400 is 1452 after the scale-down.
    assert ctxwindow.image_tokens("high", 1024, 1024, model="gpt-4.1-mini") == int(1024 * 1.62)
    assert ctxwindow.image_tokens("high", 1800, 2400, model="gpt-4.1-nano") == int(1452 * 2.46)
    assert ctxwindow.image_tokens("auto", model="gpt-4.1-mini") == 2488  # 1536 x 1.62, the cap
    assert ctxwindow.image_tokens("high", 1024, 1024) == 765  # no model: GPT-4o
    with pytest.raises(InvalidArgumentError, match="detail"):
        ctxwindow.image_tokens("medium", model="gpt-4.1-mini")


@given(st.integers(1, 20_000), st.integers(1, 20_000), st.sampled_from(["low", "high", "auto"]),
       st.sampled_from(sorted(TILE_MODELS)))
def test_tile_families(width: int, height: int, detail: str, model: str) -> None:
    base, tile = TILE_MODELS[model]
    expected = base if detail == "low" else base + tile * tiles(width, height)
    assert ctxwindow.image_tokens(detail, width, height, model=model) == expected


@given(st.integers(1, 20_000), st.integers(1, 20_000), st.sampled_from(["low", "high", "auto"]),
       st.sampled_from(sorted(PATCH_MODELS)))
def test_patch_families(width: int, height: int, detail: str, model: str) -> None:
    expected = int(patches(width, height) * round(PATCH_MODELS[model] * 100) // 100)
    got = ctxwindow.image_tokens(detail, width, height, model=model)
    assert got == expected
    assert got <= int(1536 * PATCH_MODELS[model])


def test_chat_accounting_prices_images_by_model() -> None:
    message = {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "width": 1800,
                                            "height": 2400, "detail": "high"}}]}
    framing = 3 + 1
    for model, (base, tile) in TILE_MODELS.items():
        if model == "computer-use-preview":
            continue  # no tokenizer: tiktoken maps it to no encoding
        assert Tokenizer.for_model(model).count_message(message) == framing + base + tile * tiles(1800, 2400)
    for model, multiplier in PATCH_MODELS.items():
        tokenizer = Tokenizer.for_model(model)
        assert tokenizer.count_message(message) == framing + int(1452 * round(multiplier * 100) // 100)
        # A pickled tokenizer keeps its model's pricing.
        assert pickle.loads(pickle.dumps(tokenizer)).count_message(message) == tokenizer.count_message(message)
    assert Tokenizer("o200k_base").count_message(message) == framing + 85 + 170 * tiles(1800, 2400)


WEATHER: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_location",
                                      "description": "Gets the location of the user."}},
    {"type": "function", "function": {
        "name": "get_current_weather",
        "description": "Gets the current weather in the provided location.",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
            "required": ["location"]}}},
]


def test_published_tool_rendering() -> None:
    # The example of OpenAI's Harmony guide, section "Function calling".
    assert render_tools(WEATHER) == (
        "# Tools\n\n## functions\n\nnamespace functions {\n\n"
        "// Gets the location of the user.\ntype get_location = () => any;\n\n"
        "// Gets the current weather in the provided location.\n"
        "type get_current_weather = (_: {\n"
        "// The city and state, e.g. San Francisco, CA\n"
        "location: string,\n"
        'format?: "celsius" | "fahrenheit", // default: celsius\n'
        "}) => any;\n\n} // namespace functions")
    tokenizer = Tokenizer("o200k_base")
    assert count_tools(WEATHER, tokenizer) == tokenizer.count(render_tools(WEATHER))
    # The Responses / Agents SDK shape renders the same.
    flat = [{"type": "function", **tool["function"]} for tool in WEATHER]
    assert render_tools(flat) == render_tools(WEATHER)


def test_tools_that_are_not_functions_count_as_json() -> None:
    tokenizer = Tokenizer("o200k_base")
    hosted = [{"type": "web_search"}]
    assert render_tools(hosted) == ""
    assert count_tools(hosted, tokenizer) == tokenizer.count(json.dumps(hosted, sort_keys=True))
    assert count_tools([*WEATHER, *hosted], tokenizer) == (
        tokenizer.count(render_tools(WEATHER)) + tokenizer.count(json.dumps(hosted, sort_keys=True)))
    assert count_tools([], tokenizer) == 0 and count_tools(None, tokenizer) == 0


def test_bad_tool_definitions_are_typed_errors() -> None:
    tokenizer = Tokenizer("o200k_base")
    with pytest.raises(InvalidTypeError, match="list of tool definitions"):
        count_tools("get_weather", tokenizer)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"tools\[0\] must be a dict"):
        render_tools([42])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="without a name"):
        render_tools([{"type": "function", "function": {"description": "x"}}])
    with pytest.raises(InvalidTypeError, match="description must be a str"):
        render_tools([{"type": "function", "name": "f", "description": 3}])


def test_the_window_counts_tools_as_rendered() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4000, tools=WEATHER)
    rendered = Tokenizer.for_model("gpt-4o").count(render_tools(WEATHER))
    assert window.usage.by_component["tool_definitions"] == rendered
    window.set_tools(None)
    assert window.usage.by_component["tool_definitions"] == 0


@pytest.fixture(scope="module")
def harmony(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """OpenAI's reference renderer (module, encoding), reading o200k_base from the bundled
    vocabulary (offline)."""
    vocab = tmp_path_factory.mktemp("harmony-vocab")
    with gzip.open(shared_data / "tiktoken_vocab" / "o200k_base.tiktoken.gz", "rb") as source:
        (vocab / "o200k_base.tiktoken").write_bytes(source.read())
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(vocab)
    import openai_harmony  # type: ignore[import-untyped]

    encoding = openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
    return openai_harmony, encoding


def harmony_text(harmony: Any, functions: list[dict[str, Any]]) -> str:
    harmony, encoding = harmony
    tools = [harmony.ToolDescription.new(f["name"], f.get("description", ""),
                                         parameters=f.get("parameters")) for f in functions]
    developer = harmony.DeveloperContent.new().with_function_tools(tools)
    conversation = harmony.Conversation.from_messages(
        [harmony.Message.from_role_and_content(harmony.Role.DEVELOPER, developer)])
    text: str = encoding.decode_utf8(encoding.render_conversation(conversation))
    prefix, suffix = "<|start|>developer<|message|>", "<|end|>"
    assert text.startswith(prefix) and text.endswith(suffix)
    return text[len(prefix):-len(suffix)]


words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=12)
lines = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-1000, 1000) | words,
                           lambda inner: st.lists(inner, max_size=3), max_leaves=5)


def schemas(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "number", "integer", "boolean", "null", "array"])
         | st.lists(st.sampled_from(["string", "integer", "null"]), max_size=3)},
        optional={"description": lines, "enum": st.lists(words | st.integers(), max_size=3),
                  "default": json_values, "title": words, "examples": st.lists(words | st.integers(), max_size=2),
                  "nullable": st.booleans(), "items": st.fixed_dictionaries({"type": st.just("string")})})
    if depth == 0:
        return leaf
    inner = schemas(depth - 1)
    obj = st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={"description": lines, "properties": st.dictionaries(words, inner, max_size=4),
                  "required": st.lists(words, max_size=3), "default": json_values, "title": words})
    one_of = st.fixed_dictionaries({"oneOf": st.lists(inner, max_size=3)},
                                   optional={"description": lines, "default": json_values})
    return leaf | obj | one_of


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)},
    optional={"description": lines, "parameters": schemas(2)}), min_size=1, max_size=3))
def test_rendering_equals_openai_harmony(harmony: Any, functions: list[dict[str, Any]]) -> None:
    tools = [{"type": "function", "function": f} for f in functions]
    expected = harmony_text(harmony, functions)
    assert render_tools(tools) == expected
    tokenizer = Tokenizer("o200k_base")
    assert count_tools(tools, tokenizer) == tokenizer.count(expected)
