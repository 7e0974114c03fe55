"""Fidelity of compression: how much of what matters in the original is still there.

:func:`key_fact_retention` is deterministic and needs no model: it extracts the key facts of the
original (dates and times, numbers, file paths, identifiers, quoted strings and error lines) and reports the
fraction still present, verbatim, in the compressed text, with the missing ones listed.
:func:`judge_fidelity` is the LLM-as-judge protocol: questions answered on both contexts by a
model callable, and a judge callable that says whether each pair of answers agrees.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ctxwindow._checks import check_text

__all__ = ["KEY_FACT_KINDS", "FidelityReport", "extract_key_facts", "key_fact_retention", "fact_present", "json_values",
           "JudgeReport", "judge_fidelity"]

KEY_FACT_KINDS = ("date", "number", "path", "identifier", "quoted", "error")

# Starts only where a token starts and never backtracks into a run of name characters, so a long
# run without a slash costs O(length), not O(length^2).
_PATH = re.compile(r"(?<![\w.~/-])(?:~|\.{1,2})?/?(?:[\w.-]++/)+[\w.-]+")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:]\d+)*(?![\w])")
_IDENTIFIER = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # e-mail addresses
    r"|\b[A-Z][A-Z0-9]+-\d+\b"  # keys such as ABC-123
    r"|\bv\d+(?:\.\d+){1,3}\b"  # versions such as v2.3.1
    r"|\b(?:[A-Za-z]+_[A-Za-z0-9_]+|[a-z]+[A-Z][A-Za-z0-9]*|(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{4,}"
    r"|[A-Za-z]+\d+[A-Za-z0-9]*)\b")
_QUOTED = re.compile(r"\"([^\"\n]{2,200})\"|(?<!\w)'([^'\n]{2,200})'(?!\w)|`([^`\n]{2,200})`"
                     "|\u201c([^\u201d\n]{2,200})\u201d")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}(?::\d{2})?\b")
_ERROR = re.compile(r"\b(?:error|exception|traceback|failed|failure|fatal)\b|(?-i:[a-z](?:Error|Exception)\b)",
                    re.IGNORECASE)


def extract_key_facts(text: str) -> dict[str, list[str]]:
    """The key facts of ``text`` by kind, each listed once, in order of appearance."""
    facts: dict[str, list[str]] = {kind: [] for kind in KEY_FACT_KINDS}
    seen: set[tuple[str, str]] = set()

    def add(kind: str, value: str) -> None:
        value = value.strip()
        if value and (kind, value) not in seen:
            seen.add((kind, value))
            facts[kind].append(value)

    dates = [match.span() for match in _DATE.finditer(text)]
    starts = [start for start, _ in dates]
    for match in _PATH.finditer(text):
        if "/" in match.group(0) and not match.group(0).startswith("http"):
            add("path", match.group(0))
    for start, end in dates:
        add("date", text[start:end])
    for match in _NUMBER.finditer(text):
        index = bisect.bisect_right(starts, match.start()) - 1
        if index < 0 or match.start() >= dates[index][1]:  # not part of a date
            add("number", match.group(0))
    for match in _IDENTIFIER.finditer(text):
        index = bisect.bisect_right(starts, match.start()) - 1
        if index < 0 or match.start() >= dates[index][1]:  # not part of a date
            add("identifier", match.group(0))
    for match in _QUOTED.finditer(text):
        add("quoted", next(g for g in match.groups() if g is not None))
    for line in text.splitlines():
        if _ERROR.search(line):
            add("error", line)
    return facts


def json_values(text: str) -> str:
    """``text``; when it is JSON (a tool result, call arguments), its values only, one per line:
    keys name fields, they are not facts."""
    if not text.lstrip().startswith(("{", "[")):
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return text
    values: list[str] = []
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
        elif isinstance(value, str):
            values.append(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            values.append(str(value))
    return "\n".join(values)


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def fact_present(fact: str, text: str) -> bool:
    """Whether ``fact`` occurs in ``text`` as a whole token: "42" is not present in "1423",
    "4.2" or "v42", and "HAT17" is not present in "HAT170"; a fact that starts or ends with a
    non-word character ("./run.sh", a quoted sentence) only needs that end to match."""
    if not fact:
        return False
    head_word, tail_word = _word(fact[0]), _word(fact[-1])
    head_digit, tail_digit = fact[0].isdigit(), fact[-1].isdigit()
    start = text.find(fact)
    while start >= 0:
        end = start + len(fact)
        before = text[start - 1] if start else ""
        after = text[end] if end < len(text) else ""
        ok = not (head_word and before and _word(before)) and not (tail_word and after and _word(after))
        if ok and head_digit and before in (".", ",") and start >= 2 and text[start - 2].isdigit():
            ok = False  # "42" inside "4.42"
        if ok and tail_digit and after in (".", ",") and end + 1 < len(text) and text[end + 1].isdigit():
            ok = False  # "42" inside "42.5"
        if ok:
            return True
        start = text.find(fact, start + 1)
    return False


@dataclass(frozen=True)
class FidelityReport:
    """``score``: the fraction of the original's key facts still present (1.0 when it has
    none); ``missing``: the facts lost; ``by_kind``: (kept, total) per kind."""

    score: float
    kept: int
    total: int
    missing: list[str] = field(default_factory=list)
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)


def key_fact_retention(original: str, compressed: str) -> FidelityReport:
    """The key facts of ``original`` still present verbatim, as whole tokens, in ``compressed``.

    Both texts must be str and valid Unicode (:class:`~ctxwindow.errors.InvalidTextError` for a
    lone surrogate).

    >>> key_fact_retention("Reservation ABC123 costs 450 USD", "ABC123: 450").score
    1.0
    """
    check_text(original, "original")
    check_text(compressed, "compressed")
    facts = extract_key_facts(original)
    kept = total = 0
    missing: list[str] = []
    by_kind: dict[str, tuple[int, int]] = {}
    for kind, values in facts.items():
        present = [v for v in values if fact_present(v, compressed)]
        by_kind[kind] = (len(present), len(values))
        kept += len(present)
        total += len(values)
        missing.extend(v for v in values if v not in present)
    return FidelityReport(kept / total if total else 1.0, kept, total, missing, by_kind)


@dataclass(frozen=True)
class JudgeReport:
    """Per question: the answer on the original, on the compressed context, and the verdict."""

    score: float
    answers: list[tuple[str, str, str, bool]]


def judge_fidelity(
    original: str,
    compressed: str,
    questions: Sequence[str],
    answer: Callable[[str, str], str],
    judge: Callable[[str, str, str], bool],
) -> JudgeReport:
    """The LLM-as-judge protocol: ``answer(context, question)`` on both contexts, then
    ``judge(question, answer_on_original, answer_on_compressed)`` says whether they agree; the
    score is the fraction that agree (1.0 without questions)."""
    rows = []
    for question in questions:
        reference = answer(original, question)
        candidate = answer(compressed, question)
        rows.append((question, reference, candidate, bool(judge(question, reference, candidate))))
    agreed = sum(1 for *_, ok in rows if ok)
    return JudgeReport(agreed / len(rows) if rows else 1.0, rows)
