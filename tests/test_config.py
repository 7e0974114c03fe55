"""Configuration of a window: validated settings (a typed error that names the setting), the
built-in profiles, and TOML files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwindow import ContextWindow, InvalidArgumentError, InvalidTypeError


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_tokens": 0}, InvalidArgumentError, "max_tokens must be >= 1"),
        ({"max_tokens": 10.5}, InvalidTypeError, "max_tokens must be an int"),
        ({"max_tokens": 100, "reserve_output": 100}, InvalidArgumentError, "reserve_output"),
        ({"max_tokens": 100, "trigger": 0}, InvalidArgumentError, r"trigger must be in \(0, 1\]"),
        ({"max_tokens": 100, "trigger": 1.5}, InvalidArgumentError, "trigger"),
        ({"max_tokens": 100, "target": 0.9, "trigger": 0.8}, InvalidArgumentError, "must not exceed trigger"),
        ({"max_tokens": 100, "preserve_recent": -1}, InvalidArgumentError, "preserve_recent must be >= 0"),
        ({"max_tokens": 100, "colour": "red"}, InvalidArgumentError, "unknown ContextWindow settings"),
        ({"max_tokens": 100, "profile": "gaming"}, InvalidArgumentError, "unknown profile"),
        ({"max_tokens": 100, "strategies": [42]}, InvalidTypeError, "a strategy must"),
    ],
)
def test_invalid_settings(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ContextWindow("gpt-4o", **kwargs)


def test_toml_profiles(tmp_path: Path) -> None:
    config = tmp_path / "window.toml"
    config.write_text(
        '[window]\nmodel = "gpt-4o"\nmax_tokens = 8000\nreserve_output = 1000\nprofile = "customer_support"\n'
        'system = "Be kind."\n[[window.strategies]]\ntype = "truncate_tool_results"\nmax_chars = 500\n')
    window = ContextWindow.from_toml(config)
    assert window.profile == "customer_support" and window.prompt_budget == 7000
    assert [s.name for s in window.cascade.strategies] == ["truncate_tool_results"]
    assert window.budget.allocations["system_prompt"] == 0.12
    for profile in ("default", "code_review", "research", "customer_support"):
        assert ContextWindow.from_toml(config, profile=profile).profile == profile
    bad = tmp_path / "bad.toml"
    bad.write_text('[window]\nmax_tokens = 100\ncolour = "red"\n')
    with pytest.raises(InvalidArgumentError, match="unknown settings"):
        ContextWindow.from_toml(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("[window\n")
    with pytest.raises(InvalidArgumentError, match="invalid TOML"):
        ContextWindow.from_toml(broken)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('[window]\nmax_tokens = 1000\n[[window.strategies]]\ntype = "magic"\n')
    with pytest.raises(InvalidArgumentError, match="unknown strategy type 'magic'"):
        ContextWindow.from_toml(unknown)
