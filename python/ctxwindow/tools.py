"""Tool definitions as OpenAI renders them into the prompt, and what they cost.

A model does not read the JSON of a tool definition: its function tools are rendered as TypeScript
type declarations in a ``functions`` namespace of the system (or developer) message. The rendering
here follows the published one: OpenAI's "Harmony response format" guide
(https://cookbook.openai.com/articles/openai-harmony, section "Function calling") and its reference
renderer (https://github.com/openai/harmony, ``src/encoding.rs``, the JSON-Schema-to-TypeScript
conversion and the tools section), for example::

    # Tools

    ## functions

    namespace functions {

    // Gets the current weather in the provided location.
    type get_current_weather = (_: {
    // The city and state, e.g. San Francisco, CA
    location: string,
    format?: "celsius" | "fahrenheit", // default: celsius
    }) => any;

    } // namespace functions

Function tools are accepted in the Chat Completions shape (``{"type": "function", "function":
{"name", "description", "parameters"}}``) and in the flat Responses / Agents SDK shape
(``{"type": "function", "name", ...}``) and Anthropic's (``{"name", "description",
"input_schema"}``). Other tools (hosted tools such as ``web_search``, whose
rendering is not published) are counted by their JSON text, as before.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwindow._checks import type_name
from ctxwindow._native import EstimateTokenizer
from ctxwindow._types import TextCounter
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["count_tools", "render_tools", "tools_json"]


def count_tools(tools: Sequence[Mapping[str, Any]] | None, tokenizer: TextCounter) -> int:
    """Tokens the tool definitions add to the prompt: the count of :func:`render_tools` (plus the
    JSON text of tools that are not functions). With an :class:`~ctxwindow.EstimateTokenizer`
    (Claude, Gemini, whose rendering is not published): the estimate of :func:`tools_json` plus
    the provider's tool-use overhead. 0 for no tools."""
    # A str, bytes or list has a count method too, but it counts something else.
    if isinstance(tokenizer, (str, bytes, bytearray, list, tuple)) or not callable(getattr(tokenizer, "count", None)):
        raise InvalidTypeError(f"tokenizer must be a token counter with count(text), not {type_name(tokenizer)}")
    if not tools:
        return 0
    if isinstance(tokenizer, EstimateTokenizer):
        return _count(tokenizer, tools_json(tools)) + tokenizer.tool_overhead
    functions, others = _split(tools)
    tokens = _count(tokenizer, _render_functions(functions)) if functions else 0
    if others:
        tokens += _count(tokenizer, _json_text(others, sort_keys=True))
    return tokens


def _count(tokenizer: TextCounter, text: str) -> int:
    """``tokenizer.count(text)``, checked to be a count (an int >= 0, a numpy integer included)."""
    tokens = tokenizer.count(text)
    if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral) or tokens < 0:
        raise InvalidTypeError(f"the tokenizer's count returned {tokens!r}, not a token count (an int >= 0)")
    return int(tokens)


def tools_json(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tools as JSON, function tools in Anthropic's shape (``{"name", "description",
    "input_schema"}``) whichever shape they came in: what an estimate counts for them."""
    functions, others = _split(tools)
    shaped: list[object] = [{"name": name, "description": description, "input_schema": parameters}
                            if description else {"name": name, "input_schema": parameters}
                            for name, description, parameters in functions]
    return _json_text(shaped + others)


def render_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """The ``# Tools`` section OpenAI renders for the function tools of ``tools``."""
    functions, _ = _split(tools)
    return _render_functions(functions) if functions else ""


def _split(tools: object) -> tuple[list[tuple[str, str, object]], list[object]]:
    """``(name, description, parameters or None)`` of each function tool, and the other tools."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise InvalidTypeError(f"tools must be a list of tool definitions, not {type(tools).__name__}")
    functions: list[tuple[str, str, object]] = []
    others: list[object] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidTypeError(f"tools[{index}] must be a dict, not {type(tool).__name__}")
        if tool.get("type", "function") != "function":
            others.append(tool)
            continue
        spec = tool.get("function", tool)
        if not isinstance(spec, Mapping):
            raise InvalidTypeError(f"tools[{index}]['function'] must be a dict, not {type(spec).__name__}")
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"tools[{index}] is a function tool without a name")
        description = spec.get("description") or ""
        if not isinstance(description, str):
            raise InvalidTypeError(f"tools[{index}] description must be a str, not {type(description).__name__}")
        parameters = spec.get("parameters", spec.get("input_schema"))  # Anthropic's name for them
        functions.append((name, description, parameters))
    return functions, others


def _lines(text: str) -> list[str]:
    """Lines as the reference renderer splits them (Rust's ``str::lines``): at LF or CRLF, with
    no empty last line; a CR not followed by LF stays."""
    if not text:
        return []
    parts = text.split("\n")
    last = parts.pop()
    lines = [part[:-1] if part.endswith("\r") else part for part in parts]
    return lines + [last] if last else lines


def _render_functions(functions: list[tuple[str, str, object]]) -> str:
    lines = ["## functions\n", "namespace functions {\n"]
    for name, description, parameters in functions:
        lines.extend(f"// {line}" for line in _lines(description))
        if parameters is None:
            lines.append(f"type {name} = () => any;\n")
        else:
            lines.append(f"type {name} = (_: {_typescript(parameters, '')}) => any;\n")
    lines.append("} // namespace functions")
    return "# Tools\n\n" + "\n".join(lines)


def _json_text(value: object, **options: Any) -> str:
    """``value`` as JSON (non-ASCII kept), or the typed error when it is not JSON data."""
    try:
        return json.dumps(value, ensure_ascii=False, **options)
    except (TypeError, ValueError) as error:  # a set, bytes, a non-str key, a cycle
        raise InvalidTypeError(f"tool definitions must be JSON data: {error}") from None


def _json(value: object) -> str:
    return _json_text(value, separators=(",", ":"))


def _is_enum(schema: Mapping[str, Any]) -> bool:
    values = schema.get("enum")
    return isinstance(values, list) and bool(values)


def _default(schema: Mapping[str, Any]) -> str:
    """``default: ...`` for a schema with a default: a string in quotes unless it is an enum's."""
    value = schema["default"]
    if isinstance(value, str):
        return f"default: {value}" if _is_enum(schema) else f'default: "{value}"'
    return f"default: {_json(value)}"


def _nullable(schema: object, rendered: str) -> str:
    if isinstance(schema, Mapping) and schema.get("nullable") is True and "null" not in rendered:
        return f"{rendered} | null"
    return rendered


def _variants(variants: list[Any], indent: str) -> str:
    out = ""
    for variant in variants:
        out += f"\n{indent} | " + _nullable(variant, _typescript(variant, indent + "   "))
        if isinstance(variant, Mapping):
            comments = []
            if isinstance(variant.get("description"), str):
                comments.append(variant["description"])
            if "default" in variant:
                # Here a string default is quoted as JSON even for an enum.
                value = variant["default"]
                is_text = isinstance(value, str) and not _is_enum(variant)
                comments.append(f'default: "{value}"' if is_text else f"default: {_json(value)}")
            if comments:
                out += " // " + " ".join(comments)
    return out


def _typescript(schema: object, indent: str) -> str:
    """A JSON Schema as the TypeScript type the model reads."""
    if not isinstance(schema, Mapping):
        return "any"
    if isinstance(schema.get("oneOf"), list):
        return _variants(schema["oneOf"], indent)
    kind = schema.get("type")
    if isinstance(kind, list):
        names = ["number" if k == "integer" else k for k in kind if isinstance(k, str)]
        if names:
            return " | ".join(names)
    if not isinstance(kind, str):
        return "any"
    if kind == "object":
        return _object(schema, indent)
    if kind == "string":
        values = schema.get("enum")
        strings = [f'"{v}"' for v in values if isinstance(v, str)] if isinstance(values, list) else []
        return " | ".join(strings) if strings else "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "array":
        return f"{_typescript(schema['items'], indent)}[]" if "items" in schema else "Array<any>"
    return "any"


def _object(schema: Mapping[str, Any], indent: str) -> str:
    out = f"{indent}// {schema['description']}\n" if isinstance(schema.get("description"), str) else ""
    out += "{\n"
    properties = schema.get("properties")
    required_list = schema.get("required")
    required = ({r for r in required_list if isinstance(r, str)}
                if isinstance(required_list, list) else set())
    for key, value in (properties.items() if isinstance(properties, Mapping) else ()):
        spec: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
        optional = "" if key in required else "?"
        if isinstance(spec.get("title"), str):
            out += f"{indent}// {spec['title']}\n{indent}//\n"
        if "oneOf" not in spec and isinstance(spec.get("description"), str):
            out += f"{indent}// {spec['description']}\n"
        examples = spec.get("examples")
        if isinstance(examples, list) and examples:
            out += f"{indent}// Examples:\n"
            out += "".join(f'{indent}// - "{e}"\n' for e in examples if isinstance(e, str))
        variants = spec.get("oneOf")
        if isinstance(variants, list):
            out += _property_variants(key, optional, spec, variants, indent)
            continue
        out += f"{indent}{key}{optional}: " + _nullable(spec, _typescript(spec, indent + "    ")) + ","
        if "oneOf" not in spec and "default" in spec:
            out += f" // {_default(spec)}"
        out += "\n"
    return out + f"{indent}}}"


def _property_variants(key: str, optional: str, spec: Mapping[str, Any], variants: list[Any],
                       indent: str) -> str:
    """A property whose schema is a ``oneOf``: one variant per line under its name."""
    description = spec.get("description") if isinstance(spec.get("description"), str) else None
    first = variants[0] if variants and isinstance(variants[0], Mapping) else {}
    above = description is not None and first.get("description") != description
    out = f"{indent}// {description}\n" if above else ""
    if "default" in spec:
        out += f"{indent}// {_default(spec)}\n"
    out += f"{indent}{key}{optional}:\n"
    for position, variant in enumerate(variants):
        out += f"{indent} | " + _nullable(variant, _typescript(variant, indent + "   "))
        comments = []
        if isinstance(variant, Mapping):
            own = variant.get("description")
            if not (position == 0 and above) and isinstance(own, str) and own != description:
                comments.append(own)
            if "default" in variant:
                comments.append(_default(variant))
        if comments:
            out += " // " + " ".join(comments)
        out += "\n"
    return out + f"{indent},\n"
