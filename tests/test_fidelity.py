"""Nothing the user said is lost: the key-fact matcher, and the fidelity of compaction measured on
real data (canaries, tau-bench ground-truth ids, compression of the summaries).

Data halves (see tests/fidelity_eval.py): the TUNING half (even positions of every data set) is
what the rules were developed against; the HELD-OUT half (odd positions) is what the figures
below are reported on. The floors asserted on the held-out half are the values measured there
(regression guards); where they are under the target, the target is given next to them.
Standing instructions are in test_instructions.py, the fidelity gate in test_compaction.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwindow.fidelity import extract_key_facts, fact_present, json_values, key_fact_retention

from . import fidelity_eval as fe

# --- the key-fact matcher ----------------------------------------------------------------------


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from([" ", ", ", "(", "\n"]))
def test_a_number_is_present_only_as_a_whole_token(a: int, b: int, sep: str) -> None:
    text = f"total{sep}{b}{sep}end"
    assert fact_present(str(a), text) == (a == b)


@given(st.from_regex(r"[A-Z]{3}[0-9]{2,4}", fullmatch=True), st.from_regex(r"[A-Z0-9]{1,3}", fullmatch=True))
def test_an_identifier_is_not_present_inside_a_longer_one(fact: str, suffix: str) -> None:
    assert not fact_present(fact, f"flight {fact}{suffix} booked")
    assert fact_present(fact, f"flight {fact}, booked")


def test_whole_token_edges() -> None:
    assert not fact_present("42", "1423")
    assert not fact_present("42", "4.2") and not fact_present("42", "42.5")
    assert fact_present("42", "it is 42.") and fact_present("./run.sh", "call ./run.sh now")
    assert key_fact_retention("order 42 shipped", "order 1423").score == 0.0


def test_json_facts_are_its_values_not_its_keys() -> None:
    text = json.dumps({"reservation_id": "ZFA04Y", "flights": [{"flight_number": "HAT170", "date": "2024-05-20"}]})
    facts = extract_key_facts(json_values(text))
    assert facts["identifier"] == ["ZFA04Y", "HAT170"] and facts["date"] == ["2024-05-20"]
    assert "reservation_id" not in json_values(text)
    assert json_values("not json {") == "not json {"


def test_more_kinds_of_key_facts() -> None:
    facts = extract_key_facts("Mail jane.doe@example.com about JIRA-4821 (v2.3.1): ValueError: bad checksum "
                              "in \u201cblue harbour\u201d")
    assert {"jane.doe@example.com", "JIRA-4821", "v2.3.1"} <= set(facts["identifier"])
    assert facts["quoted"] == ["blue harbour"] and len(facts["error"]) == 1


# --- canaries, tau-bench ids, compression -----------------------------------------------------


def test_canaries_survive_five_rounds_on_both_halves(shared_data: Path) -> None:
    """All 20 canaries (tuning: even, held-out: odd) after each of 5 compaction rounds."""
    survival = fe.canary_survival(shared_data)
    for round_, canaries in survival.items():
        lost = [name for name, kept in canaries.items() if not all(kept)]
        assert lost == [], (round_, lost)


@pytest.mark.parametrize(("budget", "floor"), [(2000, 0.73), (4000, 0.98)])
def test_tau_bench_ground_truth_ids_on_the_held_out_half(shared_data: Path, budget: int, floor: float) -> None:
    """Held-out half. Measured: 4k 99.5% (192/193, no run overflows); 2k 73.4% (113/154, 18 runs overflow
    and are excluded) -- the target is 90%: at 2k the 1.3k-token policy leaves ~600 tokens for
    the recent messages, the summary and its kept facts. Tuning half: 4k 100%, 2k 68%."""
    result = fe.tau_ids(shared_data, budget, fe.HELD_OUT)
    assert result.total > 100
    assert result.rate >= floor, result


def test_summaries_compress_at_least_twice(shared_data: Path) -> None:
    """Held-out chitchat at 2k: measured 2.4x (tuning half 2.3x)."""
    assert fe.summary_compression(shared_data, fe.HELD_OUT) >= 2.0
