"""The money side of a replay: each model call's prompt prefix shared with the previous call and
its cost, for the managed window, the unmanaged prompt (everything appended, never compacted)
and a "cache-naive" manager, all replayed from the same conversation.

Cache-naive means the usual trim-to-fit: before every call the oldest messages are dropped just
until the prompt fits the budget (a ``ContextWindow`` with ``trigger=target=1.0`` and
``cache="off"``, as LangChain's ``trim_messages`` or a token-limited memory do it), so once
the budget is reached every call rewrites the start of the conversation.

>>> from ctxwindow.cost import OPENAI, PRICES
>>> messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
>>> comparison = compare_costs(messages, "gpt-4o", 4_000, PRICES["gpt-4o"], OPENAI)
>>> sorted(comparison.runs)
['cache_naive', 'managed', 'unmanaged']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwindow._canonical import text_of
from ctxwindow._types import Message
from ctxwindow.cache import CacheSchedule
from ctxwindow.cost import CacheRules, PrefixMatch, Prices, RunCost, _message_tokens, call_cost, price_for, rules_for
from ctxwindow.errors import InvalidArgumentError
from ctxwindow.replay import ReplayReport, replay
from ctxwindow.window import ContextWindow

__all__ = ["CallNeeds", "CostComparison", "CostRecorder", "ReplayMessages", "call_floor", "compare_costs",
           "cost_lower_bound", "naive_window", "price_replay", "replay_cost", "suffix_lower_bound"]


@dataclass(frozen=True)
class CallNeeds:
    """What one model call of a replay needs, whatever manages the prompt (token counts in the
    accounting of :class:`~ctxwindow.cost.RunCost`): ``fixed`` tokens sent ahead of the
    conversation (3 of reply priming, the tool definitions, the system blocks), ``new`` tokens
    of the conversation messages added since the previous call (the previous call's reply and
    what followed it; for the first call, all of them), ``history`` tokens of the unmanaged
    prompt (fixed plus every conversation message so far), ``output`` tokens of the reply."""

    fixed: int
    new: int
    history: int
    output: int

    def __post_init__(self) -> None:
        for name in ("fixed", "new", "history", "output"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"CallNeeds.{name} must be an int >= 0, got {value!r}")
        if self.history < self.fixed + self.new:
            raise InvalidArgumentError(f"CallNeeds.history ({self.history}) must be at least fixed + new "
                                       f"({self.fixed + self.new})")


def call_floor(needs: CallNeeds, prices: Prices, rules: CacheRules, *, first: bool = False, least: int = 0) -> float:
    """The least one call can cost (USD) under the assumptions of :func:`cost_lower_bound`,
    when its prompt must hold at least ``least`` tokens besides.

    The prompt holds ``T >= L`` tokens, ``L = max(fixed + new, least)``; at most ``T - new``
    of them are cached (none on the first call). With nothing cached the cost is
    :func:`~ctxwindow.cost.call_cost` of ``T`` uncached tokens (written on Anthropic), least at
    ``T = L``. With something cached, the cache holds at least ``rules.minimum`` tokens, so
    ``T >= new + rules.minimum``, and since a cached token is the cheapest kind the cost is at
    least ``call_cost`` with ``T - new`` cached and ``new`` billed at the uncached (or write)
    price, least at the smallest such ``T``. The floor is the smaller of the two (the step
    granularity of OpenAI's cache is ignored: it only lowers what is cached)."""
    write = prices.cache_write if prices.cache_write is not None else prices.input
    if rules.writes and write < prices.input:
        raise InvalidArgumentError(f"the cache-write price ({write}) must be at least the input price "
                                   f"({prices.input}) for the floor to hold")
    if isinstance(least, bool) or not isinstance(least, int) or least < 0:
        raise InvalidArgumentError(f"least must be an int >= 0, got {least!r}")
    size = max(needs.fixed + needs.new, least)
    uncached = call_cost(size, 0, needs.output, prices, rules.written_tokens(0, size)).usd
    if first:
        return uncached
    size = max(size, needs.new + max(rules.minimum, 1))
    cached = size - needs.new
    return min(uncached, call_cost(size, cached, needs.output, prices, rules.written_tokens(cached, size)).usd)


def cost_lower_bound(calls: Sequence[CallNeeds], prices: Prices, rules: CacheRules, *, keep: float = 0.0,
                     budget: int | None = None) -> float:
    """A lower bound (USD) on what any manager of the prompt pays for the model calls ``calls``
    of one replay, priced with ``prices`` and ``rules`` by :func:`~ctxwindow.cost.call_cost`,
    the code that prices the managers' runs: the sum of :func:`call_floor` over the calls.

    It holds for every manager that sends, on every call:

    1. the tokens before the conversation (reply priming, tool definitions, system blocks), and
       every conversation message added since the previous call, verbatim, after every other
       conversation message it sends (the order is never changed);
    2. at least ``keep * min(history, budget)`` tokens in all, rounded down (``keep = 0``, the
       default: nothing beyond 1.; a positive ``keep`` bounds the managers that retain at least
       that share of the context the budget affords);

    and whose cached tokens are a prefix of its previous prompt (as
    :func:`~ctxwindow.cost.shared_prefix` and :class:`~ctxwindow.cost.CacheRules` measure it),
    so that, by 1., the messages new since the previous call are not among them: they did not
    exist at the previous call, and the previous prompt could only hold an identical copy at
    the same place if the conversation repeated a message word for word (or, with a token
    granularity, began the new message with the leading tokens of an older one in the same
    place). The reply is the same whatever the manager, so is its price. Also assumed: cached
    input is the cheapest price (checked by :class:`~ctxwindow.cost.Prices`) and a cache write
    costs at least the input price (checked here).

    Every call is bounded on its own, so the bound ignores that a cached prefix must fit in the
    previous prompt (beyond the first call), that a prompt must fit the budget and that the
    cache grows in steps; each can only raise the true least cost. It is a floor, not a plan:
    with ``keep = 0`` only a manager that forgets all but the newest messages on every call
    comes near it, and with ``keep > 0`` one that keeps a fixed head of the conversation and
    drops everything between it and the newest messages.

    >>> from ctxwindow.cost import OPENAI, PRICES
    >>> calls = [CallNeeds(fixed=1200, new=1000, history=2200, output=100),
    ...          CallNeeds(fixed=1200, new=200, history=2400, output=100)]
    >>> # call 1: 2,200 uncached at $2.50/M; call 2: 1,200 cached at $1.25/M, 200 new at $2.50/M;
    >>> # 100 output tokens at $10/M each
    >>> round(cost_lower_bound(calls, PRICES["gpt-4o"], OPENAI) * 1e6)  # millionths of a USD
    9500
    """
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0.0 <= keep <= 1.0:
        raise InvalidArgumentError(f"keep must be a number in [0, 1], got {keep!r}")
    if keep and (isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0):
        raise InvalidArgumentError(f"keep > 0 needs the budget (an int > 0), got {budget!r}")
    total = 0.0
    for index, needs in enumerate(calls):
        least = math.floor(keep * min(needs.history, budget)) if keep and budget else 0
        total += call_floor(needs, prices, rules, first=index == 0, least=least)
    return total


@dataclass(frozen=True)
class ReplayMessages:
    """The conversation messages of a replay as :func:`suffix_lower_bound` needs them:
    ``tokens`` of each (the chat accounting of :class:`~ctxwindow.cost.RunCost`), ``leading``:
    for each, the most tokens :func:`~ctxwindow.cost.shared_prefix` can count for it when it is
    the first message that differs from the previous prompt (3 plus its compared tokens; 0 for
    a counter without token ids), and ``before_call``: how many had been added before each
    model call."""

    tokens: tuple[int, ...]
    leading: tuple[int, ...]
    before_call: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.leading):
            raise InvalidArgumentError(f"ReplayMessages: {len(self.tokens)} token counts but "
                                       f"{len(self.leading)} leading counts")
        if any(b < a for a, b in zip(self.before_call, self.before_call[1:])) or any(
                not 0 <= n <= len(self.tokens) for n in self.before_call):
            raise InvalidArgumentError("ReplayMessages.before_call must be non-decreasing, each at most the "
                                       f"{len(self.tokens)} messages")
        if min(self.tokens, default=0) < 0 or min(self.leading, default=0) < 0:
            raise InvalidArgumentError("ReplayMessages token counts must be >= 0")


def suffix_lower_bound(needs: Sequence[CallNeeds], messages: ReplayMessages, prices: Prices, rules: CacheRules, *,
                       budget: int, keep: float = 0.0, notice: int = 0) -> float:
    """A lower bound (USD) on what a manager that sends a suffix of the conversation pays:
    on every call the fixed blocks, then the conversation from some message on, without gaps
    (the way trim-to-fit, the watermark and the cache-aware schedule drop the oldest messages,
    as long as nothing older is protected), holding the messages new since the previous call,
    within ``budget`` tokens and at least ``keep * min(history, budget)`` of them (rounded
    down). Returns ``math.inf`` when no such prompt exists on some call.

    Exact dynamic programming over where each prompt starts, priced by
    :func:`~ctxwindow.cost.call_cost` and :class:`~ctxwindow.cost.CacheRules`: a prompt that
    starts where the previous one started extends it, and its cached prefix is the previous
    prompt, as :func:`~ctxwindow.cost.shared_prefix` measures it; a prompt that starts
    elsewhere differs from the previous one at its first conversation message (messages
    assumed distinct, as in :func:`cost_lower_bound`), so at most the fixed blocks and, with a
    token granularity, that message's ``leading`` tokens are cached (an overestimate, so the
    bound stays below). Messages are priced as :func:`cost_lower_bound` assumes otherwise.

    ``notice``: a manager may also send up to that many tokens between the fixed blocks and
    the suffix (ctxwindow's placeholder for omitted messages, standing instructions it keeps
    from dropped messages). The bound then
    prices every prompt without the notice but caches it as if it were there, and admits a
    start when the prompt fits the budget without it and meets ``keep`` with it: each choice
    can only lower the bound, so it holds with or without a notice.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise InvalidArgumentError(f"budget must be an int > 0, got {budget!r}")
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0.0 <= keep <= 1.0:
        raise InvalidArgumentError(f"keep must be a number in [0, 1], got {keep!r}")
    if isinstance(notice, bool) or not isinstance(notice, int) or notice < 0:
        raise InvalidArgumentError(f"notice must be an int >= 0, got {notice!r}")
    if len(needs) != len(messages.before_call):
        raise InvalidArgumentError(f"{len(needs)} calls but {len(messages.before_call)} message counts")
    prefix = [0]
    for tokens in messages.tokens:
        prefix.append(prefix[-1] + tokens)
    costs: dict[int, float] = {}  # where the previous prompt started -> least cost so far
    previous_count, previous_fixed = 0, -1
    for index, (call, count) in enumerate(zip(needs, messages.before_call)):
        least = math.floor(keep * min(call.history, budget))
        fixed, output = call.fixed, call.output
        cheapest_before = min(costs.values(), default=math.inf)
        current: dict[int, float] = {}
        for start in range(previous_count + 1 if index else 1):
            size = fixed + prefix[count] - prefix[start]
            if size > budget or size + notice < least:
                continue
            if index == 0:
                current[start] = call_cost(size, 0, output, prices, rules.written_tokens(0, size)).usd
                continue
            extra = messages.leading[start] if rules.step and start < count else 0
            whole = fixed - 3 + notice
            cached = min(rules.cached_tokens(PrefixMatch(0, whole + extra, whole, size + notice), size + notice),
                         size)
            best = cheapest_before + call_cost(size, cached, output, prices, rules.written_tokens(cached, size)).usd
            if start in costs and fixed == previous_fixed:  # an append: the previous prompt is cached
                shared = previous_fixed + prefix[previous_count] - prefix[start] - 3 + notice
                cached = min(rules.cached_tokens(PrefixMatch(0, shared, shared, shared), size + notice), size)
                best = min(best, costs[start] + call_cost(size, cached, output, prices,
                                                          rules.written_tokens(cached, size)).usd)
            current[start] = best
        if not current:
            return math.inf
        costs, previous_count, previous_fixed = current, count, fixed
    return min(costs.values(), default=0.0)


class CostRecorder:
    """Prices the calls of one replay for the managed window and for the unmanaged prompt; hand
    :meth:`on_call` to :func:`ctxwindow.replay.replay`."""

    def __init__(self, window: ContextWindow, prices: Prices, rules: CacheRules, *, unmanaged: bool = True) -> None:
        self.window = window
        self.managed = RunCost(window.tokenizer, prices, rules)
        self.unmanaged: RunCost | None = RunCost(window.tokenizer, prices, rules) if unmanaged else None
        self._history: list[Message] = [dict(m) for m in window.messages()]  # the system blocks
        self._appended = 0
        #: What each call needs whatever the manager (for :func:`cost_lower_bound`).
        self.needs: list[CallNeeds] = []
        self._system_tokens = sum(window.tokenizer.count_message(m) for m in self._history)
        self._conversation_tokens = 0
        self._counted = 0
        self._message_tokens: list[int] = []
        self._replayed: list[Message] = []
        self._before_call: list[int] = []
        #: Whether every managed prompt sent the fixed blocks then a suffix of the conversation
        #: (the shape :func:`suffix_lower_bound` bounds).
        self.suffix_shaped = True
        #: The most tokens sent between the first call's fixed blocks and the suffix (see
        #: :meth:`_check_shape`).
        self.notice_tokens = 0

    def _check_shape(self, conversation: list[Message], replayed: list[Message], extra: int) -> None:
        """Whether the conversation sent is a suffix of the replay, after at most one notice
        that is no replayed message (the window's placeholder for omitted messages); the
        notice's tokens plus ``extra`` (system blocks beyond the first call's, such as standing
        instructions kept from dropped messages) count as the run's notice."""
        self.notice_tokens = max(self.notice_tokens, extra)
        kept = 0
        while (kept < min(len(conversation), len(replayed))
               and (conversation[-1 - kept] is replayed[-1 - kept] or conversation[-1 - kept] == replayed[-1 - kept])):
            kept += 1
        head = conversation[:len(conversation) - kept]
        if not head:
            return
        if len(head) > 1 or head[0] in replayed[:len(replayed) - kept]:
            self.suffix_shaped = False
            return
        self.notice_tokens = max(self.notice_tokens, extra + self.window.tokenizer.count_message(head[0]))

    @property
    def messages(self) -> ReplayMessages:
        """The conversation messages seen so far (for :func:`suffix_lower_bound`; the leading
        tokens are encoded here, not on every call)."""
        encode = getattr(self.window.tokenizer, "encode", None)
        seen = self._replayed[:len(self._message_tokens)]
        leading = tuple(3 + len(_message_tokens(m, encode)) if encode is not None else 0 for m in seen)
        return ReplayMessages(tuple(self._message_tokens), leading, tuple(self._before_call))

    def on_call(self, sent: list[Message], output: Message, replayed: list[Message]) -> None:
        """One model call: ``sent`` is the managed prompt, ``output`` the reply, ``replayed``
        every conversation message added before it."""
        window = self.window
        output_tokens = window.tokenizer.count_message(output)
        tools = window.usage.by_component["tool_definitions"]
        self.managed.call(sent, output_tokens, tools)
        added = [window.tokenizer.count_message(m) for m in replayed[self._counted:]]
        self._message_tokens += added
        self._replayed = replayed
        new = sum(added)
        self._counted = len(replayed)
        self._before_call.append(len(replayed))
        system = sum(window.tokenizer.count_message(m) for m in sent if m.get("role") == "system")
        self._check_shape([m for m in sent if m.get("role") != "system"], replayed,
                          max(system - self._system_tokens, 0))
        self._conversation_tokens += new
        fixed = 3 + tools + self._system_tokens
        self.needs.append(CallNeeds(fixed, new, fixed + self._conversation_tokens, output_tokens))
        if self.unmanaged is not None:
            self._history.extend(replayed[self._appended:])
            self._appended = len(replayed)
            self.unmanaged.call(self._history, output_tokens, tools)


def price_replay(model: str) -> tuple[Prices, CacheRules] | None:
    """The prices and cache rules of ``model``, or None when its price is unknown."""
    try:
        return price_for(model), rules_for(model)
    except InvalidArgumentError:
        return None


def replay_cost(messages: list[Message], window: ContextWindow, prices: Prices, rules: CacheRules) -> RunCost:
    """Replays ``messages`` through ``window`` (a fresh one) and prices its calls."""
    recorder, _, _ = _replay_priced(messages, window, prices, rules, unmanaged=False)
    return recorder.managed


def naive_window(model: str | None, max_tokens: int, reserve_output: int = 0, **settings: Any) -> ContextWindow:
    """The cache-naive manager: trim to fit before every call (see the module documentation)."""
    settings = {**settings, "trigger": 1.0, "target": 1.0, "cache": "off"}
    return ContextWindow(model, max_tokens=max_tokens, reserve_output=reserve_output, **settings)


@dataclass
class CostComparison:
    """The runs of one conversation: ``managed``, ``unmanaged``, ``cache_naive`` (and any other
    managed variant asked for), each a :class:`~ctxwindow.cost.RunCost`; ``budget_ok`` says
    whether every managed prompt fitted its budget, ``compactions`` counts per managed run."""

    runs: dict[str, RunCost] = field(default_factory=dict)
    budget_ok: dict[str, bool] = field(default_factory=dict)
    compactions: dict[str, int] = field(default_factory=dict)
    #: Runs stopped by a :class:`~ctxwindow.ContextOverflowError` (protected content alone over
    #: the budget), with its message.
    overflows: dict[str, str] = field(default_factory=dict)
    #: What each model call needs whatever the manager (from the managed run's replay; see
    #: :func:`cost_lower_bound`).
    needs: list[CallNeeds] = field(default_factory=list)
    #: The conversation messages (for :func:`suffix_lower_bound`).
    messages: ReplayMessages = field(default_factory=lambda: ReplayMessages((), (), ()))
    #: Per run: whether every prompt was the fixed blocks, at most one notice that is no
    #: replayed message (the window's placeholder for omitted messages), then a suffix of the
    #: conversation; and the most tokens sent between the first call's fixed blocks and the
    #: suffix (the notice and any system block added since, such as standing instructions).
    suffix_shaped: dict[str, bool] = field(default_factory=dict)
    notice_tokens: dict[str, int] = field(default_factory=dict)

    def suffix_lower_bound(self, prices: Prices, rules: CacheRules, *, budget: int, keep: float = 0.0) -> float:
        """:func:`suffix_lower_bound` of these calls (USD), allowing the longest notice any run sent."""
        return suffix_lower_bound(self.needs, self.messages, prices, rules, budget=budget, keep=keep,
                                  notice=max(self.notice_tokens.values(), default=0))

    def lower_bound(self, prices: Prices, rules: CacheRules, *, keep: float = 0.0,
                    budget: int | None = None) -> float:
        """:func:`cost_lower_bound` of these calls (USD)."""
        return cost_lower_bound(self.needs, prices, rules, keep=keep, budget=budget)

    def retention(self, run: str, budget: int) -> float:
        """The least share of the context the budget affords (``min(history, budget)``) that
        ``run`` sent on any call: the ``keep`` for which :func:`cost_lower_bound` bounds it."""
        calls = self.runs[run].calls
        return min((call.prompt_tokens / min(needs.history, budget) for call, needs in zip(calls, self.needs)),
                   default=1.0)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: run.summary() for name, run in self.runs.items()}
        for name, ok in self.budget_ok.items():
            out[name]["budget_ok"] = ok
            out[name]["compactions"] = self.compactions[name]
        return out


def _replay_priced(messages: list[Message], window: ContextWindow, prices: Prices, rules: CacheRules,
                   unmanaged: bool) -> tuple[CostRecorder, bool, str]:
    recorder = CostRecorder(window, prices, rules, unmanaged=unmanaged)
    fits = True

    def on_call(sent: list[Message], output: Message, replayed: list[Message]) -> None:
        nonlocal fits
        usage = window.usage
        fits &= usage.total <= usage.budget
        recorder.on_call(sent, output, replayed)

    report = ReplayReport("", "", window.model or "", window.max_tokens, window.reserve_output)
    replay(messages, window, report, on_call=on_call)
    return recorder, fits, report.overflow_message if report.overflows else ""


def compare_costs(messages: list[Message], model: str | None, max_tokens: int, prices: Prices,
                  rules: CacheRules, *, reserve_output: int = 0, variants: dict[str, dict[str, Any]] | None = None,
                  **settings: Any) -> CostComparison:
    """Replays ``messages`` (a leading system message becomes the system prompt) through the
    managed window (``cache="auto"`` with ``prices`` unless ``settings`` say otherwise), the cache-naive one
    (:func:`naive_window`) and any ``variants`` (name to extra settings), pricing every call."""
    system = next((text_of(m) for m in messages if m["role"] == "system"), None)
    runs: dict[str, Callable[[], ContextWindow]] = {
        "managed": lambda: ContextWindow(model, max_tokens=max_tokens, reserve_output=reserve_output,
                                         system=system, **{"cache": CacheSchedule(prices), **settings}),
        "cache_naive": lambda: naive_window(model, max_tokens, reserve_output, system=system, **settings),
    }
    def variant(extra: dict[str, Any]) -> Callable[[], ContextWindow]:
        return lambda: ContextWindow(model, max_tokens=max_tokens, reserve_output=reserve_output, system=system,
                                     **{**settings, **extra})

    for name, extra in (variants or {}).items():
        runs[name] = variant(extra)
    comparison = CostComparison()
    for name, make in runs.items():
        window = make()
        recorder, fits, overflow = _replay_priced(messages, window, prices, rules, unmanaged=name == "managed")
        comparison.runs[name] = recorder.managed
        comparison.budget_ok[name] = fits
        if overflow:
            comparison.overflows[name] = overflow
        comparison.compactions[name] = window.compactions
        comparison.suffix_shaped[name] = recorder.suffix_shaped
        comparison.notice_tokens[name] = recorder.notice_tokens
        if recorder.unmanaged is not None:
            comparison.runs["unmanaged"] = recorder.unmanaged
            comparison.needs = recorder.needs
            comparison.messages = recorder.messages
    return comparison
