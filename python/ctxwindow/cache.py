"""The cache-aware compaction schedule and prompt layout (``ContextWindow(cache="auto")``).

A compaction rewrites the start of the conversation, so the provider's prompt cache serves
nothing after the system blocks on the next call: the whole remaining prompt is billed at the
full input price once (plus the cache-write surcharge on Anthropic). The schedule therefore:

1. **Batches.** Compactions go down to the low watermark (the window's ``target``) so that most
   calls in between are pure appends, served from the cache.
2. **Waits while waiting is cheaper.** Between the ``trigger`` and the budget, a compaction runs
   only when it pays for itself: the tokens it saves per call, over the expected remaining
   calls, priced at the cached-input price (what they would cost if kept), must reach what the
   invalidation costs (the kept prompt billed once at the full price instead of the cached one,
   plus the write surcharge); and it must free at least the size that minimises the cost per
   call of a long run (:meth:`CacheSchedule.best_gap`: with a deep cache discount, as
   Anthropic's or GPT-5's, that is usually more than the room between trigger and budget, so
   the window compacts at the budget; with GPT-4o's 50% it compacts at the trigger). The
   expected remaining calls are the calls made so far (the median estimate of a run's
   remaining length when nothing else is known, not fitted to any data), unless
   ``expected_calls`` says otherwise; the growth per call is the window's own (tokens added
   over calls).
3. **Takes free moments.** When the prompt ahead of the conversation has changed since the last
   call (a volatile block: notes, standing instructions, dynamic context, recall, status; or the
   system prompt or tools), the cache after it is lost anyway, so a compaction past the trigger
   costs nothing extra and runs now.
4. **Never touches the budget guarantee.** Above the budget the window compacts whatever the
   cost, exactly as with ``cache="off"``.

Layout: the blocks sent before the conversation are ordered from the most stable to the most
volatile (:data:`STABILITY`), so a change in one invalidates only what follows it; the
conversation comes after all of them (providers reject system messages inside the conversation),
and protected content is never reordered. Any block the window sends before the conversation
takes part by its kind name (``ContextWindow`` lays out its blocks once, at import); kinds not in
the table go last, in the order given. A change in any of them is seen by the schedule (point 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwindow.cost import Prices, price_for
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["CACHE_MODES", "STABILITY", "CacheSchedule", "layout", "DEFAULT_PRICES"]

#: The values of ``ContextWindow(cache=...)``.
CACHE_MODES = ("auto", "off")

#: Rank of each block kind sent before the conversation: lower = changes less often = earlier.
STABILITY: dict[str, int] = {
    "system": 0,          # set once per agent
    "instructions": 1,    # standing instructions: change when the user sets a rule
    "context": 2,         # dynamic context set by the application
    "notes": 3,           # written by the agent during the run
    "recall": 4,          # changes with every new user query
    "status": 5,          # may change every call
}

#: Prices assumed when the window's model has none: OpenAI's smallest cache discount (cached
#: input at half the input price, no write surcharge), which makes compaction look cheapest, so
#: an unknown model waits the least.
DEFAULT_PRICES = Prices(1.0, 0.5, 1.0)


def layout(blocks: Sequence[tuple[str, Any]]) -> list[Any]:
    """The blocks (``(kind, message)`` pairs, None messages skipped) in sending order: by
    :data:`STABILITY` rank, unknown kinds last, ties in the order given (a stable sort)."""
    ranked = [(STABILITY.get(kind, len(STABILITY)), index, message)
              for index, (kind, message) in enumerate(blocks) if message is not None]
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [message for _, _, message in ranked]


@dataclass
class CacheSchedule:
    """The state and rule of ``cache="auto"`` (see the module documentation).

    ``prices``: the model's prices (None: from :func:`ctxwindow.cost.price_for` of the window's
    model, else :data:`DEFAULT_PRICES`). ``expected_calls``: the expected remaining model calls
    (None: as many as made so far)."""

    prices: Prices | None = None
    expected_calls: int | None = None
    #: Model calls seen (assistant messages added).
    calls: int = 0
    #: Compactions the rule postponed since the window started.
    postponed: int = 0
    _sent_prefix: tuple[Any, ...] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.prices is not None and not isinstance(self.prices, Prices):
            raise InvalidTypeError("prices must be a ctxwindow.cost.Prices")
        if self.expected_calls is not None and (isinstance(self.expected_calls, bool)
                                                or not isinstance(self.expected_calls, int)
                                                or self.expected_calls < 0):
            raise InvalidArgumentError(f"expected_calls must be an int >= 0 or None, got {self.expected_calls!r}")

    @classmethod
    def for_model(cls, model: str | None) -> CacheSchedule:
        """A schedule with the prices of ``model`` (:data:`DEFAULT_PRICES` when unknown)."""
        try:
            prices = price_for(model) if model is not None else DEFAULT_PRICES
        except InvalidArgumentError:
            prices = DEFAULT_PRICES
        return cls(prices)

    def snapshot(self) -> tuple[int, int, tuple[Any, ...] | None]:
        return self.calls, self.postponed, self._sent_prefix

    def reset(self, state: tuple[int, int, tuple[Any, ...] | None]) -> None:
        self.calls, self.postponed, self._sent_prefix = state

    def observe_call(self, prefix: tuple[Any, ...]) -> None:
        """A model call was made with ``prefix`` before the conversation (a value that changes
        exactly when a block before the conversation changes)."""
        self.calls += 1
        self._sent_prefix = prefix

    def best_gap(self, after: int, growth: float, stable: int = 0) -> float:
        """The compaction size (tokens freed) that minimises the cost per call in a long run
        whose prompt grows by ``growth`` tokens per call and is cut back to ``after`` tokens:
        a cycle of ``gap / growth`` calls pays the cached price on the prompt's mean
        (``after + gap / 2``) on each call, and one invalidation of ``after`` tokens, so the
        cost per call ``c (after + gap / 2) + i after growth / gap`` is least at
        ``gap = sqrt(2 i after growth / c)`` (``c`` the cached-input price, ``i`` the extra
        price of an invalidated token: input minus cached plus the write surcharge)."""
        prices = self.prices or DEFAULT_PRICES
        write = prices.cache_write - prices.input if prices.cache_write is not None else 0.0
        invalidation = prices.input - prices.cached_input + write
        if prices.cached_input <= 0:
            return math.inf
        return math.sqrt(2.0 * invalidation * max(after - stable, 0) * max(growth, 0.0) / prices.cached_input)

    def compaction_pays(self, total: int, after: int, prefix: tuple[Any, ...], growth: float,
                        stable: int = 0) -> bool:
        """Whether compacting a prompt of ``total`` tokens down to ``after`` tokens pays for its
        cache invalidation now (the window asks only between its trigger and its budget; the
        prompt grows by ``growth`` tokens per call; ``stable`` of the kept tokens, the blocks before the conversation, stay cached).
        It does when the cache after the system
        blocks is already lost, or when the compaction frees at least :meth:`best_gap` and what
        it saves over the expected remaining calls (at the cached price) reaches what the
        invalidation costs."""
        if self._sent_prefix is not None and prefix != self._sent_prefix:
            return True  # the cache after the system blocks is already lost: compaction is free
        prices = self.prices or DEFAULT_PRICES
        gap = max(total - after, 0)
        remaining = self.expected_calls if self.expected_calls is not None else max(self.calls, 1)
        write = prices.cache_write - prices.input if prices.cache_write is not None else 0.0
        invalidation = max(after - stable, 0) * (prices.input - prices.cached_input + write)
        if gap >= self.best_gap(after, growth, stable) and gap * remaining * prices.cached_input >= invalidation:
            return True
        self.postponed += 1
        return False
