"""What the window-side tests share: message builders and the checks every window must pass,
through its public API only (``messages()``, ``usage``, ``entries``, ...)."""

from __future__ import annotations

from typing import Any

from ctxwindow import ContextWindow, Tokenizer
from ctxwindow.messages import check_history

TOKENIZER = Tokenizer("o200k_base")
Message = dict[str, Any]


def call(call_id: str, name: str = "lookup") -> Message:
    """An assistant message making one tool call."""
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}


def result(call_id: str, content: str) -> Message:
    """The tool result answering ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def check_valid(window: ContextWindow, system: str | None) -> list[Message]:
    """The invariants every output must satisfy (the provider rules by the package's one checker,
    ``check_history``); returns messages()."""
    out = window.messages()
    recount = TOKENIZER.count_messages(out)
    tools = window.usage.by_component["tool_definitions"]
    assert window.usage.total == recount + tools, "usage disagrees with a from-scratch recount"
    assert recount + tools <= window.prompt_budget, "the prompt does not fit the budget"
    if system is not None:
        assert out[0] == {"role": "system", "content": system}
    assert check_history(out) == [], check_history(out)
    return out


def state_of(window: ContextWindow) -> tuple[Any, ...]:
    """Everything a failed operation must leave as it was."""
    return (window.messages(), window.pending_messages(), window.usage, window.turn, len(window),
            window.tokens_added, window.compactions, window.evicted_messages, list(window.entries))


def assert_valid(window: ContextWindow) -> None:
    """The prompt is a valid history, ``usage`` is its recount, and it fits the budget once the
    provider's calibration is applied."""
    out = window.messages()
    assert check_history(out) == []
    tools = window.usage.by_component["tool_definitions"]
    counted = TOKENIZER.count_messages(out) + tools
    assert counted == window.usage.total
    assert counted * window.usage.calibration <= window.prompt_budget + 1e-9


def step(turn: int) -> str:
    """A user message of one step with its decisions (a port, a path) and filler, ~300 tokens."""
    return (f"Step {turn}: we decided to set port {8000 + turn} in /srv/app/config_{turn}.yaml. "
            + "The rest of this message is ordinary discussion. " * 25)


def user_facts_window(**settings: Any) -> ContextWindow:
    """A window whose first user message holds an order id, an invoice id and a path, followed
    by enough turns to be compacted (``settings`` choose the strategies and the gate)."""
    window = ContextWindow("gpt-4o", max_tokens=1200, system="sys", preserve_recent=2, **settings)
    window.add({"role": "user", "content": "My order is QX71B2 and the invoice is INV-88123, see /srv/orders/q.csv."})
    for i in range(25):
        window.add({"role": "assistant", "content": f"Looking into it, part {i}. " + "Checking the records. " * 10})
        window.add({"role": "user", "content": f"Still waiting, {i}."})
    return window
