"""Summarizers: plain callables ``(system: str, user: str) -> str`` (or async ones).

:func:`extractive` is the offline, deterministic default. It ranks every sentence of the
transcript by general grammatical categories, never by phrases: (3) the user's standing
instructions (:mod:`ctxwindow.instructions`) and error reports; (2) sentences that carry a rule,
a decision or a preference: modality ("must", "should", "have to"), negation ("never", "not",
"without"), conditions ("when", "before", "unless"), wishes ("prefer", "want", "rather"),
changes of course ("decided", "instead", "switch", "cancel", "confirm"), progress ("done",
"next", "pending", "blocked"); (1) sentences that carry
data: numbers, dates, paths, identifiers, quoted strings, addresses, names (capitalized words
inside a sentence). Of sentences that repeat one shape (the same words with other numbers) only
the newest is kept. The user's first message (the goal) is always kept. Long tool output is reduced to its identifiers, dates and paths. Within
the token target the prompt asks for, higher ranks go first and, among equals, newer lines. It
needs no model and no API key.

:func:`openai_summarizer` and :func:`anthropic_summarizer` adapt the providers' SDKs (optional
extras ``ctxwindow[openai]`` and ``ctxwindow[anthropic]``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from ctxwindow._checks import check_text
from ctxwindow._native import Tokenizer
from ctxwindow.errors import CtxWindowError, MissingDependencyError
from ctxwindow.fidelity import extract_key_facts, json_values
from ctxwindow.instructions import is_instruction, split_sentences

__all__ = ["extractive", "openai_summarizer", "anthropic_summarizer", "SUMMARY_HEADER", "TRANSCRIPT_OPEN",
           "TRANSCRIPT_CLOSE", "TARGET_PREFIX"]

SUMMARY_HEADER = "[Conversation Summary]"
TRANSCRIPT_OPEN = "<transcript>"
TRANSCRIPT_CLOSE = "</transcript>"
TARGET_PREFIX = "TARGET_TOKENS:"

@functools.cache
def _counter() -> Tokenizer:
    return Tokenizer("o200k_base")

# The rules are grammatical categories, not phrases: a sentence is kept when it carries one of
# them. They were written from the categories themselves (see the module documentation) and are
# evaluated on held-out data (tests/test_fidelity.py).
#: Modality and obligation.
_MODAL = r"must|mustn't|should|shouldn't|shall|needs? to|ha(?:ve|s) to|ought to|required?|may not|cannot|can't"
#: Negation and prohibition.
_NEGATION = r"never|not|no|none|nothing|don't|doesn't|didn't|won't|isn't|aren't|without|avoid|stop"
#: Conditions and temporal clauses that scope a rule.
_CONDITION = r"when|whenever|before|after|unless|until|once|only if|as long as"
#: Wishes and preferences.
_PREFERENCE = r"prefer(?:s|red|ence)?|rather|want(?:s|ed)?|would like|'d like|like|love|hate|dislike"
#: Decisions and changes of course.
_DECISION = (r"decide[ds]?|decision|chose|choose|chosen|pick(?:ed)?|select(?:ed)?|switch(?:ed)?|instead|"
             r"agree[ds]?|confirm(?:ed|s)?|approve[ds]?|reject(?:ed|s)?|cancel(?:l?ed|s)?|replace[ds]?|"
             r"change[ds]?|update[ds]?|plan(?:s|ned)?|will")
#: Progress: what is done, current, next or still open.
_PROGRESS = (r"next|current(?:ly)?|remaining|pending|done|finished|complete[d]?|in progress|blocked|"
             r"waiting|started|status|open")
_RULE = re.compile(rf"\b(?:{_MODAL}|{_NEGATION}|{_CONDITION}|{_PREFERENCE}|{_DECISION}|{_PROGRESS})\b|n't\b",
                   re.IGNORECASE)
_ERROR = re.compile(r"\b(?:error|exception|traceback|failed|failure|fatal|denied|invalid|refused|timeout|"
                    r"timed out|crash(?:ed)?|panic|not found|unable)\b", re.IGNORECASE)
#: Data: digits, paths, identifiers in camel or snake case, all-caps codes, quoted strings, e-mail
#: addresses and URLs.
_FACT = re.compile(r"\d|/|\w_\w|[a-z][A-Z]|\b[A-Z0-9]{3,}\b|\"[^\"]{2,}\"|@\w|https?:|(?<=[a-z,] )[A-Z][a-z]+")
_DIGITS = re.compile(r"\d+")
_DECISION_WORDS = re.compile(rf"\b(?:{_DECISION})\b", re.IGNORECASE)
_LONG_LINE = 300


def _transcript(user: str) -> tuple[str, int | None]:
    target = None
    match = re.search(rf"{TARGET_PREFIX}\s*(\d+)", user)
    if match:
        target = int(match.group(1))
    start, end = user.find(TRANSCRIPT_OPEN), user.rfind(TRANSCRIPT_CLOSE)
    body = user[start + len(TRANSCRIPT_OPEN):end] if 0 <= start < end else user
    previous = ""
    if start >= 0:
        head = user[:start]
        if SUMMARY_HEADER in head:
            previous = head[head.index(SUMMARY_HEADER) + len(SUMMARY_HEADER):]
    return previous + "\n" + body, target


def _compress(line: str, seen: set[str]) -> str:
    """A long data line (tool output, call arguments) reduced to the values that carry data:
    identifiers, dates, paths, quoted strings and error lines (the key facts of
    :func:`ctxwindow.fidelity.extract_key_facts` but bare numbers; of JSON, its values), each
    once per summary."""
    start = line.find("(")
    if line.startswith("assistant called ") and start >= 0:  # name(arguments)
        prefix, data = line[:start], line[start + 1: line.rfind(")")]
    else:
        prefix, _, data = line.partition(": ") if ": " in line[:80] else ("", "", line)
    found = extract_key_facts(json_values(data))
    facts = [value for kind in ("identifier", "date", "path", "error") for value in found[kind]]
    fresh = [f for f in dict.fromkeys(facts) if f not in seen and len(f) <= _LONG_LINE]
    seen.update(fresh)
    body = ", ".join(fresh)
    if not body:
        return ""
    return f"{prefix}: {body}" if prefix else body


def _rank(sentence: str, from_user: bool) -> int:
    """What a sentence carries. The user's words weigh more than the assistant's restatements:
    for the user, 3 is a standing instruction or an error, 2 a rule, decision, preference or
    data, 0 anything else; for the assistant and tools, 3 an error, 2 a decision, 1 other rules or
    data (a question asks, it does not state: 0 unless it has data)."""
    if _ERROR.search(sentence):
        return 3
    if from_user:
        if is_instruction(sentence):
            return 3
        return 2 if _RULE.search(sentence) or _FACT.search(sentence) else 0
    if sentence.rstrip().endswith("?"):
        return 1 if _FACT.search(sentence) else 0
    if _DECISION_WORDS.search(sentence):
        return 2
    return 1 if _RULE.search(sentence) or _FACT.search(sentence) else 0


def extractive(system: str, user: str) -> str:
    """The offline deterministic summary of the transcript in ``user`` (see the module doc);
    ``system`` is accepted for the summarizer signature (the rules are built in). Both must be
    str and valid Unicode (:class:`~ctxwindow.errors.InvalidTextError` for a lone surrogate).

    >>> print(extractive("", "<transcript>\\nuser: Book flight HAT170 for me.\\nassistant: Sure!\\n</transcript>"))
    [Conversation Summary]
    - user: Book flight HAT170 for me.
    """
    check_text(system, "system")
    check_text(user, "user")
    text, target = _transcript(user)
    lines = [line.strip().removeprefix("- ").strip() for line in text.splitlines()]
    # A previous summary's kept facts and goal are carried by the fidelity gate, not re-ranked.
    lines = [line for line in lines
             if line and line != SUMMARY_HEADER and not line.startswith(("(originals: retrieval id", "Kept facts:",
                                                                          "Goal:"))]
    first_user = next((i for i, line in enumerate(lines) if line.lower().startswith("user:")), None)
    # Each line is one message ("role: text"); its sentences are ranked one by one and the line
    # keeps the ones that carry something. A long data line (tool output, call arguments) is
    # reduced to the values that carry data.
    scored: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    facts_seen: set[str] = set()
    shapes: set[str] = set()
    # Newest first, so that of lines repeating one shape (the same words, other numbers) only the
    # newest is kept: repetition is filler.
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        role, _, body = line.partition(": ") if ": " in line[:40] else ("", "", line)
        from_user = role.lower() == "user"
        if len(line) > _LONG_LINE and not from_user and role.lower() != "assistant":
            rank = 3 if _ERROR.search(line) else 1
            compressed = _compress(line, facts_seen)
            if compressed and compressed not in seen:
                seen.add(compressed)
                scored.append((rank, index, compressed))
            continue
        kept: list[str] = []
        best = 3 if index == first_user else 0
        for sentence in split_sentences(body) or [body]:
            rank = _rank(sentence, from_user)
            shape = _DIGITS.sub("#", sentence.lower())
            if shape in shapes and index != first_user:
                continue
            shapes.add(shape)
            if rank or index == first_user:
                kept.append(sentence if len(sentence) <= _LONG_LINE else sentence[:_LONG_LINE] + " ...")
                best = max(best, rank)
        if not kept:
            continue
        out = f"{role}: {' '.join(kept)}" if role else " ".join(kept)
        if out not in seen:
            seen.add(out)
            scored.append((best, index, out))
    scored.sort(key=lambda item: item[1])
    if target is not None:
        budget = target - _counter().count(SUMMARY_HEADER) - 2
        chosen: list[tuple[int, int, str]] = []
        used = 0
        # Most important first; among equals the most recent (it supersedes older lines).
        for rank, index, line in sorted(scored, key=lambda item: (-item[0], -item[1])):
            tokens = _counter().count("- " + line + "\n")
            if used + tokens <= budget:
                chosen.append((rank, index, line))
                used += tokens
        scored = sorted(chosen, key=lambda item: item[1])
    if not scored:
        return ""
    return SUMMARY_HEADER + "\n" + "\n".join(f"- {line}" for _, _, line in scored)


def _missing(package: str, extra: str) -> CtxWindowError:
    return MissingDependencyError(f"this summarizer needs the {package} package: pip install 'ctxwindow[{extra}]'")


def openai_summarizer(
    model: str = "gpt-4o-mini",
    *,
    client: Any = None,
    max_tokens: int = 1024,
    temperature: float = 0.0,
    asynchronous: bool = False,
    **client_options: Any,
) -> Callable[[str, str], Any]:
    """A summarizer that calls an OpenAI-compatible chat completions API through the ``openai``
    package (``pip install 'ctxwindow[openai]'``). Pass a ``client`` (``OpenAI`` or
    ``AsyncOpenAI``), or options to build one (``base_url``, ``api_key``, ``max_retries``...);
    ``asynchronous=True`` returns an async summarizer."""
    if client is None:
        try:
            import openai
        except ModuleNotFoundError:
            raise _missing("openai", "openai") from None
        client = (openai.AsyncOpenAI if asynchronous else openai.OpenAI)(**client_options)

    def request(system: str, user: str) -> dict[str, Any]:
        return {"model": model, "max_tokens": max_tokens, "temperature": temperature,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}

    if asynchronous:
        async def summarize_async(system: str, user: str) -> str:
            response = await client.chat.completions.create(**request(system, user))
            return str(response.choices[0].message.content or "")
        return summarize_async

    def summarize(system: str, user: str) -> str:
        response = client.chat.completions.create(**request(system, user))
        return str(response.choices[0].message.content or "")
    return summarize


def anthropic_summarizer(
    model: str = "claude-3-5-haiku-latest",
    *,
    client: Any = None,
    max_tokens: int = 1024,
    asynchronous: bool = False,
    **client_options: Any,
) -> Callable[[str, str], Any]:
    """A summarizer that calls Anthropic's Messages API through the ``anthropic`` package
    (``pip install 'ctxwindow[anthropic]'``); arguments as :func:`openai_summarizer`."""
    if client is None:
        try:
            import anthropic
        except ModuleNotFoundError:
            raise _missing("anthropic", "anthropic") from None
        client = (anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic)(**client_options)

    def request(system: str, user: str) -> dict[str, Any]:
        return {"model": model, "max_tokens": max_tokens, "system": system,
                "messages": [{"role": "user", "content": user}]}

    def text(response: Any) -> str:
        return "".join(block.text for block in response.content if getattr(block, "type", "") == "text")

    if asynchronous:
        async def summarize_async(system: str, user: str) -> str:
            return text(await client.messages.create(**request(system, user)))
        return summarize_async

    def summarize(system: str, user: str) -> str:
        return text(client.messages.create(**request(system, user)))
    return summarize
