"""The fidelity gate: before a compaction is applied, the key facts of what it replaces must be
present in what replaces it.

The key facts of a replaced message are those of :func:`ctxwindow.fidelity.extract_key_facts`
(numbers, paths, identifiers, quoted strings, error lines) plus, for the conversation's first
user message, the user's goal (its opening sentences). "Present" means present as whole tokens
(:func:`ctxwindow.fidelity.fact_present`) anywhere in the planned prompt: the system prompt,
the standing-instructions block, notes, the summary, placeholders and the messages kept.

What is missing is re-injected as a ``Kept facts:`` section of the conversation summary (one is
created, first in the conversation, when the plan has none), within a cap of a fifth of the
room the conversation has. Facts are kept in order of priority:

0. the user's goal;
1. facts the user wrote (required: a strategy that cannot keep them all is refused and the next
   strategy runs);
2. facts an earlier summary kept;
3. facts in the assistant's text and tool-call arguments (JSON: values, not keys);
4. identifiers, dates, paths, quoted strings and error lines of tool results (JSON: values);
5. bare numbers the assistant or a tool wrote;

identifiers, dates and the like before bare numbers, and newest first, within a priority. The last resort keeps what fits and reports the rest as lost.
The outcome is :class:`GateOutcome`, in ``CompactionResult.gate``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwindow._canonical import text_of
from ctxwindow._types import Entry, Message
from ctxwindow.fidelity import KEY_FACT_KINDS, extract_key_facts, fact_present, json_values
from ctxwindow.instructions import split_sentences
from ctxwindow.strategies.base import CompactionState
from ctxwindow.summarizers import SUMMARY_HEADER

__all__ = ["GateOutcome", "FidelityGate", "KEPT_FACTS", "REQUIRED_TIER"]

KEPT_FACTS = "Kept facts:"
GOAL = "Goal:"
#: Facts of this priority or higher (lower number) must be kept for a strategy to apply.
REQUIRED_TIER = 1
_ORIGINALS = re.compile(r"\n?\(originals: retrieval id [^)]*\)\s*$")
_MAX_FACT_CHARS = 200
_MAX_ID_CHARS = 48
_WORDS = re.compile(r"\w+")
_ONE_WORD = re.compile(r"\w+")
_RETRIEVAL_ID = re.compile(r"ctx-[0-9a-f]{16}|^[0-9a-f]{16}$|retrieval id")


@dataclass(frozen=True)
class GateOutcome:
    """What the gate found for one compaction: ``checked`` key facts of the replaced content,
    ``reinjected`` of them written into the summary's kept-facts section, ``lost`` the ones
    that are in neither the plan nor the section (after the last resort), ``refused`` the
    strategies whose plans were refused because they lost facts the user wrote."""

    checked: int
    reinjected: int
    lost: tuple[str, ...]
    refused: tuple[str, ...] = ()

    @property
    def kept(self) -> int:
        return self.checked - len(self.lost)

    @property
    def score(self) -> float:
        """The fraction of checked facts still in the prompt (1.0 when none were checked)."""
        return self.kept / self.checked if self.checked else 1.0

    @property
    def passed(self) -> bool:
        return not self.lost


@dataclass(frozen=True)
class _Fact:
    value: str
    tier: int
    seq: int
    #: 1 for a bare number (it means little without its context), else 0.
    weak: int = 0

    @property
    def order(self) -> tuple[int, int, int]:
        return (self.tier, self.weak, -self.seq)


def _message_text(message: Message) -> str:
    text = text_of(message)
    calls = message.get("tool_calls") or []
    if calls:
        text += "\n" + "\n".join(str(call.get("function", {}).get("arguments", "")) for call in calls
                                 if isinstance(call, dict))
    return text


def _fact_text(message: Message) -> str:
    """The text whose facts count: JSON (tool results, call arguments) by its values only, one
    per line (keys name fields, they are not facts)."""
    parts = [json_values(text_of(message))]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            parts.append(json_values(str(call.get("function", {}).get("arguments", ""))))
    return "\n".join(parts)


def _kept_split(content: str) -> tuple[str, str]:
    """A summary's content as (body without the kept-facts section and originals line, the
    originals line)."""
    originals = _ORIGINALS.search(content)
    tail = originals.group(0).strip() if originals else ""
    body = content[: originals.start()] if originals else content
    cuts = [i for i in (body.find("\n" + GOAL), body.find("\n" + KEPT_FACTS)) if i >= 0]
    if cuts:
        body = body[:min(cuts)]
    return body.rstrip(), tail


class FidelityGate:
    """Checks plans of one compaction against the window as it was (``entries``)."""

    def __init__(self, entries: Sequence[Entry], overhead_text: str, count: Callable[[str], int],
                 cap: int) -> None:
        self.entries = list(entries)
        self.overhead_text = overhead_text
        self.count = count
        self.cap = max(cap, 16)
        self.refused: list[str] = []
        self._facts: dict[tuple[int, bool], list[_Fact]] = {}
        first_user = next((e for e in self.entries if e.kind == "message" and e.role == "user"), None)
        self._goal_seq = first_user.seq if first_user is not None and first_user.turn <= 1 else None
        self.outcome = GateOutcome(0, 0, ())

    def facts_of(self, entry: Entry, whole: bool = False) -> list[_Fact]:
        """The key facts of an entry of the window as it was; of a summary, those of its
        kept-facts section, or with ``whole`` (it is being replaced) of all its text."""
        key = (entry.seq, whole)
        cached = self._facts.get(key)
        if cached is not None:
            return cached
        message = entry.original or entry.message
        role = message.get("role")
        if entry.kind == "summary":
            content = str(message.get("content") or "")
            body, _ = _kept_split(content)
            kept = content[len(body):]
            tiers = dict.fromkeys(KEY_FACT_KINDS, 2)
            text = _ORIGINALS.sub("", content) if whole else kept
            goal = next((line[len(GOAL):].strip() for line in kept.splitlines() if line.startswith(GOAL)), None)
        else:
            text = _fact_text(message)
            goal = None
            if role == "user":
                tiers = dict.fromkeys(KEY_FACT_KINDS, 1)
            elif role == "tool":
                tiers = {**dict.fromkeys(KEY_FACT_KINDS, 4), "number": 5}
            else:
                tiers = {**dict.fromkeys(KEY_FACT_KINDS, 3), "number": 5}
        facts: list[_Fact] = []
        if entry.seq == self._goal_seq:
            goal = " ".join(split_sentences(text_of(message))[:2])[:_MAX_FACT_CHARS] or None
        if goal:
            facts.append(_Fact(goal, 0, entry.seq))
        for kind, values in extract_key_facts(text).items():
            for value in values:
                value = value.strip()
                if len(value) > (_MAX_FACT_CHARS if kind in ("error", "quoted") else _MAX_ID_CHARS):
                    continue  # a long error line is kept by its identifiers; a long blob is no fact
                if value.startswith((KEPT_FACTS, GOAL)) or _RETRIEVAL_ID.search(value):
                    continue
                facts.append(_Fact(value, tiers[kind], entry.seq, int(kind == "number")))
        self._facts[key] = facts
        return facts

    def check(self, state: CompactionState, name: str, last_resort: bool = False,
              room: int | None = None) -> list[str]:
        """Re-injects into the plan's summary what it would lose; returns the problems (facts
        the user wrote that do not fit: the plan is refused). With ``last_resort`` nothing is
        refused: what does not fit is reported as lost. ``room``: the tokens the section may
        grow by at most (the plan must stay within its budget)."""
        kept_messages = {id(e.message) for e in state.entries}
        summary_index = next((i for i, e in enumerate(state.entries)
                              if e.kind == "summary" and not state.is_protected(e)), None)
        candidates: dict[str, _Fact] = {}
        for entry in self.entries:
            kept = id(entry.message) in kept_messages
            if kept and entry.kind != "summary":
                continue
            for fact in self.facts_of(entry, whole=not kept):
                known = candidates.get(fact.value)
                if known is None or fact.order < known.order:
                    candidates[fact.value] = fact
        if not candidates:
            self.outcome = GateOutcome(0, 0, (), tuple(self.refused))
            return []
        parts = [self.overhead_text]
        for index, entry in enumerate(state.entries):
            if index == summary_index:
                parts.append(_kept_split(str(entry.message.get("content") or ""))[0])
            else:
                parts.append(_message_text(entry.message))
        text = "\n".join(parts)
        words = set(_WORDS.findall(text))

        def present(value: str) -> bool:
            # A one-word fact absent from the text's words is absent (one set lookup); the
            # others are searched.
            if _ONE_WORD.fullmatch(value) and value not in words:
                return False
            return fact_present(value, text)

        missing = sorted((f for f in candidates.values() if not present(f.value)), key=lambda f: f.order)
        cap = self.cap
        if room is not None and summary_index is not None:
            current = str(state.entries[summary_index].message.get("content") or "")
            body, originals = _kept_split(current)
            cap = min(cap, self.count(current) - self.count(body + originals) + max(room, 0))
        elif room is not None:  # a new summary message: its header and framing count too
            cap = min(cap, room - self.count(SUMMARY_HEADER) - 8)
        chosen: list[_Fact] = []
        used = self.count(KEPT_FACTS) + 2
        for fact in missing:
            line = f"{GOAL} {fact.value}" if fact.tier == 0 else fact.value
            tokens = self.count(line + "; ")
            if used + tokens <= cap:
                chosen.append(fact)
                used += tokens
        kept_values = {f.value for f in chosen}
        lost = [f for f in missing if f.value not in kept_values]
        required_lost = [f.value for f in lost if f.tier <= REQUIRED_TIER]
        if required_lost and not last_resort:
            self.refused.append(name)
            return [f"fidelity gate: {len(required_lost)} fact(s) the user wrote would be lost "
                    f"(e.g. {required_lost[0]!r})"]
        before = list(state.entries)
        self._write(state, summary_index, chosen)
        if room is not None and state.total() > state.budget:
            lost, chosen = missing, []
            state.entries = before  # a summary inserted just now goes too
            self._write(state, summary_index, chosen)
        self.outcome = GateOutcome(len(candidates), len(chosen), tuple(f.value for f in lost), tuple(self.refused))
        return []

    def _write(self, state: CompactionState, summary_index: int | None, chosen: list[_Fact]) -> None:
        goals = [f.value for f in chosen if f.tier == 0]
        others = [f.value for f in chosen if f.tier != 0]
        section = ""
        if goals:
            section += "\n" + "\n".join(f"{GOAL} {goal}" for goal in goals)
        if others:
            section += f"\n{KEPT_FACTS} " + "; ".join(others)
        if summary_index is None:
            if not section:
                return
            planned = {id(x.message) for x in state.entries}
            replaced = [e for e in self.entries if id(e.message) not in planned]
            first_seq = min((e.seq for e in replaced), default=None)
            position = next((i for i, e in enumerate(state.entries) if first_seq is not None and e.seq > first_seq),
                            len(state.entries))
            while 0 < position < len(state.entries) and state.entries[position].group == state.entries[position - 1].group:
                position += 1  # never inside a tool-call group
            message: Message = {"role": "user", "content": SUMMARY_HEADER + section}
            turn = state.entries[position - 1].turn if position else state.current_turn
            seq = state.new_seq()
            state.entries.insert(position, Entry(message, state.count_message(message), seq, seq, turn,
                                                 kind="summary"))
            return
        entry = state.entries[summary_index]
        body, originals = _kept_split(str(entry.message.get("content") or ""))
        content = body + section + (f"\n{originals}" if originals else "")
        if content == entry.message.get("content"):
            return
        message = {**entry.message, "content": content}
        state.entries[summary_index] = entry._replace(message=message, tokens=state.count_message(message))


def overhead_text(messages: Sequence[Message | None], tools: Any = None) -> str:
    """The text of what the window sends besides the conversation."""
    parts = [text_of(m) for m in messages if m is not None]
    if tools:
        parts.append(json.dumps(tools, ensure_ascii=False))
    return "\n".join(parts)
