"""What a run of model calls costs once the provider's prompt cache is counted.

Providers serve the leading part of a prompt that equals the leading part of an earlier prompt
from a cache, and bill it at a fraction of the input price; Anthropic also bills the tokens it
writes to the cache above the input price. So the cost of a run depends less on how many tokens
each prompt holds than on how long the prefix shared with the previous call stays.

- :func:`shared_prefix` measures that prefix for two consecutive prompts as a prefix cache sees
  it: the identical leading messages (after the tool definitions, which providers put first),
  then the identical leading tokens of the first message that differs.
- :class:`CacheRules` turns the shared prefix into cached tokens in the provider's granularity:
  OpenAI caches prompts of 1,024 tokens and more, in steps of 128 tokens, wherever they
  diverge; Anthropic caches at block boundaries (here: whole messages, assuming a cache
  breakpoint at the end of every prompt, the usual agent-loop setup) and writes what it has not
  cached.
- The prices per model (:data:`PRICES`, :class:`Prices`, :func:`price_for`) are a column of the
  model table, :mod:`ctxwindow.models`, and re-exported here.
- :func:`call_cost` prices one call; :class:`CallCost` keeps the split; :class:`RunCost` prices
  the calls of a run as they come.

>>> from ctxwindow import Tokenizer
>>> tokenizer = Tokenizer("o200k_base")
>>> earlier = [{"role": "system", "content": "You help."}, {"role": "user", "content": "hello there"}]
>>> later = earlier + [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "bye"}]
>>> shared_prefix(earlier, later, tokenizer).messages
2
>>> OPENAI.cached_tokens(shared_prefix(earlier, later, tokenizer), 2_000)
0
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwindow._canonical import as_items, as_mapping
from ctxwindow._checks import check_int, type_name
from ctxwindow._types import TokenCounter
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.models import PRICES, PRICES_DATE, Prices, price_for

__all__ = ["PRICES", "PRICES_DATE", "Prices", "price_for", "PrefixMatch", "shared_prefix", "CacheRules",
           "OPENAI", "ANTHROPIC", "rules_for", "CallCost", "call_cost", "RunCost"]

@dataclass(frozen=True)
class PrefixMatch:
    """The prefix two consecutive prompts share: ``messages`` identical leading messages (after
    the tool definitions), ``tokens`` in all (tool definitions, those messages, and the
    identical leading tokens of the first message that differs), of which
    ``whole_message_tokens`` end at a message boundary; ``previous_tokens`` is the earlier
    prompt's length (nothing longer can be cached)."""

    messages: int
    tokens: int
    whole_message_tokens: int
    previous_tokens: int


def _message_tokens(message: Mapping[str, Any], encode: Callable[[str], list[int]]) -> list[int]:
    """The tokens of a message as this measure compares them: role, text, then tool calls."""
    content = message.get("content")
    extra = {k: message[k] for k in ("name", "tool_call_id", "tool_calls") if message.get(k) is not None}
    try:
        text = content if isinstance(content, str) else json.dumps(content, sort_keys=True, ensure_ascii=False)
        tail = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else ""
    except (TypeError, ValueError) as error:
        raise InvalidTypeError(f"a message of the prompt holds a value that is not JSON: {error}") from None
    return encode(str(message.get("role", ""))) + encode(text or "") + encode(tail)


def _prompt(value: object, name: str) -> Sequence[Mapping[str, Any]]:
    """A prompt (a list of messages) as a sequence, else the typed error naming it."""
    return value if isinstance(value, (list, tuple)) else as_items(value, name)


def shared_prefix(previous: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]], counter: TokenCounter, *,
                  tool_tokens: int = 0, previous_tool_tokens: int | None = None,
                  count: Callable[[Mapping[str, Any]], int] | None = None) -> PrefixMatch:
    """The prefix ``current`` shares with ``previous`` (see :class:`PrefixMatch`).

    Message tokens follow the window's chat accounting (``counter.count_message``, or ``count``
    when given, e.g. a cache of counts); the first differing message contributes its 3 framing
    tokens and the identical leading tokens of its role, text and tool calls when the roles are
    equal (and the counter has ``encode``). ``tool_tokens`` are the tool definitions of ``current`` (sent first); when they differ
    from ``previous_tool_tokens`` nothing is shared."""
    previous, current = _prompt(previous, "previous"), _prompt(current, "current")
    check_int(tool_tokens, "tool_tokens", 0)
    if previous_tool_tokens is not None:
        check_int(previous_tool_tokens, "previous_tool_tokens", 0)
    measure = count if count is not None else counter.count_message
    previous_tools = tool_tokens if previous_tool_tokens is None else previous_tool_tokens
    previous_total = previous_tools + sum(measure(m) for m in previous)
    if previous_tools != tool_tokens:
        return PrefixMatch(0, 0, 0, previous_total)
    tokens = tool_tokens
    index = 0
    for index, (before, now) in enumerate(zip(previous, current)):
        if before is not now and before != now:
            break
        tokens += measure(now)
    else:
        index = min(len(previous), len(current))
        return PrefixMatch(index, tokens, tokens, previous_total)
    whole = tokens
    before = as_mapping(previous[index], f"previous[{index}]")
    now = as_mapping(current[index], f"current[{index}]")
    encode = getattr(counter, "encode", None)  # a counter without token ids: whole messages only
    if before.get("role") == now.get("role") and encode is not None:
        a, b = _message_tokens(before, encode), _message_tokens(now, encode)
        common = 0
        for x, y in zip(a, b):
            if x != y:
                break
            common += 1
        tokens += 3 + common
    return PrefixMatch(index, min(tokens, previous_total), whole, previous_total)


@dataclass(frozen=True)
class CacheRules:
    """How a provider turns a shared prefix into cached tokens.

    ``minimum``: prompts (and prefixes) shorter than this are never cached. ``step``: cached
    prefixes grow in steps of this many tokens past the minimum (OpenAI: 128), or 0 when caching
    happens at message boundaries (``PrefixMatch.whole_message_tokens``, Anthropic).
    ``writes``: whether the uncached part of a cacheable prompt is written to the cache (billed
    at ``Prices.cache_write``)."""

    name: str
    minimum: int
    step: int
    writes: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InvalidTypeError(f"CacheRules.name must be a str, not {type_name(self.name)}")
        check_int(self.minimum, "CacheRules.minimum", 0)
        check_int(self.step, "CacheRules.step", 0)
        if not isinstance(self.writes, bool):
            raise InvalidTypeError(f"CacheRules.writes must be a bool, not {type_name(self.writes)}")

    def cached_tokens(self, match: PrefixMatch, prompt_tokens: int) -> int:
        """Cached input tokens of a call whose prompt (``prompt_tokens``) shares ``match``."""
        if self.step:
            shared = min(match.tokens, prompt_tokens, match.previous_tokens)
            if shared < self.minimum:
                return 0
            return self.minimum + (shared - self.minimum) // self.step * self.step
        shared = min(match.whole_message_tokens, prompt_tokens, match.previous_tokens)
        return shared if shared >= self.minimum else 0

    def written_tokens(self, cached: int, prompt_tokens: int) -> int:
        """Tokens written to the cache by a call (Anthropic: the uncached rest of a cacheable prompt)."""
        return prompt_tokens - cached if self.writes and prompt_tokens >= self.minimum else 0


OPENAI = CacheRules("openai", 1024, 128, writes=False)
ANTHROPIC = CacheRules("anthropic", 1024, 0, writes=True)


def rules_for(model: str) -> CacheRules:
    """:data:`ANTHROPIC` for ``claude`` models, :data:`OPENAI` otherwise."""
    if not isinstance(model, str):
        raise InvalidTypeError(f"model must be a str, not {type_name(model)}")
    return ANTHROPIC if model.startswith("claude") else OPENAI


@dataclass(frozen=True)
class CallCost:
    """One call: input tokens split into uncached, cached and written, output tokens, and USD."""

    prompt_tokens: int
    cached_tokens: int
    written_tokens: int
    output_tokens: int
    usd: float

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens - self.written_tokens


def call_cost(prompt_tokens: int, cached_tokens: int, output_tokens: int, prices: Prices,
              written_tokens: int = 0) -> CallCost:
    """The cost of one call; written tokens are billed at the cache-write price (the input price
    where there is none)."""
    for name, value in (("prompt_tokens", prompt_tokens), ("cached_tokens", cached_tokens),
                        ("output_tokens", output_tokens), ("written_tokens", written_tokens)):
        check_int(value, name, 0)
    if not isinstance(prices, Prices):
        raise InvalidTypeError(f"prices must be a Prices, not {type_name(prices)}")
    if not 0 <= cached_tokens + written_tokens <= prompt_tokens or min(cached_tokens, written_tokens) < 0:
        raise InvalidArgumentError(f"cached ({cached_tokens}) and written ({written_tokens}) tokens must be >= 0 "
                                   f"and together at most the prompt ({prompt_tokens})")
    write_price = prices.cache_write if prices.cache_write is not None else prices.input
    uncached = prompt_tokens - cached_tokens - written_tokens
    usd = (uncached * prices.input + cached_tokens * prices.cached_input + written_tokens * write_price
           + output_tokens * prices.output) / 1e6
    return CallCost(prompt_tokens, cached_tokens, written_tokens, output_tokens, usd)


class RunCost:
    """The calls of one run, priced as they come: feed each prompt with :meth:`call`."""

    def __init__(self, counter: TokenCounter, prices: Prices, rules: CacheRules) -> None:
        if not callable(getattr(counter, "count_message", None)):
            raise InvalidTypeError(f"counter must be a token counter with count_message(message), "
                                   f"not {type_name(counter)}")
        if not isinstance(prices, Prices):
            raise InvalidTypeError(f"prices must be a Prices, not {type_name(prices)}")
        if not isinstance(rules, CacheRules):
            raise InvalidTypeError(f"rules must be a CacheRules, not {type_name(rules)}")
        self.counter = counter
        self.prices = prices
        self.rules = rules
        self.calls: list[CallCost] = []
        self.prefixes: list[PrefixMatch] = []
        self._previous: list[Mapping[str, Any]] = []
        self._previous_tools = 0
        self._counts: dict[int, tuple[Mapping[str, Any], int]] = {}

    def _count(self, message: Mapping[str, Any]) -> int:
        known = self._counts.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        tokens = self.counter.count_message(message)
        self._counts[id(message)] = (message, tokens)
        return tokens

    def call(self, prompt: Sequence[Mapping[str, Any]], output_tokens: int, tool_tokens: int = 0) -> CallCost:
        """Prices a call sending ``prompt`` (plus ``tool_tokens`` of tool definitions and 3 of
        reply priming) that produced ``output_tokens``. Token counts must be ints >= 0 and the
        messages dicts, else a typed error, and the run is unchanged."""
        check_int(output_tokens, "output_tokens", 0)
        check_int(tool_tokens, "tool_tokens", 0)
        prompt = _prompt(prompt, "prompt")
        match = shared_prefix(self._previous, prompt, self.counter, tool_tokens=tool_tokens,
                              previous_tool_tokens=self._previous_tools, count=self._count)
        total = 3 + tool_tokens + sum(self._count(m) for m in prompt)
        cached = self.rules.cached_tokens(match, total)
        written = self.rules.written_tokens(cached, total)
        cost = call_cost(total, cached, output_tokens, self.prices, written)
        self.calls.append(cost)
        self.prefixes.append(match)
        kept = {id(m) for m in prompt}
        self._counts = {k: v for k, v in self._counts.items() if k in kept}  # bounded by one prompt
        self._previous, self._previous_tools = list(prompt), tool_tokens
        return cost

    @property
    def usd(self) -> float:
        return sum(c.usd for c in self.calls)

    @property
    def cached_share(self) -> float:
        """Cached input tokens over all input tokens of the run."""
        total = sum(c.prompt_tokens for c in self.calls)
        return sum(c.cached_tokens for c in self.calls) / total if total else 0.0

    def summary(self) -> dict[str, Any]:
        """Totals of the run (JSON-ready)."""
        return {
            "usd": self.usd,
            "input_tokens": sum(c.prompt_tokens for c in self.calls),
            "cached_tokens": sum(c.cached_tokens for c in self.calls),
            "written_tokens": sum(c.written_tokens for c in self.calls),
            "output_tokens": sum(c.output_tokens for c in self.calls),
            "cached_share": self.cached_share,
        }
