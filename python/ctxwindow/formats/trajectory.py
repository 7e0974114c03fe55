"""What the readers of agents' files return (:class:`Trajectory`) and what they share: tool
definitions in an API's form (:func:`tools_of`) and the Responses items a chat conversation can
hold."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxwindow._types import Message

__all__ = ["Trajectory", "tools_of"]

#: The Responses item kinds a chat conversation can hold.
RESPONSES_KINDS = {"function_call", "function_call_output", "reasoning", "message"}


@dataclass
class Trajectory:
    """A conversation read from an agent's file."""

    #: What the file was read as (``"mini-swe-agent trajectory"``, ...).
    format: str
    #: The canonical chat messages, system prompt first when there is one.
    messages: list[Message]
    #: The tool definitions sent with the conversation (None: the file does not say).
    tools: list[dict[str, Any]] | None = None
    #: Records that are not chat messages, skipped: kind -> count.
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, kind: str, count: int = 1) -> None:
        """Counts ``count`` skipped records of ``kind``."""
        if count:
            self.skipped[kind] = self.skipped.get(kind, 0) + count


def without_none(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item without its None values and its ``extra`` run metadata."""
    return {k: v for k, v in item.items() if v is not None and k != "extra"}


def chat_items(items: list[dict[str, Any]], out: Trajectory) -> list[dict[str, Any]]:
    """The Responses items a chat conversation can hold; the rest (built-in tool calls, item
    references...) skipped and counted in ``out``."""
    kept = []
    for item in items:
        kind = item.get("type", "message" if "role" in item else None)
        if kind in RESPONSES_KINDS:
            kept.append(item)
        else:
            out.skip(f"Responses item {kind!r}")
    return kept


def tools_of(value: Any) -> list[dict[str, Any]] | None:
    """The tool definitions in ``value`` when they are in a form an API takes: Chat Completions
    (``{"type": "function", "function": {...}}``), Responses (``{"type": "function", "name":
    ...}``) or Anthropic (``{"name", "input_schema"}``); None otherwise (absent, empty, or an
    agent's own tool objects)."""
    if not isinstance(value, list) or not value:
        return None
    for tool in value:
        if not isinstance(tool, Mapping):
            return None
        chat = isinstance(tool.get("function"), Mapping)
        responses = tool.get("type") == "function" and isinstance(tool.get("name"), str)
        anthropic = isinstance(tool.get("name"), str) and "input_schema" in tool
        if not (chat or responses or anthropic):
            return None
    return [dict(tool) for tool in value]
