"""Benchmark: the query path, `ctindex search` answered by the daemon
(ctindex/fast_entry.py, ctindex/daemon/query.py; docs/decisions/perf.md §7).

Whole processes, timed side by side in one run (each round runs every
command once, so machine load hits them alike), medians over ROUNDS:

* small project (the four OKF bundles of fixtures/okf-bundles), clean
  daemon: the `ctindex` console script (pip's wrapper) and `python -m
  ctindex` versus `python -c pass` of the same interpreter (target ≤ +10 ms);
  the same search forced onto the in-process path (CTINDEX_FAULT set: the
  client never asks the daemon then) for comparison; and what the pip wrapper
  costs by itself (`python -c "import re, sys"` versus `python -c pass`);
* the corpus of bench/bench_index.py (~40k small Markdown pages), clean
  daemon: term, term with `--json`, phrase, prefix and filter queries versus
  `rg -l -i` over the same files (target ≤ 0.1x);
* daemon RSS on that corpus after the queries (the open generation and its
  capped caches) versus the `status` ceiling.

Every daemon-answered figure is checked to have been answered by the daemon
(its `queries.answered` counter), not by the fallback.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROUNDS = 25
BIG_ROUNDS = 9
CONFIG_ON = '{"version": 1, "watch": true}\n'
HERE = Path(__file__).resolve().parent
BUNDLES = HERE.parent / "fixtures" / "okf-bundles"


def _env(**extra: str) -> dict[str, str]:
    from bench.bench_index import _ENV  # timed processes run with cached bytecode

    return {**_ENV, **extra}


def _timed_ms(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, check=False)
    return (time.perf_counter() - t0) * 1000


def _status(root: Path) -> dict[str, Any]:
    from ctindex.client.daemon_requests import request
    from ctindex.ipc.runtime_dir import RuntimePaths
    from ctindex.policy.project import Project

    reply = request(RuntimePaths.for_project(Project.at(root)), {"op": "status"}, 2.0)
    status: dict[str, Any] = reply["status"]
    return status


def _answered(root: Path) -> int:
    return int((_status(root).get("queries") or {}).get("answered", 0))


def _settle(root: Path, query: str, timeout: float = 180.0) -> None:
    """Start the daemon and wait until it answers searches itself (the config
    and the detected folders older than the racy window, the startup pass done)."""
    py = sys.executable
    subprocess.run(
        [py, "-m", "ctindex", "watch", "start"],
        cwd=root,
        env=_env(),
        capture_output=True,
        check=False,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            before = _answered(root)
            subprocess.run(
                [py, "-m", "ctindex", "search", query],
                cwd=root,
                env=_env(),
                capture_output=True,
                check=False,
            )
            if _answered(root) == before + 1:
                return
        except Exception:  # not up yet
            pass
        time.sleep(0.5)
    raise RuntimeError("the daemon never answered a search")


def _script() -> str:
    """The console script pip installed next to this interpreter."""
    found = Path(sys.executable).with_name("ctindex")
    return os.fspath(found) if found.exists() else shutil.which("ctindex") or "ctindex"


def _side_by_side(
    commands: dict[str, tuple[list[str], dict[str, str]]], cwd: Path, rounds: int
) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(rounds):
        for name, (argv, env) in commands.items():
            samples[name].append(_timed_ms(argv, cwd, env))
    return {k: statistics.median(v) for k, v in samples.items()}


def _small() -> tuple[list[str], str]:
    root = Path(tempfile.mkdtemp(prefix="ctindex-bench-query-small-"))
    py = sys.executable
    try:
        for name in sorted(p.name for p in BUNDLES.iterdir() if p.is_dir()):
            shutil.copytree(BUNDLES / name, root / "okf" / "bundles" / name)
        (root / ".git").mkdir()
        (root / ".ct").mkdir()
        (root / ".ct" / "index.jsonc").write_text(CONFIG_ON)
        time.sleep(
            2.2
        )  # past the racy window: the plan can be trusted (ctindex/policy/plan_record.py)
        _settle(root, "margin")
        docs = json.loads(
            subprocess.run(
                [py, "-m", "ctindex", "--json", "status"], cwd=root, env=_env(), capture_output=True
            ).stdout
        )["documents"]
        before = _answered(root)
        medians = _side_by_side(
            {
                "pass": ([py, "-c", "pass"], _env()),
                "wrapper": ([py, "-c", "import re, sys"], _env()),
                "script": ([_script(), "search", "margin"], _env()),
                "module": ([py, "-m", "ctindex", "search", "margin"], _env()),
                "in-process": (
                    [py, "-m", "ctindex", "search", "margin"],
                    _env(CTINDEX_FAULT="bench-none"),
                ),
            },
            root,
            ROUNDS,
        )
        answered = _answered(root) - before
    finally:
        subprocess.run(
            [py, "-m", "ctindex", "watch", "stop"],
            cwd=root,
            env=_env(),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)
    base = medians["pass"]
    lines = [
        f"Small project: the four OKF bundles ({docs} documents), clean daemon; medians of "
        f"{ROUNDS} rounds, side by side. {answered} of {2 * ROUNDS} daemon-path searches "
        "were answered by the daemon.",
        "",
        "| figure | ms | vs `python -c pass` | target |",
        "| --- | --- | --- | --- |",
        f"| `python -c pass` | {base:.1f} | - | - |",
        f"| `ctindex search margin` (pip console script) | {medians['script']:.1f} | "
        f"{medians['script'] - base:+.1f} ms | ≤ +10 ms |",
        f"| `python -m ctindex search margin` | {medians['module']:.1f} | "
        f"{medians['module'] - base:+.1f} ms | (≤ +10 ms) |",
        f"| the same, in-process path (barrier over the socket, no daemon answer) | "
        f"{medians['in-process']:.1f} | {medians['in-process'] - base:+.1f} ms | - |",
        f'| `python -c "import re, sys"` (what pip\'s wrapper adds) | '
        f"{medians['wrapper']:.1f} | {medians['wrapper'] - base:+.1f} ms | - |",
        "",
    ]
    return lines, f"{medians['script'] - base:.1f}"


def _big() -> list[str]:
    from bench.bench_daemon import _own_copy
    from bench.bench_index import MARKER

    root = _own_copy("query")
    py = sys.executable
    rg = shutil.which("rg")
    top = json.loads(MARKER.read_text())["vocab_top"]
    term, phrase, prefix = top[40], f"{top[3]} {top[5]}", top[60][:3]
    # (label, our words, rg's pattern)
    cases = [
        (f"`{term}`", ["search", term], term),
        (f"`--json {term}`", ["--json", "search", term], term),
        (f'`"{phrase}"` (phrase)', ["search", f'"{phrase}"'], phrase),
        (f"`{prefix}*` (prefix; rg: the bare substring)", ["search", f"{prefix}*"], prefix),
        (f"`type:Policy {term}` (filter; rg: the term)", ["search", "type:Policy", term], term),
    ]
    try:
        subprocess.run(
            [py, "-m", "ctindex", "update"], cwd=root, env=_env(), capture_output=True, check=False
        )
        _settle(root, term)
        before = _answered(root)
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "pass": ([py, "-c", "pass"], _env())
        }
        for label, words, pattern in cases:
            commands[label] = ([_script(), *words], _env())
            if rg:
                commands["rg " + label] = ([rg, "-l", "-i", pattern, "kb"], _env())
        medians = _side_by_side(commands, root, BIG_ROUNDS)
        answered = _answered(root) - before
        time.sleep(1.5)  # a heartbeat samples RSS after the queries
        status = _status(root)
        docs = json.loads(
            subprocess.run(
                [py, "-m", "ctindex", "--json", "status"], cwd=root, env=_env(), capture_output=True
            ).stdout
        )["documents"]
    finally:
        subprocess.run(
            [py, "-m", "ctindex", "watch", "stop"],
            cwd=root,
            env=_env(),
            capture_output=True,
            check=False,
        )
    lines = [
        f"Corpus of `bench_index.py` ({docs:,} documents), clean daemon, the console script; "
        f"medians of {BIG_ROUNDS} rounds side by side with `rg -l -i` (ripgrep: `apt-get "
        f"install ripgrep`) and `python -c pass` ({medians['pass']:.1f} ms). {answered} of "
        f"{BIG_ROUNDS * len(cases)} searches were answered by the daemon.",
        "",
        "| query | ctindex | `rg -l -i` | ratio | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, _, _ in cases:
        ours = medians[label]
        theirs = medians.get("rg " + label)
        lines.append(
            f"| {label} | {ours:.1f} ms | "
            + (
                f"{theirs:.0f} ms | {ours / theirs:.3f}x | ≤ 0.1x |"
                if theirs
                else "- | - | ≤ 0.1x |"
            )
        )
    rss, ceiling = status.get("rss_bytes"), status.get("memory_ceiling_bytes")
    if isinstance(rss, int) and isinstance(ceiling, int):
        lines += [
            "",
            f"Daemon RSS after the queries: {rss / 2**20:.1f} MiB "
            f"({rss / max(docs, 1):.0f} B per document), `status` ceiling "
            f"{ceiling / 2**20:.0f} MiB.",
        ]
    lines.append("")
    return lines


def run() -> str:
    small, _ = _small()
    return "\n".join(["## Query path (`bench/bench_query.py`)", "", *small, *_big()])


if __name__ == "__main__":
    print(run())
