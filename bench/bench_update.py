"""Benchmark: a nothing-changed `ctindex update` of 200k files, as whole
processes, with and without the native scan, versus `find -printf`
(docs/targets.md; docs/decisions/native.md).

The three commands run interleaved, round after round, so load from other
processes on the shared cores hits them alike; the table reports medians and
the median of the per-round ratios. Peak RSS of `rebuild` and `update` is
each process's own (a wrapper process runs one command and reads its
children's ru_maxrss). The project (2,000 folders of 100 small OKF
documents) is generated once into the temp folder and reused.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import corpus_marker
from ctindex.reconciler import DEFAULT_GRANULARITY_NS

FILES = 200_000
DIRS = 2_000
RUNS = 7
ROOT = Path(tempfile.gettempdir()) / f"ctindex-bench-update-{FILES}"
FIND = ["find", "-type", "f", "-printf", r"%s %T@ %i\n"]
# Installed code runs with cached bytecode (bench/bench_index.py says why).
BASE_ENV = {
    k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "CTINDEX_PURE")
}
_PURE_ENV = {**BASE_ENV, "CTINDEX_PURE": "1"}
# Runs `argv`, then prints its own children's peak RSS (KiB on Linux).
_RSS = (
    "import resource, subprocess, sys; "
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def make_project(root: Path = ROOT) -> Path:
    params = {"files": FILES, "dirs": DIRS, "generator": 1}
    if corpus_marker.reuse(root, root / "kb", params) is not None:
        return root
    (root / ".git").mkdir(parents=True, exist_ok=True)
    (root / ".ct").mkdir(exist_ok=True)
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}\n')
    (root / "kb").mkdir(exist_ok=True)
    (root / "kb" / "index.md").write_text("# bench\n")
    per = FILES // DIRS
    for d in range(DIRS):
        folder = root / "kb" / f"g{d // 50:03d}" / f"d{d:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        for f in range(per):
            (folder / f"f{f:03d}.md").write_text(
                f"---\ntitle: Note {d} {f}\n---\n\n# note {d}/{f}\nbody text w{d}x{f}\n"
            )
    corpus_marker.seal(root, root / "kb", params)
    return root


def _ctindex(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ctindex", "-C", str(root), *args]


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env, cwd=cwd)
    return (time.perf_counter() - t0) * 1000


def _peak_rss_mib(argv: list[str], env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _RSS, *argv], capture_output=True, text=True, check=True, env=env
    )
    return int(out.stdout.split()[-1]) / 1024


def settle(root: Path, env: dict[str, str]) -> None:
    """Two updates past the racy-clean window: the first re-reads the files
    the rebuild read too close to their stamps and records them."""
    time.sleep(DEFAULT_GRANULARITY_NS / 1e9 + 0.2)
    for _ in range(2):
        # Its notes ("only file metadata changed") are expected here; a
        # failure still raises, with them in the error.
        subprocess.run(_ctindex(root, "update"), capture_output=True, check=True, env=env)


def run() -> str:
    root = make_project()
    native = (
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from ctindex.reconciler import native; print(native.module() is not None)",
            ],
            capture_output=True,
            text=True,
            check=True,
            env=BASE_ENV,
        ).stdout.strip()
        == "True"
    )
    rebuild_pure_rss = _peak_rss_mib(_ctindex(root, "rebuild"), _PURE_ENV)
    rebuild_rss = _peak_rss_mib(_ctindex(root, "rebuild"), BASE_ENV)
    settle(root, BASE_ENV)
    report = json.loads(
        subprocess.run(
            _ctindex(root, "--json", "update"),
            capture_output=True,
            text=True,
            check=True,
            env=BASE_ENV,
        ).stdout
    )
    if report["added"] or report["changed"] or report["removed"] or report["published"]:
        raise RuntimeError(f"tree changed during the benchmark: {report}")
    update_rss = _peak_rss_mib(_ctindex(root, "update"), BASE_ENV)
    pure_rss = _peak_rss_mib(_ctindex(root, "update"), _PURE_ENV)
    timed(FIND, BASE_ENV, root)  # warm the dentry/inode caches for every side alike

    nat_ms: list[float] = []
    pure_ms: list[float] = []
    find_ms: list[float] = []
    for _ in range(RUNS):  # interleaved: a burst of outside load hits all three
        nat_ms.append(timed(_ctindex(root, "update"), BASE_ENV))
        pure_ms.append(timed(_ctindex(root, "update"), _PURE_ENV))
        find_ms.append(timed(FIND, BASE_ENV, root))
    med = statistics.median
    nat, pure, fnd = med(nat_ms), med(pure_ms), med(find_ms)
    pair_nat = med(n / f for n, f in zip(nat_ms, find_ms, strict=True))
    pair_pure = med(p / f for p, f in zip(pure_ms, find_ms, strict=True))

    def runs(ts: list[float]) -> str:
        return ", ".join(f"{t:.0f}" for t in ts)

    which = "native scan" if native else "**extension not built: pure path both times**"
    lines = [
        "## Nothing-changed `update` vs `find` (`bench/bench_update.py`)",
        "",
        f"Project: {report['documents']:,} documents in {DIRS:,} folders "
        f"({report['entries_visited']:,} entries; {root}). Whole processes, "
        f"{RUNS} interleaved rounds, medians; `update` uses the {which}.",
        "",
        "| figure | ctindex | `find -type f -printf '%s %T@ %i\\n'` | ratio "
        "(of medians / median of per-round) | target |",
        "| --- | --- | --- | --- | --- |",
        f"| `update`, nothing changed, native | {nat:.0f} ms | {fnd:.0f} ms | "
        f"{nat / fnd:.2f}x / {pair_nat:.2f}x | ≤ 1.3x |",
        f"| `update`, nothing changed, pure (`CTINDEX_PURE=1`) | {pure:.0f} ms | {fnd:.0f} ms | "
        f"{pure / fnd:.2f}x / {pair_pure:.2f}x | (reported) |",
        "",
        "| peak RSS | MiB |",
        "| --- | --- |",
        f"| `rebuild` ({report['documents']:,} documents), native | {rebuild_rss:.0f} |",
        f"| `rebuild` ({report['documents']:,} documents), pure | {rebuild_pure_rss:.0f} |",
        f"| `update`, nothing changed, native | {update_rss:.0f} |",
        f"| `update`, nothing changed, pure | {pure_rss:.0f} |",
        "",
        f"Runs (ms): native {runs(nat_ms)}; pure {runs(pure_ms)}; find {runs(find_ms)}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
