"""The published wheel (`make wheel` sets CTXWINDOW_WHEEL to it; skipped otherwise, since building
it takes minutes): at most 10 MB, a manylinux2014 abi3 wheel by auditwheel's reading, and it
installs into a fresh virtualenv whose PATH has no Rust toolchain, where `ctxwindow replay` runs on
the bundled trajectory. Installing its dependencies (numpy, and rich for the CLI) needs PyPI or a
pip index; only binary wheels are accepted, so nothing is compiled."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

WHEEL = str(Path(os.environ["CTXWINDOW_WHEEL"]).resolve()) if os.environ.get("CTXWINDOW_WHEEL") else None
pytestmark = pytest.mark.skipif(not WHEEL, reason="run by `make wheel` (CTXWINDOW_WHEEL unset)")
MAX_BYTES = 10 * 1024 * 1024


def test_wheel_is_small_and_manylinux() -> None:
    wheel = Path(str(WHEEL))
    assert wheel.stat().st_size <= MAX_BYTES, f"{wheel.stat().st_size / 1e6:.1f} MB"
    assert "-cp310-abi3-" in wheel.name and "manylinux" in wheel.name, wheel.name
    auditwheel = Path(sys.executable).with_name("auditwheel")
    report = subprocess.run([str(auditwheel), "show", str(wheel)], check=True, capture_output=True,
                            text=True).stdout
    assert 'platform tag: "manylinux_2_17_x86_64"' in " ".join(report.split()), report


def test_wheel_installs_and_replays_without_rust(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    bin_dir = env_dir / "bin"
    # A PATH with the new environment and the system only: no cargo, rustc or rustup.
    path = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    for tool in ("cargo", "rustc", "rustup"):
        assert shutil.which(tool, path=path) is None, f"{tool} is on {path}"
    env = {"PATH": path, "HOME": str(tmp_path), "CARGO_HOME": str(tmp_path / "no-cargo"),
           "RUSTUP_HOME": str(tmp_path / "no-rustup"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--only-binary", ":all:",
                    str(WHEEL), "rich>=13"], check=True, env=env, cwd=tmp_path)
    installed = subprocess.run([str(bin_dir / "python"), "-c", "import ctxwindow; print(ctxwindow.__file__)"],
                               check=True, env=env, cwd=tmp_path, capture_output=True, text=True).stdout
    assert installed.startswith(str(env_dir)), installed
    report = tmp_path / "replay.json"
    result = subprocess.run([str(bin_dir / "ctxwindow"), "replay", "--max-tokens", "2500", "--json", str(report)],
                            env=env, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    summary = json.loads(report.read_text())
    assert summary["overflows"] == 0 and summary["pairing_ok"] is True, summary
