"""The command line end to end (subprocesses): every bundled file, real data, the plot, JSON
reports, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwindow.cli import BUNDLED

CLI = [sys.executable, "-m", "ctxwindow.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("bundled", sorted(BUNDLED))
def test_replay_every_bundled_file(bundled: str, tmp_path: Path) -> None:
    plot, report = tmp_path / "replay.png", tmp_path / "replay.json"
    done = run("replay", "--bundled", bundled, "--max-tokens", "6000", "--plot", str(plot), "--json", str(report))
    assert done.returncode == 0, done.stderr
    for line in ("tokens sent, managed", "tokens sent, unmanaged", "peak utilization", "overflows",
                 "pairing check", "key-fact fidelity", "health alerts", "managing time per message"):
        assert line in done.stdout
    data = plot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and 20_000 < len(data) < 2_000_000
    summary = json.loads(report.read_text())
    assert summary["overflows"] == 0 and summary["pairing_ok"] is True
    assert summary["tokens_sent_managed"] <= summary["tokens_sent_unmanaged"]
    assert summary["peak_utilization"] <= 1.0
    assert isinstance(summary["alerts"], list)


def test_replay_real_data_formats(shared_data: Path, tmp_path: Path) -> None:
    cases = [
        (shared_data / "tau_bench_airline" / "gpt-4o-airline.json", ["--index", "7"]),
        (shared_data / "swe_agent_trajs" / "gpt4_pydicom-1458.traj", []),
        (shared_data / "chitchat_byu" / "chitchat_long250.jsonl", ["--index", "3"]),
    ]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps({"role": r, "content": f"message {i} " * 30})
                              for i, r in enumerate(["user", "assistant"] * 20)))
    cases.append((chat, []))
    listed = tmp_path / "chat.json"
    listed.write_text(json.dumps({"messages": [{"role": "user", "content": "hello"}]}))
    cases.append((listed, []))
    for path, extra in cases:
        report = tmp_path / "r.json"
        done = run("replay", str(path), "--max-tokens", "8000", "--quiet", "--json", str(report), *extra)
        assert done.returncode == 0, (path, done.stderr)
        assert json.loads(report.read_text())["pairing_ok"] is True


def test_every_strategy_from_the_command_line(tmp_path: Path) -> None:
    from ctxwindow.window import STRATEGY_TYPES

    args = [arg for name in sorted(STRATEGY_TYPES) for arg in ("--strategy", name)]
    report = tmp_path / "r.json"
    done = run("replay", "--bundled", "swe-agent", "--max-tokens", "3000", "--quiet", "--json", str(report), *args)
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text())["pairing_ok"] is True


def test_count(shared_data: Path) -> None:
    done = run("count", str(shared_data / "swe_agent_trajs" / "gpt4_fc_sweagenttestrepo-1c2844.traj"), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["encoding"] == "o200k_base"
    assert result["total"] == 3 + sum(row["tokens"] for row in result["messages"])
    assert result["by_component"]["tool_results"] == result["by_role"].get("tool", 0)
    table = run("count", str(shared_data / "tau_bench_airline" / "gpt-4o-airline.json"), "--index", "2")
    assert table.returncode == 0 and "total prompt tokens:" in table.stdout and "per role:" in table.stdout


@pytest.mark.parametrize(
    ("content", "name", "args", "message"),
    [
        (None, "missing.json", [], "cannot read"),
        ('{"foo": 1}', "x.json", [], "unknown format; supported: OpenAI chat JSON"),
        ('[{"role": "user", "content": "hi"},\n {"role": ', "bad.json", [], "invalid JSON at line 2, column"),
        ('{"role": "user", "content": "a"}\n{oops}\n', "bad.jsonl", [], "invalid JSON at line 2, column 2"),
        (None, "tau", ["--max-tokens", "800"], "budget too small"),
        ('[{"content": "no role"}]', "norole.json", [], "unknown format"),
        ('[{"role": "robot", "content": "x"}]', "robot.json", [], "unknown role"),
        (None, "tau-index", ["--index", "999"], "out of range"),
    ],
)
def test_errors_are_one_line_exit_2(tmp_path: Path, shared_data: Path, content: str | None, name: str,
                                    args: list[str], message: str) -> None:
    if name == "tau":
        path = "--bundled=tau-bench"
        done = run("replay", path, *args)
    elif name == "tau-index":
        done = run("replay", str(shared_data / "tau_bench_airline" / "gpt-4o-airline.json"), *args)
    else:
        target = tmp_path / name
        if content is not None:
            target.write_text(content)
        done = run("replay", str(target), *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxwindow: ") and message in lines[0], done.stderr
