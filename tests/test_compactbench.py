"""The compactbench trap templates (buried constraint, decision override, entity confusion,
reference resolution), instantiated here with our own small lexicons, compacted over three
cycles with the default summarizer: every fact the template says must survive
(``contains_normalized``) is still in the context. (``forbidden_absent`` items judge a model's
answer, not the context, and are not checked here.)"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from ctxwindow import ContextWindow
from ctxwindow.messages import text_of
from ctxwindow.strategies import Summarize

from .conftest import SHARED_DATA

yaml = pytest.importorskip("yaml")

LEXICON = {
    "person_name": ["Avery Chen", "Jordan Okafor", "Priya Raman", "Mateo Silva", "Lena Fischer", "Kenji Watanabe"],
    "action_phrase": ["deploy to production on Fridays", "delete the staging database", "email the customer list",
                      "rotate the signing keys manually", "merge without code review", "share the API keys in chat",
                      "downgrade the payment service", "disable the audit log"],
    "project_noun": ["billing migration", "search relevance revamp", "mobile onboarding", "data retention audit",
                     "checkout redesign", "warehouse sync"],
    "org_name": ["Northwind Labs", "Acme Logistics", "Blue Harbor Bank"],
}
FILLER = ["By the way, the team lunch moved to the small room.", "Unrelated: the wiki search is slow today.",
          "Side note, the office printer needs toner again.", "Also, remember the all-hands is next month."]


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s/-]", " ", text.lower())).strip()


def instantiate(template: dict[str, Any], seed: int) -> tuple[list[dict[str, str]], list[str]]:
    rng = random.Random(seed)
    values: dict[str, str] = {}
    for variable in template["variables"]:
        pool = [v for v in LEXICON[variable["generator"]] if v not in values.values()]
        values[variable["name"]] = rng.choice(pool)
    counts = template["difficulty_policy"]["distractor_turns"]
    values["difficulty.distractor_turns"] = str(max(int(v) for v in counts.values()))

    def fill(text: str) -> str:
        return re.sub(r"\{\{\s*([\w.]+)\s*\}\}", lambda m: values[m.group(1)], text)

    turns: list[dict[str, str]] = []
    for turn in template["transcript"]["turns"]:
        if turn["role"] == "distractor_block":
            for i in range(int(fill(str(turn["count"])))):
                turns.append({"role": "user", "content": FILLER[i % len(FILLER)]})
                turns.append({"role": "assistant", "content": "Noted."})
        else:
            turns.append({"role": turn["role"], "content": fill(turn["template"])})
    expected = [fill(str(item["expected"]["value"])) for item in template["evaluation_items"]
                if item["expected"]["check"] == "contains_normalized" and "value" in item["expected"]]
    return turns, expected


TEMPLATES = sorted((SHARED_DATA / "compactbench_templates" / "benchmarks" / "public").rglob("*.yaml"))


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.stem for p in TEMPLATES])
def test_template_facts_survive_three_compaction_cycles(path: Path) -> None:
    template = yaml.safe_load(path.read_text())["template"]
    turns, expected = instantiate(template, seed=len(template["key"]))
    assert expected
    window = ContextWindow("gpt-4o", max_tokens=700, system="You are a planning assistant.",
                           preserve_recent=2, strategies=[Summarize(preserve_recent=2)])
    window.extend(turns)
    for cycle in range(3):
        window.compact(force=True)
        for i in range(6):
            window.add({"role": "user", "content": f"cycle {cycle}: {FILLER[i % len(FILLER)]}"})
            window.add({"role": "assistant", "content": "Noted, continuing."})
    context = normalized("\n".join(text_of(m) for m in window.messages()))
    missing = [value for value in expected if normalized(value) not in context]
    assert not missing, (template["key"], missing)


def test_templates_are_present(shared_data: Path) -> None:
    assert shared_data == SHARED_DATA and len(TEMPLATES) == 24
