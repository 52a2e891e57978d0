"""Benchmark: the Python API's in-process `Index.search` (docs/api.md).

On bench_daemon.py's copy of the generated corpus (bench/bench_index.py,
~40k documents), one long-lived `ctindex.Index`:

* with a clean daemon (watching on; every query still asks the barrier);
* with watching off and nothing changed (every query still reconciles:
  one full stat walk of the corpus).

Reported: p50 and p95 of RUNS queries cycling over a few query shapes, the
same figures for a `ctindex search` process with a clean daemon for
comparison, and the share of a query spent proving freshness. `run()`
returns the Markdown section; the config is restored afterwards.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

RUNS = 200
PROCESS_RUNS = 15


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def measure(root: object, queries: list[str], runs: int = RUNS) -> dict[str, float]:
    import ctindex

    with ctindex.Index(root) as index:  # type: ignore[arg-type]
        for q in queries:
            index.search(q)  # warm: first open of the generation, plan
        opened = index.opened
        fresh: list[float] = []
        modes: set[str] = set()

        def one(i: list[int] = [0]) -> None:  # noqa: B006 (a counter)
            result = index.search(queries[i[0] % len(queries)])
            i[0] += 1
            fresh.append(result.timings.fresh_ms)
            modes.add(result.freshness.mode)

        samples = _timed(one, runs)
        reopened = index.opened - opened
    return {
        "p50": statistics.median(samples),
        "p95": _pct(samples, 0.95),
        "fresh_p50": statistics.median(fresh),
        "reopened": reopened,
        "mode": ",".join(sorted(modes)),
    }  # type: ignore[dict-item]


def run() -> str:
    from bench.bench_daemon import CONFIG_ON, _ctindex, _own_copy, _steady, _wait_clean
    from bench.bench_index import MARKER

    root = _own_copy()
    top = json.loads(MARKER.read_text())["vocab_top"]
    queries = [
        top[40],
        f'"{top[3]} {top[5]}"',
        f"{top[60][:3]}*",
        f"{top[10]} -{top[11]}",
        f"{top[20]} OR {top[21]}",
    ]
    cfg = root / ".ct" / "index.jsonc"
    original = cfg.read_text()
    try:
        cfg.write_text(CONFIG_ON)
        _ctindex(root, "update")
        _ctindex(root, "watch", "start")
        _wait_clean(root, queries[0])
        _steady(root, queries[0])
        daemon = measure(root, queries)
        process = _timed(lambda: _ctindex(root, "search", queries[0]), PROCESS_RUNS)
        _ctindex(root, "watch", "stop")
        cfg.write_text('{"version": 1, "watch": false}\n')
        _ctindex(root, "update")
        off = measure(root, queries, runs=max(20, RUNS // 10))
        docs = json.loads(_ctindex(root, "--json", "status").stdout)["documents"]
    finally:
        _ctindex(root, "watch", "stop")
        cfg.write_text(original)
    rows = [
        "## Python API (`bench/bench_api.py`)",
        "",
        f"One long-lived `ctindex.Index` on bench_index.py's corpus, {docs:,} indexed "
        f"documents; queries cycle over {len(queries)} shapes (word, phrase, prefix, NOT, OR). "
        "Every query proves freshness first (docs/api.md).",
        "",
        "| figure | p50 | p95 | of which freshness (p50) | generations reopened |",
        "| --- | --- | --- | --- | --- |",
        f"| `Index.search`, clean daemon ({RUNS} queries; {daemon['mode']}) | "
        f"{daemon['p50']:.2f} ms | {daemon['p95']:.2f} ms | {daemon['fresh_p50']:.2f} ms | "
        f"{int(daemon['reopened'])} |",
        f"| `Index.search`, watching off, nothing changed ({max(20, RUNS // 10)} queries; "
        f"{off['mode']}) | {off['p50']:.1f} ms | {off['p95']:.1f} ms | "
        f"{off['fresh_p50']:.1f} ms | {int(off['reopened'])} |",
        f"| `ctindex search` process, clean daemon ({PROCESS_RUNS} runs), for comparison | "
        f"{statistics.median(process):.1f} ms | {_pct(process, 0.95):.1f} ms | | |",
        "",
    ]
    return "\n".join(rows)
