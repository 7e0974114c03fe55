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
- :data:`PRICES` is a dated table of prices per model (USD per million tokens: input, cached
  input, cache write, output), copied from the ``genai-prices`` package's data (a maintained
  source) on :data:`PRICES_DATE`; ``tests/test_cost.py`` checks every row against that package,
  so a change there fails the tests until the table follows. The runtime needs numpy only, so
  the table lives here; with ``genai-prices`` installed, :func:`price_for` also finds models
  the table lacks. Prices are the base tier (prompts under 200k tokens).
- :func:`call_cost` prices one call; :class:`CallCost` keeps the split.

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
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxwindow.context_windows import model_names
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["PRICES", "PRICES_DATE", "Prices", "price_for", "PrefixMatch", "shared_prefix", "CacheRules",
           "OPENAI", "ANTHROPIC", "rules_for", "CallCost", "call_cost", "RunCost"]

Message = Mapping[str, Any]


class _Encoder(Protocol):
    def count(self, text: str) -> int: ...

    def count_message(self, message: Mapping[str, Any]) -> int: ...


@dataclass(frozen=True)
class Prices:
    """USD per million tokens. ``cache_write`` is None where the provider bills cache writes as
    plain input (OpenAI)."""

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "cached_input", "output", "cache_write"):
            value = getattr(self, name)
            if value is None and name == "cache_write":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidTypeError(f"price {name} must be a number, not {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise InvalidArgumentError(f"price {name} must be a finite number >= 0, got {value}")
        if self.cached_input > self.input:
            raise InvalidArgumentError(
                f"cached_input ({self.cached_input}) must not exceed input ({self.input})")

    @property
    def cached_ratio(self) -> float:
        """The cached-input price as a share of the input price."""
        return self.cached_input / self.input if self.input else 1.0


#: When :data:`PRICES` was copied from genai-prices (its snapshot in version 0.2.3).
PRICES_DATE = "2026-11-23"

#: USD per million tokens, base tier, per model (see the module documentation).
PRICES: dict[str, Prices] = {
    "gpt-4o": Prices(2.5, 1.25, 10.0),
    "gpt-4o-mini": Prices(0.15, 0.075, 0.6),
    "gpt-4.1": Prices(2.0, 0.5, 8.0),
    "gpt-4.1-mini": Prices(0.4, 0.1, 1.6),
    "gpt-4.1-nano": Prices(0.1, 0.025, 0.4),
    "gpt-5": Prices(1.25, 0.125, 10.0),
    "gpt-5-mini": Prices(0.25, 0.025, 2.0),
    "gpt-5-nano": Prices(0.05, 0.005, 0.4),
    "gpt-5.1": Prices(1.25, 0.125, 10.0),
    "o4-mini": Prices(1.1, 0.275, 4.4),
    "claude-sonnet-4-5": Prices(3.0, 0.3, 15.0, 3.75),
    "claude-sonnet-4": Prices(3.0, 0.3, 15.0, 3.75),
    "claude-haiku-4-5": Prices(1.0, 0.1, 5.0, 1.25),
    "claude-opus-4-5": Prices(5.0, 0.5, 25.0, 6.25),
    "claude-opus-4-1": Prices(15.0, 1.5, 75.0, 18.75),
}


def price_for(model: str) -> Prices:
    """The prices of ``model``: from :data:`PRICES` (a dated or suffixed name falls back to the
    longest known name it starts with; a provider's prefix such as ``anthropic:`` is skipped), else from ``genai-prices`` when installed, else
    :class:`~ctxwindow.errors.InvalidArgumentError` listing the known models."""
    if not isinstance(model, str):
        raise InvalidTypeError(f"model must be a str, not {type(model).__name__}")
    for name in model_names(model):
        if name in PRICES:  # the name itself, then after a provider's prefix (anthropic:claude-...)
            return PRICES[name]
        family = max((known for known in PRICES if name.startswith(known + "-")), key=len, default=None)
        if family is not None:
            return PRICES[family]
    found = _genai_prices(model)
    if found is not None:
        return found
    raise InvalidArgumentError(f"no price known for model {model!r}; known: {', '.join(sorted(PRICES))} "
                               "(or install genai-prices for more)")


def _genai_prices(model: str) -> Prices | None:
    """The prices genai-prices knows for ``model`` (None when it is not installed or has none)."""
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:
        return None
    try:
        _, info = get_snapshot().find_provider_model(model, None, None, None)
        return _from_genai_prices(info.prices)
    except (LookupError, ValueError, TypeError, AttributeError):
        return None


def _base(value: Any) -> float | None:
    if value is None:
        return None
    return float(getattr(value, "base", value))


def _from_genai_prices(prices: Any) -> Prices | None:
    """A :class:`Prices` from a genai-prices ``ModelPrice`` (base tier), or None."""
    prices = getattr(prices, "prices", prices)  # conditional prices: a list of (constraint, prices)
    if isinstance(prices, list):
        prices = prices[-1].prices if prices else None
    input_price, output_price = _base(getattr(prices, "input_mtok", None)), _base(getattr(prices, "output_mtok", None))
    if input_price is None or output_price is None:
        return None
    cached = _base(getattr(prices, "cache_read_mtok", None))
    return Prices(input_price, input_price if cached is None else cached, output_price,
                  _base(getattr(prices, "cache_write_mtok", None)))


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


def _message_tokens(message: Message, encode: Callable[[str], list[int]]) -> list[int]:
    """The tokens of a message as this measure compares them: role, text, then tool calls."""
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True, ensure_ascii=False)
    extra = {k: message[k] for k in ("name", "tool_call_id", "tool_calls") if message.get(k) is not None}
    tail = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else ""
    return encode(str(message.get("role", ""))) + encode(text or "") + encode(tail)


def shared_prefix(previous: Sequence[Message], current: Sequence[Message], counter: _Encoder, *,
                  tool_tokens: int = 0, previous_tool_tokens: int | None = None,
                  count: Callable[[Message], int] | None = None) -> PrefixMatch:
    """The prefix ``current`` shares with ``previous`` (see :class:`PrefixMatch`).

    Message tokens follow the window's chat accounting (``counter.count_message``, or ``count``
    when given, e.g. a cache of counts); the first differing message contributes its 3 framing
    tokens and the identical leading tokens of its role, text and tool calls when the roles are
    equal (and the counter has ``encode``). ``tool_tokens`` are the tool definitions of ``current`` (sent first); when they differ
    from ``previous_tool_tokens`` nothing is shared."""
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
    before, now = previous[index], current[index]
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

    def __init__(self, counter: _Encoder, prices: Prices, rules: CacheRules) -> None:
        self.counter = counter
        self.prices = prices
        self.rules = rules
        self.calls: list[CallCost] = []
        self.prefixes: list[PrefixMatch] = []
        self._previous: list[Message] = []
        self._previous_tools = 0
        self._counts: dict[int, tuple[Message, int]] = {}

    def _count(self, message: Message) -> int:
        known = self._counts.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        tokens = self.counter.count_message(message)
        self._counts[id(message)] = (message, tokens)
        return tokens

    def call(self, prompt: Sequence[Message], output_tokens: int, tool_tokens: int = 0) -> CallCost:
        """Prices a call sending ``prompt`` (plus ``tool_tokens`` of tool definitions and 3 of
        reply priming) that produced ``output_tokens``."""
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
