"""Exact counting on typical and adversarial text, single thread, side by side with its peers on the
same inputs: Python tiktoken (`encode_ordinary`), and, in Rust, the `bpe-openai` crate (GitHub's
linear byte-pair encoder) next to ctxwindow's core counter (benches/peer_bpe, built here).

The adversarial inputs are 10^6-byte texts that the split pattern leaves as one long piece (or
that stress the pattern): a target is >= 30 MB/s on every one. Every count is checked equal to
Python tiktoken's and bpe-openai's before anything is timed (Python tiktoken panics with a regex
stack overflow on 10^6 spaces; there bpe-openai's count is the reference). The first long piece of a process
builds the linear counter's tables; that one-time cost is measured in a fresh process.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, best_seconds, offline_tiktoken, write_results  # noqa: E402
from bench_tokenizer import corpora  # noqa: E402

from ctxwindow import Tokenizer  # noqa: E402

SIZE = 1_000_000
PEER_MANIFEST = ROOT / "benches" / "peer_bpe" / "Cargo.toml"
TARGET = 30.0


def adversarial() -> dict[str, str]:
    rng = random.Random(18)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [w for w in (ROOT / "README.md").read_text().lower().split() if w.isalpha()]
    cjk = [chr(c) for c in range(0x4E00, 0x9FA6)]
    many_scripts = [chr(c) for c in [*range(0x61, 0x7B), *range(0xE0, 0x100), *range(0x3B1, 0x3CA),
                                     *range(0x430, 0x450), *range(0x5D0, 0x5EB), *range(0x627, 0x64B),
                                     *range(0x905, 0x93A), *range(0xAC00, 0xAC80)]]
    punctuation = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~"
    texts = {
        '"a" * 10^6': "a" * SIZE,
        "random a/b": "".join(rng.choice("ab") for _ in range(SIZE)),
        "random lowercase": "".join(rng.choice(letters) for _ in range(SIZE)),
        "words without spaces": "".join(rng.choice(words) for _ in range(SIZE // 6))[:SIZE],
        '"=" * 10^6': "=" * SIZE,
        '" " + "=" * 10^6 + "\\n"': " " + "=" * SIZE + "\n",
        '"=" and "-" runs of 700': ("=" * 700 + "-" * 700) * (SIZE // 1400),
        "random punctuation": "".join(rng.choice(punctuation) for _ in range(SIZE)),
        "spaces": " " * SIZE,
        "newlines": "\n" * SIZE,
        "spaces and newlines": "".join(rng.choice(" \n\t") for _ in range(SIZE)),
        '"1" * 10^6': "1" * SIZE,
        '"é" * 5*10^5': "é" * (SIZE // 2),
        "random CJK": "".join(rng.choice(cjk) for _ in range(SIZE // 3)),
        "random letters, 9 scripts": "".join(rng.choice(many_scripts) for _ in range(SIZE // 2)),
        "emoji run": "👍🏽" * (SIZE // 8),
        "base64 of random bytes": base64.b64encode(rng.randbytes(SIZE * 3 // 4)).decode(),
    }
    return texts


def peer_times(encoding: str, files: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Rust timings of ctxwindow-core and bpe-openai per input (the peer crate built first)."""
    target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(PEER_MANIFEST)],
                   check=True, env={**os.environ, "CARGO_TARGET_DIR": target})
    binary = Path(target) / "release" / "ctxwindow-peer-bpe"
    out = subprocess.run([str(binary), encoding, *map(str, files.values())], check=True,
                         capture_output=True, text=True).stdout
    by_file = {json.loads(line)["file"]: json.loads(line) for line in out.splitlines()}
    return {name: by_file[str(path)] for name, path in files.items()}


def first_long_piece_seconds(encoding: str) -> float:
    """Seconds of the first count of a long piece in a fresh process (the tables are built)."""
    code = ("import time\nfrom ctxwindow import Tokenizer\n"
            f"t = Tokenizer({encoding!r})\nt.count('warm up the vocabulary')\n"
            "s = 'a' * 1000\nstarted = time.perf_counter()\nt.count(s)\n"
            "print(time.perf_counter() - started)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout)


def main() -> None:
    tiktoken = offline_tiktoken()
    typical = {name: texts for name, texts in corpora().items()}
    hostile = adversarial()
    results: dict[str, Any] = {"target_mb_s": TARGET}
    table = [["encoding", "input", "MB", "ctxwindow MB/s", "tiktoken MB/s", "ratio",
              "ctxwindow-core (Rust) MB/s", "bpe-openai (Rust) MB/s", "core / bpe-openai"]]
    slowest: dict[str, tuple[float, str]] = {}
    with tempfile.TemporaryDirectory(prefix="ctxwindow-worst-") as tmp:
        inputs: dict[str, list[str]] = {**typical, **{k: [v] for k, v in hostile.items()}}
        files: dict[str, Path] = {}
        for index, (name, texts) in enumerate(inputs.items()):
            assert not any("\0" in t for t in texts), name
            files[name] = Path(tmp) / f"input{index}.txt"
            files[name].write_text("\0".join(texts), encoding="utf-8")
        for encoding in ("o200k_base", "cl100k_base"):
            ours = Tokenizer(encoding)
            reference = tiktoken.get_encoding(encoding)
            rust = peer_times(encoding, files)
            for name, texts in inputs.items():
                size = sum(len(t.encode()) for t in texts) / 1e6
                counts = [ours.count(t) for t in texts]
                assert rust[name]["tokens"] == sum(counts), f"bpe-openai count differs on {name}"
                try:
                    expected = [len(reference.encode_ordinary(t)) for t in texts]
                except BaseException as error:  # noqa: BLE001 - tiktoken panics on some input
                    # Its regex overflows the stack on 10^6 spaces; bpe-openai is the reference.
                    failure = f"{type(error).__name__}: {str(error)[:80]}"
                    results[f"{encoding}/{name}"] = {"tiktoken_error": failure}
                    expected = None
                assert expected is None or counts == expected, f"count mismatch on {name}"

                def count_ours(texts: list[str] = texts) -> None:
                    for text in texts:
                        ours.count(text)

                def count_reference(texts: list[str] = texts) -> None:
                    for text in texts:
                        reference.encode_ordinary(text)

                t_ours = best_seconds(count_ours, repeat=3, min_time=0.3)
                t_ref = (best_seconds(count_reference, repeat=3, min_time=0.3)
                         if expected is not None else float("nan"))
                core_s, bpe_s = rust[name]["ctxwindow_core_s"], rust[name]["bpe_openai_s"]
                kind = "adversarial" if name in hostile else "typical"
                row = {"kind": kind, "megabytes": size, "tokens": sum(counts),
                       "ours_mb_s": size / t_ours, "tiktoken_mb_s": size / t_ref,
                       "ratio": t_ref / t_ours, "core_mb_s": size / core_s,
                       "bpe_openai_mb_s": size / bpe_s, "core_vs_bpe_openai": bpe_s / core_s}
                results[f"{encoding}/{name}"] = {**results.get(f"{encoding}/{name}", {}), **row}
                if kind == "adversarial" and row["ours_mb_s"] < slowest.get(encoding, (1e9, ""))[0]:
                    slowest[encoding] = (row["ours_mb_s"], name)
                peer = f"{row['tiktoken_mb_s']:.1f}" if expected is not None else "fails (panic)"
                ratio = f"**{row['ratio']:.2f}x**" if expected is not None else ""
                table.append([encoding, f"{name} ({kind})", f"{size:.1f}",
                              f"{row['ours_mb_s']:.1f}", peer, ratio, f"{row['core_mb_s']:.1f}",
                              f"{row['bpe_openai_mb_s']:.1f}",
                              f"{row['core_vs_bpe_openai']:.2f}x"])
            first = first_long_piece_seconds(encoding)
            results[f"{encoding}/first long piece s"] = first
            results[f"{encoding}/slowest adversarial"] = {"mb_s": slowest[encoding][0],
                                                          "input": slowest[encoding][1]}
            table.append([encoding, "first long piece of a process (builds the tables)", "",
                          f"{first * 1000:.0f} ms once", "", "", "", "", ""])
            table.append([encoding, f"slowest adversarial: {slowest[encoding][1]}", "",
                          f"**{slowest[encoding][0]:.1f}**", "", "", "", "",
                          f"target >= {TARGET:.0f} MB/s"])
    write_results("worst_case", results, table,
                  "Exact counting, typical and adversarial text, one thread: ctxwindow vs Python "
                  "tiktoken, and ctxwindow-core vs bpe-openai in Rust (identical counts checked "
                  "first)")


if __name__ == "__main__":
    main()
