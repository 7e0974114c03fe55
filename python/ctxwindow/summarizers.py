"""Summarizers: plain callables ``(system: str, user: str) -> str`` (or async ones).

:func:`extractive` is the offline, deterministic default: it keeps the user's goal and the lines
that carry decisions, constraints, rules, preferences, errors, numbers, file paths and
identifiers, compressing long data lines (tool output) to their key facts, within the token
target the prompt asks for. It needs no model and no API key.

:func:`openai_summarizer` and :func:`anthropic_summarizer` adapt the providers' SDKs (optional
extras ``ctxwindow[openai]`` and ``ctxwindow[anthropic]``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from ctxwindow._native import Tokenizer
from ctxwindow.errors import CtxWindowError, MissingDependencyError

__all__ = ["extractive", "openai_summarizer", "anthropic_summarizer", "SUMMARY_HEADER", "TRANSCRIPT_OPEN",
           "TRANSCRIPT_CLOSE", "TARGET_PREFIX"]

SUMMARY_HEADER = "[Conversation Summary]"
TRANSCRIPT_OPEN = "<transcript>"
TRANSCRIPT_CLOSE = "</transcript>"
TARGET_PREFIX = "TARGET_TOKENS:"

@functools.cache
def _counter() -> Tokenizer:
    return Tokenizer("o200k_base")

_RULE = re.compile(
    r"\b(never|must|always|do not|don't|should not|shouldn't|cannot|can't|required?|only|"
    r"decided|decision|agreed|chose|switch(?:ed)? to|instead|rule|constraint|policy|prefer(?:s|ence)?|"
    r"goal|deadline|budget|cap|limit|next step|todo|remaining|done|blocked|safety|fact|"
    r"current task|must stay|under no circumstances|compliance|requirement|forbidden|prohibited|"
    r"not allowed|no exceptions|final|go with|going with|revise|change of plan|approved|rejected|"
    r"critical|important|remember)\b", re.IGNORECASE)
_ERROR = re.compile(r"\b(error|exception|traceback|failed|failure|fatal|denied|invalid)\b", re.IGNORECASE)
_FACT = re.compile(r"\d|/|_|[a-z][A-Z]|\b[A-Z0-9]{4,}\b")
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


_ID = re.compile(r"\b(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[\w.-]{4,}\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_PATH_FACT = re.compile(r"(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+")


def _compress(line: str, seen: set[str]) -> str:
    """A long data line (tool output, call arguments) reduced to the values that carry data:
    identifiers mixing letters and digits, dates and paths, each once per summary."""
    facts = [m.group(0) for pattern in (_ID, _DATE, _PATH_FACT) for m in pattern.finditer(line)]
    fresh = [f for f in dict.fromkeys(facts) if f not in seen]
    seen.update(fresh)
    prefix = line.split(":", 1)[0] if ":" in line[:60] else ""
    body = ", ".join(fresh)
    if not body:
        return ""
    return f"{prefix}: {body}" if prefix else body


def extractive(system: str, user: str) -> str:
    """The offline deterministic summary of the transcript in ``user`` (see the module doc).

    >>> print(extractive("", "<transcript>\\nuser: Book flight HAT170 for me.\\nassistant: Sure!\\n</transcript>"))
    [Conversation Summary]
    - user: Book flight HAT170 for me.
    """
    del system  # the rules are built in
    text, target = _transcript(user)
    lines = [line.strip().removeprefix("- ").strip() for line in text.splitlines()]
    lines = [line for line in lines
             if line and line != SUMMARY_HEADER and not line.startswith("(originals: retrieval id")]
    scored: list[tuple[int, int, str]] = []
    first_user = next((i for i, line in enumerate(lines) if line.lower().startswith("user:")), None)
    seen: set[str] = set()
    facts_seen: set[str] = set()
    for index, line in enumerate(lines):
        if _RULE.search(line) or _ERROR.search(line):
            rank = 3
        elif _FACT.search(line):
            rank = 2
        elif index == first_user:
            rank = 3
        else:
            continue
        if len(line) > _LONG_LINE and rank == 2:
            line = _compress(line, facts_seen)
        elif len(line) > _LONG_LINE:
            line = line[:_LONG_LINE] + " ..."
        if line and line not in seen:
            seen.add(line)
            scored.append((rank, index, line))
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
