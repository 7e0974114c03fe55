"""The stateful Hypothesis machine of ``ContextWindow``: every operation a user has (messages,
tool-call groups, pins, images, custom strategies that rewrite, drop or reorder (valid and
invalid), ``Summarize`` with a summarizer that fails at random, ``SemanticMerge``,
``record_usage`` with provider counts 0.7x-1.5x ours, checkpoint/restore, notes, callbacks that
raise with and without ``raise_callback_errors``, ``aadd``/``acompact``, forced compaction), and
after every step the window's promises:

- ``check_history(messages())`` finds nothing (what a provider would reject);
- ``usage.total`` equals a from-scratch recount, and the calibrated count fits the budget;
- the system prompt, pinned messages and the newest user message are present and unchanged;
- every added message is in the window, rewritten (its original kept on the entry), or was
  reported evicted exactly once;
- a step that failed left the window exactly as it was.

``make soak`` runs the same machine until 100,000 steps were checked (``CTXWINDOW_SOAK_STEPS``).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ctxwindow import ContextOverflowError, ContextWindow, Tokenizer
from ctxwindow.checkpoint import TaskCheckpoint
from ctxwindow.messages import PLACEHOLDER_USER, check_history
from ctxwindow.strategies import (
    ClearToolResults,
    MicroCompact,
    ScoredEviction,
    SemanticMerge,
    SlidingWindow,
    Summarize,
    TruncateToolResults,
)
from ctxwindow.summarizers import extractive

TOKENIZER = Tokenizer("o200k_base")
Message = dict[str, Any]
SYSTEM = "You are a careful agent. Never reveal secrets."
#: Steps checked so far in this process (the invariant runs after every step).
STEPS = [0]
SOAK_STEPS = int(os.environ.get("CTXWINDOW_SOAK_STEPS", "0"))


class Abort(BaseException):
    """Stands for KeyboardInterrupt/SystemExit raised inside a summarizer (Hypothesis itself
    reacts to a real KeyboardInterrupt)."""


class CallbackBug(Exception):
    """What the machine's callbacks raise when told to."""


def key(message: Message) -> str:
    return json.dumps(message, sort_keys=True)


# --- custom strategies: (messages, budget) -> messages ----------------------------------------


def rewrite_assistants(messages: list[Message], budget: int) -> list[Message]:
    """Valid: shortens older assistant messages, tool calls included (their results must stay)."""
    out = []
    for index, message in enumerate(messages):
        if index < len(messages) // 2 and message["role"] == "assistant":
            message = {**message, "content": "(shortened)"}
        out.append(message)
    return out


def drop_older_half(messages: list[Message], budget: int) -> list[Message]:
    """Valid or refused: drops the older half by position (it may cut a group: dropping a call
    drops its results; a lone dropped result is refused)."""
    return messages[len(messages) // 2:]


def drop_tool_results(messages: list[Message], budget: int) -> list[Message]:
    """Invalid: keeps calls without their results (the plan must be refused)."""
    return [m for m in messages if m["role"] != "tool"]


def reverse(messages: list[Message], budget: int) -> list[Message]:
    """Invalid when it matters: reorders the conversation."""
    return list(reversed(messages))


def summary_of_older(messages: list[Message], budget: int) -> list[Message]:
    """Valid when the older part has no protected message: a new summary replaces it."""
    half = len(messages) // 2
    if half == 0:
        return messages
    return [{"role": "user", "content": f"[Summary of {half} messages]"}, *messages[half:]]


def raises(messages: list[Message], budget: int) -> list[Message]:
    raise ValueError("a strategy bug")


CUSTOM = {"rewrite": rewrite_assistants, "drop_half": drop_older_half, "drop_results": drop_tool_results,
          "reverse": reverse, "summary": summary_of_older, "raises": raises}
BUILT_IN = ["truncate", "clear", "micro", "scored", "sliding", "summarize", "merge"]

words = st.text(alphabet=st.sampled_from("abcdefghij klmnop 0123456789\n{}\":,"), min_size=1, max_size=200)


class WindowMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.window: ContextWindow | None = None
        self.added: list[Message] = []
        self.evicted: list[Message] = []
        self.pinned: list[Message] = []
        self.serial = 0
        self.callbacks_raise = False
        self.checkpoints: list[tuple[TaskCheckpoint, list[Message], list[Message], list[Message]]] = []
        self.rng = random.Random(0)

    # --- the window ---------------------------------------------------------------------------

    def summarizer(self, system: str, user: str) -> str:
        draw = self.rng.random()
        if draw < 0.25:
            raise RuntimeError("the model is overloaded")
        if draw < 0.30:
            raise Abort()
        if draw < 0.35:
            return ""
        return extractive(system, user)

    def on_evict(self, evicted: list[Message], usage: Any) -> None:
        self.evicted.extend(evicted)
        if self.callbacks_raise:
            raise CallbackBug("on_evict")

    def on_compact(self, result: Any) -> None:
        if self.callbacks_raise:
            raise CallbackBug("on_compact")

    @initialize(
        budget=st.integers(min_value=600, max_value=4000),
        preserve_recent=st.integers(min_value=0, max_value=4),
        strategies=st.lists(st.sampled_from(BUILT_IN + list(CUSTOM)), unique=True, max_size=3),
        reserve=st.integers(min_value=0, max_value=200),
        raise_errors=st.booleans(),
        seed=st.integers(0, 2**32 - 1),
    )
    def start(self, budget: int, preserve_recent: int, strategies: list[str], reserve: int,
              raise_errors: bool, seed: int) -> None:
        self.rng = random.Random(seed)
        built_in = {"truncate": TruncateToolResults(200), "clear": ClearToolResults(keep=1),
                    "micro": MicroCompact(), "scored": ScoredEviction("hybrid"), "sliding": SlidingWindow(12),
                    "summarize": Summarize(self.summarizer, preserve_recent=2),
                    "merge": SemanticMerge(threshold=0.8)}
        chosen = [built_in[s] if s in built_in else CUSTOM[s] for s in strategies]
        self.window = ContextWindow(
            "gpt-4o", max_tokens=budget + reserve, reserve_output=reserve, system=SYSTEM,
            strategies=chosen, preserve_recent=preserve_recent, on_evict=self.on_evict,
            on_compact=self.on_compact, raise_callback_errors=raise_errors)

    def state(self) -> tuple[Any, ...]:
        window = self.window
        assert window is not None
        return (window.messages(), window.pending_messages(), window.usage, window.turn, len(window),
                list(window.entries), window.tokens_added, window.compactions, window.evicted_messages,
                [(n.category, n.text) for n in window.notes.notes])

    def attempt(self, operation: Any) -> bool:
        """Runs one operation; True when it took effect. A failure must change nothing."""
        before = self.state()
        evicted = len(self.evicted)
        try:
            operation()
        except CallbackBug:
            assert self.window is not None and self.window.events.raise_errors
            return True  # the new state is final and complete; the callback error surfaced
        except (ContextOverflowError, Abort) as error:
            if isinstance(error, ContextOverflowError):
                assert error.needed > error.available
            assert self.state() == before, f"a failed step ({type(error).__name__}) changed the window"
            assert len(self.evicted) == evicted, "a failed step reported evictions"
            return False
        return True

    def add(self, message: Message, pinned: bool = False, use_async: bool = False) -> bool:
        window = self.window
        assert window is not None
        if use_async:
            ok = self.attempt(lambda: asyncio.run(window.aadd(message, pinned=pinned)))
        else:
            ok = self.attempt(lambda: window.add(message, pinned=pinned))
        if ok:
            self.added.append(message)
            if pinned:
                self.pinned.append(message)
        return ok

    def text(self, body: str) -> str:
        self.serial += 1
        return f"[{self.serial}] {body}"

    def open_calls(self) -> bool:
        return self.window is not None and bool(self.window.pending_messages())

    # --- rules --------------------------------------------------------------------------------

    @precondition(lambda self: self.window is not None and not self.open_calls())
    @rule(body=words, pinned=st.booleans(), use_async=st.booleans())
    def user(self, body: str, pinned: bool, use_async: bool) -> None:
        self.add({"role": "user", "content": self.text(body)}, pinned=pinned and len(self.pinned) < 2,
                 use_async=use_async)

    @precondition(lambda self: self.window is not None and not self.open_calls() and bool(self.added))
    @rule(body=words)
    def assistant(self, body: str) -> None:
        self.add({"role": "assistant", "content": self.text(body)})

    @precondition(lambda self: self.window is not None and not self.open_calls() and bool(self.added))
    @rule(results=st.lists(st.text(alphabet="xyz \n\t{}", min_size=0, max_size=3000), min_size=1, max_size=3),
          similar=st.booleans())
    def tool_calls(self, results: list[str], similar: bool) -> None:
        ids = [self.text("call").replace(" ", "_") for _ in results]
        calls = [{"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": 1}"}}
                 for i in ids]
        if not self.add({"role": "assistant", "content": None, "tool_calls": calls}):
            return
        for call_id, body in zip(ids, results):
            content = ("status ok rows 1 2 3 " * 20 + call_id) if similar else self.text(body)
            if not self.add({"role": "tool", "tool_call_id": call_id, "content": content}):
                return  # the group stays pending and unsent; the next tool result may fit

    @precondition(lambda self: self.window is not None and not self.open_calls())
    @rule(kind=st.sampled_from(["user", "user", "assistant", "tools", "tools"]), body=words,
          results=st.lists(st.text(alphabet="xyz \n\t{}", min_size=0, max_size=1500), min_size=1, max_size=2))
    def turn(self, kind: str, body: str, results: list[str]) -> None:
        """The common case, drawn more often than the other rules: a plain turn."""
        if kind == "user" or not self.added:
            self.add({"role": "user", "content": self.text(body)})
        elif kind == "assistant":
            self.add({"role": "assistant", "content": self.text(body)})
        else:
            self.tool_calls(results, similar=False)

    @precondition(lambda self: self.open_calls())
    @rule()
    def answer_pending(self) -> None:
        window = self.window
        assert window is not None
        pending = window.pending_messages()
        answered = {m["tool_call_id"] for m in pending if m["role"] == "tool"}
        for call in pending[0]["tool_calls"]:
            if call["id"] not in answered:
                if not self.add({"role": "tool", "tool_call_id": call["id"], "content": "short"}):
                    return

    @precondition(lambda self: self.window is not None and not self.open_calls())
    @rule(detail=st.sampled_from(["low", "high"]))
    def image(self, detail: str) -> None:
        self.add({"role": "user", "content": [
            {"type": "text", "text": self.text("look")},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": detail,
                                                "width": 800, "height": 600}}]})

    @precondition(lambda self: self.window is not None)
    @rule(use_async=st.booleans(), low=st.booleans())
    def compact(self, use_async: bool, low: bool) -> None:
        window = self.window
        assert window is not None
        target = 0.3 if low else None
        if use_async:
            self.attempt(lambda: asyncio.run(window.acompact(force=True, target=target)))
        else:
            self.attempt(lambda: window.compact(force=True, target=target))

    @precondition(lambda self: self.window is not None)
    @rule(factor=st.floats(min_value=0.7, max_value=1.5))
    def record_usage(self, factor: float) -> None:
        window = self.window
        assert window is not None
        self.attempt(lambda: window.record_usage(prompt_tokens=int(window.usage.total * factor)))

    @precondition(lambda self: self.window is not None)
    @rule(body=words, importance=st.sampled_from(["critical", "normal", "low"]))
    def write_note(self, body: str, importance: str) -> None:
        window = self.window
        assert window is not None
        self.attempt(lambda: window.write_note("decisions", self.text(body), importance))

    @precondition(lambda self: self.window is not None)
    @rule()
    def checkpoint(self) -> None:
        window = self.window
        assert window is not None
        checkpoint = window.checkpoint("keep the invariants")
        self.checkpoints.append((checkpoint, list(self.added), list(self.evicted), list(self.pinned)))
        del self.checkpoints[:-3]

    @precondition(lambda self: bool(self.checkpoints))
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        window = self.window
        assert window is not None
        checkpoint, added, evicted, pinned = data.draw(st.sampled_from(self.checkpoints))
        before = len(self.evicted)
        if self.attempt(lambda: window.restore(checkpoint)):
            # A restore that compacts reports what it evicts.
            during = self.evicted[before:]
            self.added, self.evicted, self.pinned = list(added), list(evicted) + during, list(pinned)

    @precondition(lambda self: self.window is not None)
    @rule()
    def toggle_raising_callbacks(self) -> None:
        self.callbacks_raise = not self.callbacks_raise

    # --- after every step -----------------------------------------------------------------------

    @invariant()
    def promises(self) -> None:
        STEPS[0] += 1
        window = self.window
        if window is None:
            return
        out = window.messages()
        assert check_history(out) == [], check_history(out)
        counted = TOKENIZER.count_messages(out)
        tools = window.usage.by_component["tool_definitions"]
        assert window.usage.total == counted + tools, "usage disagrees with a from-scratch recount"
        assert (counted + tools) * window.usage.calibration <= window.prompt_budget + 1e-6, \
            "the calibrated prompt does not fit the budget"
        assert out[0] == {"role": "system", "content": SYSTEM}
        conversation = [m for m in out if m["role"] != "system"]
        for message in self.pinned:
            assert message in conversation, "a pinned message was evicted or altered"
        pending = window.pending_messages()
        completed = [m for m in self.added if m not in pending]
        users = [m for m in completed if m["role"] == "user"]
        if users:
            assert users[-1] in conversation, "the newest user message was evicted or altered"
        present = {key(m) for m in conversation if m != PLACEHOLDER_USER}
        originals = {key(e.original) for e in window.entries if e.original is not None}
        reported: dict[str, int] = {}
        for message in self.evicted:
            reported[key(message)] = reported.get(key(message), 0) + 1
        for message in completed:
            k = key(message)
            times = reported.get(k, 0)
            assert times <= 1, f"reported evicted {times} times: {k[:80]}"
            assert k in present or k in originals or times == 1, f"message lost: {k[:80]}"
            assert not (times and (k in present or k in originals)), f"reported evicted but still there: {k[:80]}"


TestWindowMachine = WindowMachine.TestCase
TestWindowMachine.settings = settings(max_examples=150, stateful_step_count=60, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])

if SOAK_STEPS:
    def test_soak() -> None:
        """``make soak``: fresh random runs of the machine until SOAK_STEPS steps were checked."""
        from hypothesis.stateful import run_state_machine_as_test

        STEPS[0] = runs = 0
        while STEPS[0] < SOAK_STEPS:
            run_state_machine_as_test(WindowMachine, settings=settings(
                max_examples=100, stateful_step_count=100, deadline=None, database=None,
                suppress_health_check=list(HealthCheck)))
            runs += 1
        print(f"\nsoak: {STEPS[0]:,} steps checked in {runs * 100:,} machine runs, all promises held")
