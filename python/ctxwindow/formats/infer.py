"""Recognising the format of a parsed JSON file: :func:`infer_format` (Responses items or
Anthropic messages) and :func:`infer_trajectory` (those, or an agent's trajectory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxwindow._types import Message
from ctxwindow.formats.anthropic import from_anthropic
from ctxwindow.formats.mini_swe_agent import from_mini_swe_agent, is_mini_swe_agent
from ctxwindow.formats.openhands import from_openhands_completion, is_openhands
from ctxwindow.formats.responses import from_responses
from ctxwindow.formats.trajectory import Trajectory, tools_of

__all__ = ["infer_format", "infer_trajectory"]

_RESPONSES_ONLY = {"function_call", "function_call_output", "reasoning", "input_text", "output_text"}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result"}


def _block_types(messages: Any) -> set[Any]:
    types: set[Any] = set()
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            types.update(_hashable(b.get("type")) for b in content if isinstance(b, Mapping))
        if isinstance(message, Mapping):
            types.add(_hashable(message.get("type")))
    return types


def _hashable(value: object) -> object:
    """``value`` if it can be a set member (a type name), else None (a malformed type)."""
    return value if isinstance(value, (str, int, float, type(None))) else None


def infer_format(value: Any) -> tuple[str, list[Message]] | None:
    """The Responses or Anthropic conversation in a parsed JSON value, as ``(format name,
    canonical messages)``; None when it is neither (chat dicts, or another format):

    - Responses API items: a list of items, or ``{"input": [...], "instructions": ...}``, with
      at least one item or part only the Responses API has (``function_call``, ``reasoning``,
      ``input_text``, ...);
    - Anthropic Messages: ``{"system": ..., "messages": [...]}`` or a list of messages, with
      ``tool_use`` / ``tool_result`` blocks or a top-level ``system`` next to user and assistant
      turns only.
    """
    if isinstance(value, Mapping) and isinstance(value.get("input"), list):
        messages = from_responses(value["input"])
        instructions = value.get("instructions")
        if isinstance(instructions, str) and instructions:
            messages.insert(0, {"role": "system", "content": instructions})
        return "Responses items JSON", messages
    if isinstance(value, list) and _block_types(value) & _RESPONSES_ONLY:
        return "Responses items JSON", from_responses(value)
    turns = value.get("messages") if isinstance(value, Mapping) else value
    system = value.get("system") if isinstance(value, Mapping) else None
    if isinstance(turns, list) and turns and all(isinstance(t, Mapping) and t.get("role") in ("user", "assistant")
                                                 for t in turns):
        if _block_types(turns) & _ANTHROPIC_BLOCKS or isinstance(system, str):
            return "Anthropic messages JSON", from_anthropic(turns, system if isinstance(system, str) else None)
    return None


def infer_trajectory(value: Any) -> Trajectory | None:
    """The agent trajectory in a parsed JSON value (mini-swe-agent, an OpenHands completion log,
    or a Responses / Anthropic file), None when it is none of these (a chat list or another
    format). A top-level ``tools`` list of API tool definitions comes back with the messages."""
    if is_mini_swe_agent(value):
        return from_mini_swe_agent(value)
    if is_openhands(value):
        return from_openhands_completion(value)
    inferred = infer_format(value)
    if inferred is None:
        return None
    return Trajectory(inferred[0], inferred[1], tools_of(value.get("tools")) if isinstance(value, Mapping) else None)
