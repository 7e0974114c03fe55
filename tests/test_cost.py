"""Prompt-cache cost: the prefix measure against hand-built sequences, the price table against
genai-prices, cost figures recomputed independently, the cache-aware schedule (never over the
budget, never reordering protected content), the replay's cost report, and sub-agent delegation
(sync, async, failing), and the floor under what any manager pays (``cost_lower_bound``)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwindow import ContextOverflowError, ContextWindow, InvalidArgumentError, InvalidTypeError, Tokenizer
from ctxwindow.cache import STABILITY, CacheSchedule, layout
from ctxwindow.cli import _bundled, load_conversation, main
from ctxwindow.cost import (
    ANTHROPIC,
    OPENAI,
    PRICES,
    CacheRules,
    PrefixMatch,
    Prices,
    RunCost,
    call_cost,
    price_for,
    shared_prefix,
)
from ctxwindow.costreport import (
    CallNeeds,
    ReplayMessages,
    call_floor,
    compare_costs,
    cost_lower_bound,
    suffix_lower_bound,
)
from ctxwindow.delegate import DelegationEnded, DelegationStarted
from ctxwindow.messages import check_history

TOKENIZER = Tokenizer("o200k_base")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


# --- the prefix measure ------------------------------------------------------------------------


def test_identical_prompts_share_everything() -> None:
    prompt = [{"role": "system", "content": "rules"}, user("hello"), assistant("hi")]
    match = shared_prefix(prompt, [dict(m) for m in prompt], TOKENIZER)
    total = sum(TOKENIZER.count_message(m) for m in prompt)
    assert match == PrefixMatch(3, total, total, total)


def test_an_append_shares_the_previous_prompt() -> None:
    earlier = [{"role": "system", "content": "rules"}, user("hello")]
    later = earlier + [assistant("hi"), user("more")]
    match = shared_prefix(earlier, later, TOKENIZER, tool_tokens=40)
    expected = 40 + sum(TOKENIZER.count_message(m) for m in earlier)
    assert (match.messages, match.tokens, match.whole_message_tokens, match.previous_tokens) == (
        2, expected, expected, expected)


def test_a_differing_message_shares_its_identical_leading_tokens() -> None:
    head = [{"role": "system", "content": "rules"}]
    before = head + [user("the quick brown fox jumps over the lazy dog"), assistant("ok")]
    after = head + [user("the quick brown fox sleeps"), assistant("ok")]
    match = shared_prefix(before, after, TOKENIZER)
    whole = TOKENIZER.count_message(head[0])
    common = 0
    for x, y in zip(TOKENIZER.encode("the quick brown fox jumps over the lazy dog"),
                    TOKENIZER.encode("the quick brown fox sleeps")):
        if x != y:
            break
        common += 1
    assert common == 4  # " the quick brown fox" then a different token
    assert match.messages == 1
    assert match.whole_message_tokens == whole
    assert match.tokens == whole + 3 + len(TOKENIZER.encode("user")) + common


def test_a_different_role_or_tool_set_shares_less() -> None:
    before = [user("a"), assistant("same text")]
    after = [user("a"), user("same text")]
    match = shared_prefix(before, after, TOKENIZER)
    assert match.tokens == match.whole_message_tokens == TOKENIZER.count_message(user("a"))
    assert shared_prefix(before, before, TOKENIZER, tool_tokens=10, previous_tool_tokens=12).tokens == 0
    assert shared_prefix([], before, TOKENIZER).tokens == 0


@pytest.mark.parametrize(("shared", "cached"), [(0, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152),
                                                (5000, 4992)])
def test_openai_caches_in_128_token_steps_from_1024(shared: int, cached: int) -> None:
    match = PrefixMatch(1, shared, 0, 10_000)
    assert OPENAI.cached_tokens(match, 10_000) == cached
    assert OPENAI.written_tokens(cached, 10_000) == 0


def test_anthropic_caches_whole_messages_and_writes_the_rest() -> None:
    match = PrefixMatch(3, 3000, 2500, 2900)
    assert ANTHROPIC.cached_tokens(match, 4000) == 2500
    assert ANTHROPIC.written_tokens(2500, 4000) == 1500
    assert ANTHROPIC.cached_tokens(PrefixMatch(1, 1200, 1000, 1200), 4000) == 0  # under the minimum
    assert ANTHROPIC.written_tokens(0, 900) == 0  # too short to cache at all


# --- prices ------------------------------------------------------------------------------------


def test_the_price_table_matches_genai_prices() -> None:
    snapshot = pytest.importorskip("genai_prices.data_snapshot").get_snapshot()
    for model, prices in PRICES.items():
        provider = "anthropic" if model.startswith("claude") else "openai"
        _, info = snapshot.find_provider_model(model, None, provider, None)
        source = info.prices

        def base(value: Any) -> float | None:
            return None if value is None else float(getattr(value, "base", value))

        assert base(source.input_mtok) == prices.input, model
        assert base(source.output_mtok) == prices.output, model
        assert base(source.cache_read_mtok) == prices.cached_input, model
        assert base(source.cache_write_mtok) == prices.cache_write, model


def test_price_lookup_and_bad_prices() -> None:
    assert price_for("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    with pytest.raises(InvalidArgumentError, match="no price known for model 'no-such-model'"):
        price_for("no-such-model")
    with pytest.raises(InvalidArgumentError, match="cached_input .* must not exceed input"):
        Prices(1.0, 2.0, 1.0)
    with pytest.raises(InvalidArgumentError, match="finite"):
        Prices(float("nan"), 0.0, 1.0)
    with pytest.raises(InvalidTypeError, match="price input must be a number"):
        Prices("1", 0.0, 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="at most the prompt"):
        call_cost(100, 80, 0, PRICES["gpt-4o"], written_tokens=30)


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_replay_costs_recomputed_independently(model: str) -> None:
    """Every call's cost again with genai-prices' own calculator, and the unmanaged run's
    cached tokens again from its definition (each prompt extends the previous one)."""
    genai_prices = pytest.importorskip("genai_prices")
    from genai_prices.types import Usage

    _, messages = load_conversation(_bundled("swe-agent"))
    rules = ANTHROPIC if model.startswith("claude") else OPENAI
    comparison = compare_costs(messages, "gpt-4o", 3000, PRICES[model], rules)
    for name, run in comparison.runs.items():
        recomputed = 0.0
        for call in run.calls:
            usage = Usage(input_tokens=call.prompt_tokens, cache_read_tokens=call.cached_tokens,
                          cache_write_tokens=call.written_tokens, output_tokens=call.output_tokens)
            price = genai_prices.calc_price(usage, model, provider_id="anthropic" if rules is ANTHROPIC else "openai")
            recomputed += float(price.total_price)
        assert math.isclose(run.usd, recomputed, rel_tol=1e-9), name
    unmanaged = comparison.runs["unmanaged"].calls
    for previous, call in zip(unmanaged, unmanaged[1:]):
        shared = previous.prompt_tokens - 3  # the whole previous prompt but its reply priming
        if rules is OPENAI:
            expected = 0 if shared < 1024 else 1024 + (shared - 1024) // 128 * 128
        else:
            expected = shared if shared >= 1024 else 0
        assert call.cached_tokens == expected
    assert comparison.budget_ok == {"managed": True, "cache_naive": True}
    assert all(c.prompt_tokens <= 3000 for c in comparison.runs["managed"].calls)


def test_the_run_cost_is_the_sum_of_its_calls() -> None:
    prices = Prices(2.0, 0.5, 8.0, 2.5)
    run = RunCost(TOKENIZER, prices, CacheRules("test", 0, 1, writes=True))
    first = run.call([user("x" * 50)], 10)
    second = run.call([user("x" * 50), assistant("y"), user("z")], 5)
    assert first.cached_tokens == 0 and first.written_tokens == first.prompt_tokens
    assert second.cached_tokens == TOKENIZER.count_message(user("x" * 50))
    manual = sum((c.uncached_tokens * 2.0 + c.cached_tokens * 0.5 + c.written_tokens * 2.5 + c.output_tokens * 8.0)
                 / 1e6 for c in (first, second))
    assert math.isclose(run.usd, manual, rel_tol=1e-12)


# --- the layout and the schedule ----------------------------------------------------------------


def test_layout_orders_blocks_by_stability() -> None:
    blocks = [("recall", "R"), ("notes", "N"), ("system", "S"), ("status", None), ("custom", "X"),
              ("instructions", "I"), ("custom2", "Y")]
    assert layout(blocks) == ["S", "I", "N", "R", "X", "Y"]
    assert list(STABILITY) == ["system", "instructions", "context", "notes", "recall", "status"]


def test_cache_setting_is_checked() -> None:
    with pytest.raises(InvalidArgumentError, match="cache must be 'auto', 'off'"):
        ContextWindow("gpt-4o", max_tokens=1000, cache="on")
    with pytest.raises(InvalidArgumentError, match="expected_calls must be an int"):
        CacheSchedule(expected_calls=-1)
    with pytest.raises(InvalidTypeError, match="prices must be"):
        CacheSchedule(prices="cheap")  # type: ignore[arg-type]
    assert ContextWindow("gpt-4o", max_tokens=1000, cache="auto").cache is not None
    assert ContextWindow("gpt-4o", max_tokens=1000).cache is None


def test_cache_from_toml(tmp_path: Path) -> None:
    config = tmp_path / "window.toml"
    config.write_text('[window]\nmodel = "gpt-4o"\nmax_tokens = 4000\ncache = "auto"\n')
    window = ContextWindow.from_toml(config)
    assert window.cache is not None and window.cache.prices == PRICES["gpt-4o"]
    config.write_text('[window]\nmodel = "gpt-4o"\nmax_tokens = 4000\ncache = "sometimes"\n')
    with pytest.raises(InvalidArgumentError, match="cache must be"):
        ContextWindow.from_toml(config)


def _long_chat(turns: int, size: int = 60) -> list[dict[str, Any]]:
    out = []
    for turn in range(turns):
        out.append(user(f"question {turn} " + "word " * size))
        out.append(assistant(f"answer {turn} " + "text " * size))
    return out


def test_auto_waits_between_trigger_and_budget_when_the_discount_is_deep() -> None:
    """Priced as Claude (90% off cached input, write surcharge), compacting at the trigger does
    not pay: the window waits until the budget, then compacts down to the target."""
    chat = _long_chat(60)
    deep = ContextWindow("gpt-4o", max_tokens=4000, cache=CacheSchedule(PRICES["claude-sonnet-4-5"]))
    off = ContextWindow("gpt-4o", max_tokens=4000)
    peaks: dict[str, int] = {"auto": 0, "off": 0}
    for message in chat:
        deep.add(message)
        off.add(message)
        peaks["auto"] = max(peaks["auto"], deep.usage.total)
        peaks["off"] = max(peaks["off"], off.usage.total)
        assert deep.usage.total <= deep.prompt_budget
    assert deep.cache is not None and deep.cache.postponed > 0
    assert 0 < deep.compactions < off.compactions
    assert peaks["off"] <= 0.8 * 4000 < peaks["auto"] <= 4000


def test_auto_compacts_at_the_trigger_when_the_discount_is_shallow() -> None:
    """Priced with GPT-4o's 50% discount, the best compaction size is below the room between
    trigger and target, so the window behaves as with cache="off" once calls are known."""
    chat = _long_chat(150, size=15)
    schedule = CacheSchedule(PRICES["gpt-4o"], expected_calls=100)
    assert schedule.best_gap(2400, 60) < 800  # this chat grows ~60 tokens a call: compacting at 80% pays
    shallow = ContextWindow("gpt-4o", max_tokens=4000, cache=schedule)
    off = ContextWindow("gpt-4o", max_tokens=4000)
    for message in chat:
        shallow.add(message)
        off.add(message)
    assert shallow.compactions == off.compactions > 0
    assert shallow.messages() == off.messages()


def test_a_changed_block_before_the_conversation_makes_compaction_free() -> None:
    window = ContextWindow("gpt-4o", max_tokens=4000, cache=CacheSchedule(PRICES["claude-sonnet-4-5"]))
    chat = _long_chat(60)
    index = 0
    while window.usage.total <= 0.8 * 4000:
        window.add(chat[index])
        index += 1
    assert window.compactions == 0  # past the trigger, waiting
    window.write_note("decisions", "use the eu-west-1 region")  # the cache after the system prompt is lost
    assert window.compactions == 1
    assert window.usage.total <= 0.6 * 4000


_ADDS = st.lists(st.tuples(st.sampled_from(["user", "assistant", "assistant", "tools", "tools", "note", "pin"]),
                           st.integers(min_value=20, max_value=400)), min_size=8, max_size=60)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ADDS, cached=st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]), write=st.sampled_from([None, 1.25]),
       trigger=st.sampled_from([0.6, 0.8, 1.0]), target=st.sampled_from([0.3, 0.6]),
       budget=st.integers(min_value=800, max_value=2500), expected=st.sampled_from([None, 1, 50]))
def test_the_schedule_never_exceeds_the_budget_nor_reorders(ops: list[tuple[str, int]], cached: float,
                                                             write: float | None, trigger: float, target: float,
                                                             budget: int, expected: int | None) -> None:
    prices = Prices(1.0, cached, 1.0, write)
    window = ContextWindow("gpt-4o", max_tokens=budget, system="You are a careful agent.",
                           trigger=trigger, target=min(target, trigger),
                           cache=CacheSchedule(prices, expected_calls=expected))
    added: list[dict[str, Any]] = []
    pinned: list[dict[str, Any]] = []
    for step, (kind, size) in enumerate(ops):
        text = f"m{step} " + "tok " * size
        before = window.messages()
        try:
            if kind == "user":
                message = user(text)
                window.add(message)
                added.append(message)
            elif kind == "pin":
                message = user(text[:60])
                window.add(message, pinned=True)
                added.append(message)
                pinned.append(message)
            elif kind == "assistant":
                message = assistant(text)
                window.add(message)
                added.append(message)
            elif kind == "tools":
                call = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{step}", "type": "function", "function": {"name": "look", "arguments": "{}"}}]}
                result = {"role": "tool", "tool_call_id": f"c{step}", "content": text}
                window.extend([call, result])
                added.extend([call, result])
            else:
                window.write_note("task_progress", f"step {step}")
        except ContextOverflowError:
            assert window.messages() == before  # refused: nothing changed
            continue
        usage = window.usage
        assert usage.total <= window.prompt_budget  # the budget never yields to cost
        sent = window.messages()
        assert check_history(sent) == []
        assert sent[0] == {"role": "system", "content": "You are a careful agent."}
        system_blocks = [m for m in sent if m["role"] == "system"]
        assert sent[:len(system_blocks)] == system_blocks  # every block before the conversation
        conversation = [m for m in sent if m["role"] != "system"]
        positions = []
        for message in conversation:
            if message in added:
                positions.append(added.index(message))
        assert positions == sorted(positions)  # never reordered
        for message in pinned:
            assert message in conversation  # pinned content stays
        newest_user = next((m for m in reversed(added) if m["role"] == "user"), None)
        assert newest_user is None or newest_user in conversation  # so does the newest user message
        for message in added[-window.preserve_recent:]:
            assert message in conversation  # and the most recent messages


# --- the replay's cost report -------------------------------------------------------------------


def test_replay_reports_prefix_and_cost(tmp_path: Path) -> None:
    report, plot = tmp_path / "r.json", tmp_path / "r.png"
    code = main(["replay", "--bundled", "tau-bench", "--max-tokens", "3000", "--quiet", "--price-model",
                 "claude-sonnet-4-5", "--json", str(report), "--plot", str(plot)])
    assert code == 0
    cost = json.loads(report.read_text())["cost"]
    assert cost["priced_as"] == "claude-sonnet-4-5" and cost["cache_rules"] == "anthropic"
    assert set(cost["runs"]) == {"managed", "unmanaged", "cache_naive"}
    for name, calls in cost["calls"].items():
        assert len(calls) == len(cost["calls"]["managed"])
        assert all(0 <= c["cached"] <= c["shared_prefix"] <= c["prompt"] for c in calls[1:]), name
        assert math.isclose(sum(c["usd"] for c in calls), cost["runs"][name]["usd"], rel_tol=1e-9)
    assert max(c["prompt"] for c in cost["calls"]["managed"]) <= 3000
    assert plot.read_bytes().startswith(b"\x89PNG")


# --- the floor under any manager's cost ------------------------------------------------------------


def test_call_floor_by_hand() -> None:
    gpt, claude = PRICES["gpt-4o"], PRICES["claude-sonnet-4-5"]  # (2.5, 1.25, 10) and (3, 0.3, 15, 3.75)
    needs = CallNeeds(fixed=1200, new=200, history=5000, output=100)
    # first call: nothing cached; 1,400 tokens at the input price (OpenAI) or written (Anthropic)
    assert math.isclose(call_floor(needs, gpt, OPENAI, first=True), (1400 * 2.5 + 100 * 10) / 1e6)
    assert math.isclose(call_floor(needs, claude, ANTHROPIC, first=True), (1400 * 3.75 + 100 * 15) / 1e6)
    # later: the 1,200 tokens before the new ones cached, the 200 new ones uncached (or written)
    assert math.isclose(call_floor(needs, gpt, OPENAI), (1200 * 1.25 + 200 * 2.5 + 100 * 10) / 1e6)
    assert math.isclose(call_floor(needs, claude, ANTHROPIC), (1200 * 0.3 + 200 * 3.75 + 100 * 15) / 1e6)
    # keeping at least 3,000 tokens: 2,800 of them cached at best
    assert math.isclose(call_floor(needs, gpt, OPENAI, least=3000), (2800 * 1.25 + 200 * 2.5 + 100 * 10) / 1e6)
    # a prompt too short to cache: either all uncached, or padded up to the cache's minimum
    short = CallNeeds(fixed=300, new=200, history=500, output=0)
    assert math.isclose(call_floor(short, gpt, OPENAI), 500 * 2.5 / 1e6)  # 1024 cached + 200 would cost more
    # priced as Claude, padding the prompt to a cached 1,024 (+200 written) is cheaper than 500 uncached
    assert math.isclose(call_floor(short, claude, ANTHROPIC), (1024 * 0.3 + 200 * 3.75) / 1e6)
    assert call_floor(short, claude, ANTHROPIC) < 500 * 3.0 / 1e6
    # the floor of a replay is the sum of its calls' floors, the first one uncached
    calls = [needs, CallNeeds(1200, 300, 5300, 50)]
    assert math.isclose(cost_lower_bound(calls, gpt, OPENAI),
                        call_floor(calls[0], gpt, OPENAI, first=True) + call_floor(calls[1], gpt, OPENAI))
    assert math.isclose(cost_lower_bound(calls, gpt, OPENAI, keep=0.5, budget=4000),
                        call_floor(calls[0], gpt, OPENAI, first=True, least=2000)
                        + call_floor(calls[1], gpt, OPENAI, least=2000))


def test_floor_bad_input() -> None:
    with pytest.raises(InvalidArgumentError, match="CallNeeds.new must be an int >= 0"):
        CallNeeds(10, -1, 10, 0)
    with pytest.raises(InvalidArgumentError, match="CallNeeds.output must be an int >= 0"):
        CallNeeds(10, 1, 11, 1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="history .* must be at least fixed \\+ new"):
        CallNeeds(10, 5, 12, 0)
    needs = [CallNeeds(10, 5, 15, 0)]
    with pytest.raises(InvalidArgumentError, match="keep must be a number in \\[0, 1\\]"):
        cost_lower_bound(needs, PRICES["gpt-4o"], OPENAI, keep=1.5, budget=100)
    with pytest.raises(InvalidArgumentError, match="keep > 0 needs the budget"):
        cost_lower_bound(needs, PRICES["gpt-4o"], OPENAI, keep=0.5)
    with pytest.raises(InvalidArgumentError, match="least must be an int >= 0"):
        call_floor(needs[0], PRICES["gpt-4o"], OPENAI, least=-1)
    with pytest.raises(InvalidArgumentError, match="cache-write price .* at least the input price"):
        cost_lower_bound(needs, Prices(2.0, 0.5, 8.0, 1.0), ANTHROPIC)


def test_the_floor_is_tight_for_an_unmanaged_append_only_run() -> None:
    """With a cache of any token and no minimum, the unmanaged run of a replay that fits the
    budget misses the floor at full retention only by the 3 reply-priming tokens of each earlier
    prompt, which the floor counts as cacheable: the floor is a near-reachable bound, not slack."""
    _, messages = load_conversation(_bundled("tau-bench"))
    prices, rules = Prices(2.0, 0.5, 8.0), CacheRules("any-token", 0, 1)
    comparison = compare_costs(messages, "gpt-4o", 100_000, prices, rules)
    unmanaged = comparison.runs["unmanaged"]
    calls = len(unmanaged.calls)
    floor = comparison.lower_bound(prices, rules, keep=1.0, budget=100_000)
    assert math.isclose(unmanaged.usd - floor, (calls - 1) * 3 * (2.0 - 0.5) / 1e6, rel_tol=1e-9)
    assert comparison.retention("managed", 100_000) == 1.0


@pytest.mark.parametrize("rules", [OPENAI, ANTHROPIC])
def test_the_suffix_floor_keeping_everything_is_the_unmanaged_cost(rules: CacheRules) -> None:
    """With the whole history kept (keep = 1, a budget above it) the only suffix is the whole
    conversation, every call an append: the floor is the unmanaged run's cost, exactly."""
    _, messages = load_conversation(_bundled("tau-bench"))
    prices = PRICES["claude-sonnet-4-5" if rules is ANTHROPIC else "gpt-4o"]
    comparison = compare_costs(messages, "gpt-4o", 100_000, prices, rules)
    floor = comparison.suffix_lower_bound(prices, rules, budget=100_000, keep=1.0)
    assert math.isclose(floor, comparison.runs["unmanaged"].usd, rel_tol=1e-12)
    assert comparison.suffix_shaped == {"managed": True, "cache_naive": True}
    # with a budget below the history, nothing keeps it all
    assert comparison.suffix_lower_bound(prices, rules, budget=1000, keep=1.0) == math.inf


def test_the_suffix_floor_by_hand() -> None:
    """Two calls over three 600-token messages, 100 fixed tokens, a cache of any token: the
    second call either appends (the first prompt cached) or starts at the new message (the
    fixed tokens cached)."""
    prices, rules = Prices(1.0, 0.1, 2.0), CacheRules("any-token", 0, 1)
    needs = [CallNeeds(100, 1200, 1300, 10), CallNeeds(100, 600, 1900, 10)]
    messages = ReplayMessages((600, 600, 600), (0, 0, 0), (2, 3))
    first = (1300 * 1.0 + 10 * 2.0) / 1e6
    append = ((1300 - 3) * 0.1 + (1900 - 1297) * 1.0 + 10 * 2.0) / 1e6
    restart = (97 * 0.1 + (700 - 97) * 1.0 + 10 * 2.0) / 1e6  # only the new message kept
    assert math.isclose(suffix_lower_bound(needs, messages, prices, rules, budget=5000), first + restart)
    assert math.isclose(suffix_lower_bound(needs, messages, prices, rules, budget=5000, keep=1.0), first + append)
    # within 1,400 tokens the second call cannot append; keeping half of it rules out the new message alone
    middle = (97 * 0.1 + (1300 - 97) * 1.0 + 10 * 2.0) / 1e6
    assert math.isclose(suffix_lower_bound(needs, messages, prices, rules, budget=1400, keep=0.75), first + middle)
    with pytest.raises(InvalidArgumentError, match="budget must be an int > 0"):
        suffix_lower_bound(needs, messages, prices, rules, budget=0)
    with pytest.raises(InvalidArgumentError, match="notice must be an int >= 0"):
        suffix_lower_bound(needs, messages, prices, rules, budget=10, notice=-1)
    with pytest.raises(InvalidArgumentError, match="2 calls but 1 message counts"):
        suffix_lower_bound(needs, ReplayMessages((600,), (0,), (1,)), prices, rules, budget=10)
    with pytest.raises(InvalidArgumentError, match="before_call must be non-decreasing"):
        ReplayMessages((600, 600), (0, 0), (2, 1))
    with pytest.raises(InvalidArgumentError, match="2 token counts but 1 leading"):
        ReplayMessages((600, 600), (0,), (1, 2))


def _assert_floors_hold(comparison: Any, prices: Prices, rules: CacheRules, budget: int) -> int:
    """Every floor that applies to a run is at most its cost; returns how many suffix-shaped
    managed runs were checked against :func:`suffix_lower_bound`."""
    floor = comparison.lower_bound(prices, rules)
    suffix_checked = 0
    for name, run in comparison.runs.items():
        assert floor <= run.usd * (1 + 1e-9), name
        if name == "unmanaged":
            continue
        assert all(call.prompt_tokens <= budget for call in run.calls), name
        keep = comparison.retention(name, budget)
        assert comparison.lower_bound(prices, rules, keep=keep, budget=budget) <= run.usd * (1 + 1e-9), name
        if comparison.suffix_shaped[name]:
            suffix_checked += 1
            for share in (0.0, keep):
                assert comparison.suffix_lower_bound(prices, rules, budget=budget, keep=share) <= run.usd * (1 + 1e-9)
    return suffix_checked


@pytest.mark.parametrize("bundled", ["tau-bench", "swe-agent"])
@pytest.mark.parametrize("budget", [2500, 4000, 8000])
@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_the_floor_is_below_every_manager_on_real_replays(bundled: str, budget: int, model: str) -> None:
    _, messages = load_conversation(_bundled(bundled))
    rules = ANTHROPIC if model.startswith("claude") else OPENAI
    comparison = compare_costs(messages, "gpt-4o", budget, PRICES[model], rules,
                               variants={"watermark": {"cache": "off"}})
    assert not comparison.overflows
    assert len(comparison.needs) == len(comparison.runs["managed"].calls) > 0
    assert _assert_floors_hold(comparison, PRICES[model], rules, budget) > 0  # the suffix floor was checked too


_TURNS = st.lists(st.tuples(st.sampled_from(["chat", "chat", "tool"]), st.integers(min_value=5, max_value=300),
                            st.integers(min_value=5, max_value=300)), min_size=2, max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=_TURNS, input_price=st.floats(min_value=0.1, max_value=20.0),
       cached=st.floats(min_value=0.0, max_value=1.0), write=st.sampled_from([None, 1.0, 1.25, 2.0]),
       rules=st.sampled_from([OPENAI, ANTHROPIC, CacheRules("any-token", 0, 1), CacheRules("small", 64, 16),
                              CacheRules("blocks-writing", 128, 0, writes=True)]),
       budget=st.integers(min_value=600, max_value=5000))
def test_the_floor_is_below_every_manager_on_random_replays(turns: list[tuple[str, int, int]], input_price: float,
                                                            cached: float, write: float | None,
                                                            rules: CacheRules, budget: int) -> None:
    """Every message distinct (the floor's assumption: a new message is not a copy of an older
    one at the same place), any prices with cached <= input <= write."""
    prices = Prices(input_price, input_price * cached, 4 * input_price,
                    None if write is None else input_price * write)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful agent."}]
    for step, (kind, ask, reply) in enumerate(turns):
        if kind == "chat":
            messages.append(user(f"q{step} " + "word " * ask))
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{step}", "type": "function", "function": {"name": "look", "arguments": "{}"}}]})
            messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": f"r{step} " + "line " * ask})
        messages.append(assistant(f"a{step} " + "text " * reply))
    comparison = compare_costs(messages, "gpt-4o", budget, prices, rules, variants={"watermark": {"cache": "off"}})
    if comparison.overflows:
        return  # a message alone over the budget: no manager serves this replay
    _assert_floors_hold(comparison, prices, rules, budget)


# --- delegation ---------------------------------------------------------------------------------


def _parent(**more: Any) -> ContextWindow:
    window = ContextWindow("gpt-4o", max_tokens=4000, system="You coordinate work.", **more)
    window.add(user("Find why the nightly build fails."))
    return window


def test_delegate_sync_adds_one_result_and_archives_the_transcript() -> None:
    events: list[Any] = []
    parent = _parent(on_delegate_start=events.append, on_delegate_end=events.append)
    parent.write_note("constraints", "never push to main")
    seen: dict[str, Any] = {}

    def run(child: ContextWindow) -> str:
        seen["first"] = child.messages()[1]["content"]
        seen["budget"] = child.max_tokens
        child.add(assistant("Looking at the logs."))
        child.add(user("log: error E42 in step compile"))
        return "The build fails at compile with E42 (missing header)."

    before = len(parent)
    result = parent.delegate("inspect the nightly build logs", run, max_result_tokens=200, max_tokens=2000)
    assert len(parent) == before + 1
    assert parent.messages()[-1] == result.message and result.message["role"] == "assistant"
    assert "E42" in result.message["content"] and result.transcript_id in result.message["content"]
    assert result.tokens <= 200 and not result.condensed
    assert "never push to main" in seen["first"] and "inspect the nightly build logs" in seen["first"]
    assert seen["budget"] == 2000
    transcript = parent.retrieve(result.transcript_id)
    assert transcript is not None
    assert [m["content"] for m in transcript][-3:] == ["Looking at the logs.", "log: error E42 in step compile",
                                                       "The build fails at compile with E42 (missing header)."]
    assert isinstance(events[0], DelegationStarted) and isinstance(events[1], DelegationEnded)
    assert events[1].result == result and events[1].error is None


def test_delegate_condenses_a_long_result_within_the_cap() -> None:
    parent = _parent()
    long_result = "\n".join(f"Checked module {i}: fine." for i in range(200)) + "\nError: /src/app.py line 7 fails."
    result = parent.delegate("check every module", lambda child: long_result, max_result_tokens=80)
    assert result.condensed and result.tokens <= 80
    assert TOKENIZER.count_message(result.message) == result.tokens
    archived = parent.retrieve(result.transcript_id)
    assert archived is not None and archived[-1]["content"] == long_result
    custom = parent.delegate("check again", lambda child: long_result, max_result_tokens=80,
                             condense=lambda text, room: "all fine but /src/app.py line 7")
    assert custom.message["content"].endswith("all fine but /src/app.py line 7")


def test_delegate_answers_a_tool_call_and_accepts_messages() -> None:
    parent = _parent()
    parent.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": "d1", "type": "function", "function": {"name": "delegate", "arguments": "{}"}}]})

    def run(child: ContextWindow) -> list[dict[str, Any]]:
        return [assistant("step one"), user("ok"), assistant("final: 3 flaky tests")]

    result = parent.delegate("triage flaky tests", run, tool_call_id="d1")
    assert result.message["role"] == "tool" and result.message["content"].endswith("final: 3 flaky tests")
    assert check_history(parent.messages()) == []


def test_delegate_async() -> None:
    async def run(child: ContextWindow) -> str:
        await asyncio.sleep(0)
        await child.aadd(assistant("working"))
        return "async result"

    parent = _parent()
    result = parent.delegate("sync call, async run", run)  # no loop running: run to completion
    assert result.message["content"].endswith("async result")

    async def main_loop() -> None:
        window = _parent()
        done = await window.adelegate("async task", run)
        assert done.message["content"].endswith("async result")
        with pytest.raises(InvalidArgumentError, match="use await window.adelegate"):
            window.delegate("wrong call", run)
        done_sync = await window.adelegate("sync run", lambda child: "sync result")
        assert done_sync.message["content"].endswith("sync result")

    asyncio.run(main_loop())


@pytest.mark.parametrize("outcome", ["raise", "empty", "bad-type", "no-assistant", "too-big"])
def test_a_failed_delegation_leaves_the_parent_unchanged(outcome: str) -> None:
    events: list[DelegationEnded] = []
    parent = _parent(on_delegate_end=events.append)
    parent.add(assistant("I will delegate."))
    before = (parent.messages(), len(parent.archive), parent.usage, parent.tokens_added)  # type: ignore[arg-type]

    def run(child: ContextWindow) -> Any:
        child.add(assistant("partial work"))
        if outcome == "raise":
            raise RuntimeError("sub-agent crashed")
        return {"empty": "  ", "bad-type": 42, "no-assistant": [user("only a question")],
                "too-big": "x"}[outcome]

    expected: type[BaseException] = {"raise": RuntimeError, "bad-type": InvalidTypeError}.get(
        outcome, InvalidArgumentError)
    if outcome == "too-big":  # the parent is full of protected content: the result cannot fit
        parent = ContextWindow("gpt-4o", max_tokens=140, on_delegate_end=events.append)
        parent.add(user("q " * 110), pinned=True)
        before = (parent.messages(), len(parent.archive), parent.usage, parent.tokens_added)  # type: ignore[arg-type]
        expected = ContextOverflowError
    with pytest.raises(expected):
        parent.delegate("a task", run, max_result_tokens=100)
    assert (parent.messages(), len(parent.archive), parent.usage, parent.tokens_added) == before  # type: ignore[arg-type]
    assert events and events[-1].error is not None and events[-1].result is None


def test_delegate_bad_arguments() -> None:
    parent = _parent()
    with pytest.raises(InvalidArgumentError, match="task must be a non-empty str"):
        parent.delegate("", lambda child: "x")
    with pytest.raises(InvalidTypeError, match="run must be callable"):
        parent.delegate("t", "not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_result_tokens must be >= 48"):
        parent.delegate("t", lambda child: "x", max_result_tokens=10)
    with pytest.raises(InvalidTypeError, match="max_result_tokens must be an int"):
        parent.delegate("t", lambda child: "x", max_result_tokens=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="tool_call_id"):
        parent.delegate("t", lambda child: "x", tool_call_id="")


def test_the_cost_guide_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    # The delegation example that followed it in the README is on its own page now
    # (docs/guides/delegation.md), run with every other page by tests/test_readme_blocks.py.
    import re

    guide = Path(__file__).resolve().parent.parent / "docs" / "guides" / "cost.md"
    section = guide.read_text().split("## Paying less per task", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(guide), "exec"), namespace)
    assert "of input tokens cached" in capsys.readouterr().out


def test_replay_prints_the_prompt_cache_per_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--bundled", "tau-bench", "--max-tokens", "2500"]) == 0
    out = capsys.readouterr().out
    assert "prompt cache per model call (priced as gpt-4o, openai rules)" in out
    assert "cost, cache-naive (gpt-4o)" in out and "cost, unmanaged (gpt-4o)" in out
    assert main(["replay", "--bundled", "tau-bench", "--max-tokens", "2500", "--price-model", "unknown-model"]) == 0
    assert "prompt cache per model call" not in capsys.readouterr().out  # no price: no cost report
