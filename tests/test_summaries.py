"""Summaries that never lose history: the extractive summarizer, transactional and incremental
Summarize, progressive summaries, notes, semantic merge and fidelity, on real and canary data."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwindow import CompactionResult, ContextOverflowError, ContextWindow, InvalidArgumentError
from ctxwindow.fidelity import extract_key_facts, judge_fidelity, key_fact_retention
from ctxwindow.messages import from_tau_bench, text_of
from ctxwindow.strategies import Notes, ProgressiveSummarize, SemanticMerge, Summarize
from ctxwindow.summarizers import SUMMARY_HEADER, extractive

from .window_checks import call, check_valid, result

Message = dict[str, Any]


def conversation(turns: int, words: int = 40) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out.append({"role": "user", "content": f"question {i}: " + "please look into it " * (words // 5)})
        out.append({"role": "assistant", "content": f"answer {i}: " + "here is what I found " * (words // 5)})
    return out


def fifo_messages(messages: list[Message], budget: int) -> list[Message]:
    window = ContextWindow("gpt-4o", max_tokens=budget, system="sys", preserve_recent=2)
    window.extend(messages)
    return window.messages()


def assert_fell_back(window: ContextWindow, messages: list[Message]) -> None:
    """The window fell back to the last resort: the newest messages, as added, after a summary
    that holds only the kept facts of what was dropped (no summarizer wrote it)."""
    out = check_valid(window, "sys")
    conversation_ = out[1:]
    head = str(conversation_[0]["content"])
    assert head.startswith(SUMMARY_HEADER) and "retrieval id" not in head
    assert all(line.startswith(("Goal:", "Kept facts:")) for line in head.splitlines()[1:])
    assert conversation_[1:] == messages[len(messages) - len(conversation_) + 1:]


# --- the extractive summarizer ------------------------------------------------------------


def test_extractive_keeps_rules_facts_and_goal_within_target() -> None:
    transcript = "\n".join([
        "user: I need to rebook my trip to Denver next week.",
        "assistant: Sure, happy to help with that!",
        "user: You must never charge the Visa card ending 4242.",
        "assistant: Understood.",
        "tool search_flights result: " + json.dumps({"flights": [{"number": f"HAT{n}", "price": n} for n in range(100, 130)]}),
        "assistant: We decided to take HAT112 because it is the cheapest.",
        "tool book result: Error: seat 12A unavailable",
        "user: thanks, that is all",
    ])
    prompt = f"<transcript>\n{transcript}\n</transcript>\nTARGET_TOKENS: 400"
    summary = extractive("", prompt)
    assert summary == extractive("", prompt)  # deterministic
    assert summary.startswith(SUMMARY_HEADER)
    for kept in ("rebook my trip to Denver", "must never charge the Visa card ending 4242",
                 "decided to take HAT112", "Error: seat 12A unavailable", "HAT129"):
        assert kept in summary
    assert "happy to help" not in summary and "thanks, that is all" not in summary
    from ctxwindow import Tokenizer

    assert Tokenizer("o200k_base").count(summary) <= 400
    tight = extractive("", f"<transcript>\n{transcript}\n</transcript>\nTARGET_TOKENS: 60")
    assert Tokenizer("o200k_base").count(tight) <= 60 and "never charge" in tight


# --- Summarize: transactional and incremental ----------------------------------------------


class Flaky:
    """A summarizer that fails in a chosen way."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls: list[str] = []

    def __call__(self, system: str, user: str) -> str:
        self.calls.append(user)
        if self.mode == "raise":
            raise RuntimeError("provider down")
        if self.mode == "empty":
            return "   "
        if self.mode == "longer":
            return user * 2
        if self.mode == "slow":
            time.sleep(0.5)
            return "late"
        return extractive(system, user)


@pytest.mark.parametrize("mode", ["raise", "empty", "longer", "slow"])
def test_a_failing_summary_loses_nothing(mode: str) -> None:
    messages = conversation(30)
    flaky = Flaky(mode)
    window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                           strategies=[Summarize(flaky, preserve_recent=4, timeout=0.1)])
    window.extend(messages)
    assert flaky.calls, "the summarizer was tried"
    assert_fell_back(window, messages)
    plain = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2, fidelity_gate=False,
                          strategies=[Summarize(Flaky(mode), preserve_recent=4, timeout=0.1)])
    plain.extend(messages)
    assert plain.messages() == fifo_messages(messages, 1500)  # without the gate: plain FIFO
    strategy = window.cascade.strategies[0]
    assert isinstance(strategy, Summarize) and strategy.failures > 0 and strategy.last_error


def test_summarizing_is_retried_and_incremental() -> None:
    prompts: list[str] = []
    failures = iter([True, False, False, False, False, False, False, False, False, False] * 10)

    def sometimes(system: str, user: str) -> str:
        prompts.append(user)
        if next(failures):
            raise RuntimeError("transient")
        return extractive(system, user)

    window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                           strategies=[Summarize(sometimes, preserve_recent=4)])
    window.extend(conversation(40))
    out = check_valid(window, "sys")
    assert out[1]["content"].startswith(SUMMARY_HEADER) and out[1]["role"] == "user"
    assert len(prompts) >= 3
    # Each new summary folds the previous summary and only the newly replaced messages.
    later = [p for p in prompts if "Previous summary:\n[Conversation Summary]" in p]
    assert later
    transcripts = [p.split("<transcript>")[1] for p in later]
    for a, b in zip(transcripts, transcripts[1:]):
        assert not (set(re.findall(r"question (\d+)", a)) & set(re.findall(r"question (\d+)", b)))
    retrieval = re.search(r"retrieval id (ctx-[0-9a-f]{16})", out[1]["content"])
    assert retrieval and window.retrieve(retrieval.group(1))


def test_async_summarizer_is_awaited_on_the_callers_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def summarize(system: str, user: str) -> str:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return extractive(system, user)

    async def agent() -> tuple[asyncio.AbstractEventLoop, CompactionResult]:
        window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                               strategies=[Summarize(summarize, preserve_recent=4)])
        await window.aextend(conversation(30))
        assert window.messages()[1]["content"].startswith(SUMMARY_HEADER)
        check_valid(window, "sys")
        result = await window.acompact(force=True, target=0.3)
        check_valid(window, "sys")
        return asyncio.get_running_loop(), result

    loop, result_ = asyncio.run(agent())
    assert loops and all(seen is loop for seen in loops), "the summarizer ran on another event loop"
    assert result_.tokens_after <= result_.tokens_before


def test_async_summarizer_from_sync_code_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    async def summarize(system: str, user: str) -> str:
        return extractive(system, user)

    window = ContextWindow("gpt-4o", max_tokens=1500, system="sys", preserve_recent=2,
                           strategies=[Summarize(summarize, preserve_recent=4)])
    messages = conversation(30)
    with caplog.at_level("WARNING", logger="ctxwindow"):
        window.extend(messages)
    assert_fell_back(window, messages)
    assert any("aadd" in r.getMessage() for r in caplog.records)


@given(st.lists(st.sampled_from(["user", "assistant", "tools"]), min_size=1, max_size=50),
       st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_random_failures_never_break_the_window(script: list[str], seed: int) -> None:
    rng = random.Random(seed)

    def unreliable(system: str, user: str) -> str:
        if rng.random() < 0.5:
            raise RuntimeError("flaky")
        return extractive(system, user)

    evicted: list[Message] = []
    window = ContextWindow("gpt-4o", max_tokens=1200, system="sys", preserve_recent=2,
                           strategies=[Summarize(unreliable, preserve_recent=3)],
                           on_evict=lambda e, u: evicted.extend(e))
    added: list[Message] = []
    serial = 0
    for step in script:
        batch: list[Message]
        if step == "user":
            batch = [{"role": "user", "content": f"u{serial} " + "ask " * 30}]
        elif step == "assistant" and added:
            batch = [{"role": "assistant", "content": f"a{serial} " + "say " * 30}]
        elif step == "tools" and added:
            batch = [call(f"c{serial}"), result(f"c{serial}", f"r{serial} " + "row " * 80)]
        else:
            continue
        serial += 1
        try:
            window.extend(batch)
        except ContextOverflowError:
            break
        added.extend(batch)
        check_valid(window, "sys")
    present = window.messages()
    for message in added:
        assert message in present or message in evicted, "a message was lost"
    once = (window.compact(force=True), window.messages())[1]
    window.compact(force=True)
    assert window.messages() == once or window.messages()[1:] != once  # summaries may fold further
    check_valid(window, "sys")


# --- canaries and real data ----------------------------------------------------------------


# The canaries and tau-bench ids are measured in tests/test_fidelity.py, on data halves.


# --- progressive summaries, semantic merge, notes -----------------------------------------


def test_progressive_summarize_ages_messages_once_per_boundary() -> None:
    strategy = ProgressiveSummarize(levels=(1, 3, 6))
    window = ContextWindow("gpt-4o", max_tokens=2500, system="sys", preserve_recent=2, strategies=[strategy])
    for i in range(14):
        window.add({"role": "user", "content": f"Turn {i} asks about file src/module_{i}.py and error code {i}{i}"})
        window.add({"role": "assistant", "content": f"Turn {i}: decided to refactor module_{i}.\n"
                                                    + "Some long explanation of the reasoning. " * 25})
    contents = [str(m["content"]) for m in window.messages()]
    prefixes = {c.split("]")[0] + "]" for c in contents if c.startswith("[")}
    assert prefixes & {"[Key points]", "[One line]", "[Title]"}
    check_valid(window, "sys")
    with pytest.raises(InvalidArgumentError):
        ProgressiveSummarize(levels=(5, 1, 20))


def test_semantic_merge_keeps_the_newest_duplicate() -> None:
    merge = SemanticMerge(threshold=0.9)
    window = ContextWindow("gpt-4o", max_tokens=2000, preserve_recent=2, strategies=[merge])
    window.add({"role": "user", "content": "watch the deployment"})
    for i in range(12):
        window.add(call(f"p{i}", name="status"))
        window.add(result(f"p{i}", "deployment status: 3 pods running, 1 pending, image v1.2.3 " * 8))
    window.add({"role": "user", "content": "is it done?"})
    check_valid(window, "sys") if False else check_valid(window, None)
    assert merge.merges and all(m.older_seq < m.newer_seq for m in merge.merges)
    tools = [m for m in window.messages() if m["role"] == "tool"]
    assert tools[-1]["content"].startswith("deployment status")
    assert any(m["content"].startswith("[Merged: near-duplicate of the later status result") for m in tools)

    def constant(texts: Any) -> np.ndarray:
        return np.ones((len(texts), 4))

    custom = SemanticMerge(threshold=0.99, embedder=constant)
    window = ContextWindow("gpt-4o", max_tokens=2000, preserve_recent=2, strategies=[custom])
    window.add({"role": "user", "content": "go"})
    for i in range(8):
        window.add(call(f"q{i}", name="fetch"))
        window.add(result(f"q{i}", f"unrelated page {i} " * 60))
    check_valid(window, None)
    assert custom.merges


def test_notes_are_carried_verbatim_critical_first() -> None:
    window = ContextWindow("gpt-4o", max_tokens=1200, system="sys", preserve_recent=1, notes=Notes(max_tokens=40))
    window.write_note("misc", "low priority trivia about the office plants", "low")
    window.write_note("constraints", "Never deploy on Fridays.", "critical")
    window.write_note("decisions", "Use PostgreSQL 16 for the new service.", "high")
    window.extend(conversation(30))
    out = check_valid(window, "sys")
    notes = out[1]["content"]
    assert out[1]["role"] == "system" and notes.startswith("[Notes]")
    assert notes.index("Never deploy on Fridays.") < notes.index("PostgreSQL 16")
    assert "office plants" not in notes  # over the cap, least important left out
    with pytest.raises(InvalidArgumentError, match="unknown note category"):
        window.write_note("gossip", "x")
    with pytest.raises(InvalidArgumentError, match="unknown importance"):
        window.write_note("bugs", "x", "urgent")


# --- fidelity ----------------------------------------------------------------------------


def test_key_fact_retention() -> None:
    original = ('Reservation ZFA04Y for user mia_li_3668 costs 1,245.50 USD.\n'
                'Edit src/app/config.py and keep "strict mode" on.\n'
                'Traceback: ValueError: bad seat 12A')
    facts = extract_key_facts(original)
    assert "ZFA04Y" in facts["identifier"] and "mia_li_3668" in facts["identifier"]
    assert "src/app/config.py" in facts["path"] and "strict mode" in facts["quoted"]
    assert "1,245.50" in facts["number"] and any("ValueError" in e for e in facts["error"])
    assert key_fact_retention(original, original).score == 1.0
    partial = key_fact_retention(original, "ZFA04Y mia_li_3668")
    assert 0 < partial.score < 1 and "src/app/config.py" in partial.missing
    assert partial.by_kind["identifier"][0] >= 2
    assert key_fact_retention("no facts here", "").score == 1.0


def test_judge_protocol() -> None:
    def answer(context: str, question: str) -> str:
        return "yes" if "ZFA04Y" in context else "unknown"

    report = judge_fidelity("booking ZFA04Y", "booking", ["Is there a booking id?", "Which one?"],
                            answer, lambda q, a, b: a == b)
    assert report.score == 0.0 and len(report.answers) == 2
    assert judge_fidelity("a", "a", [], answer, lambda q, a, b: True).score == 1.0
