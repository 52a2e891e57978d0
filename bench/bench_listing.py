"""Benchmark: `Index.concepts` (the MCP `list_concepts` tool, docs/api.md)
beside `Index.search` with the same filter, on bench/bench_index.py's
generated corpus (~40k documents), one long-lived `ctindex.Index`, watching
off (so every call first reconciles: one stat walk, the same for both).

Reported: the median of RUNS calls of each shape, and its ratio to the
filter-only search of the same filter (`type:Metric`, 50 results, which is
ordered by path past 500 matches: docs/search.md). `run()` returns the
Markdown section.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

RUNS = 15


def _median_ms(fn: Callable[[], object], runs: int = RUNS) -> float:
    fn()  # the first call opens the generation
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def run() -> str:
    import ctindex
    from bench.bench_index import ROOT, make_corpus

    root = make_corpus(ROOT)
    with ctindex.Index(root) as index:
        index.update()
        peer = _median_ms(lambda: index.search("type:Metric", limit=50))
        total = index.concepts(limit=1).total
        shapes = {
            "first page, no filter (50)": lambda: index.concepts(limit=50),
            "first page, type Metric (50)": lambda: index.concepts(type="Metric", limit=50),
            "page at offset 5000, type Metric (50)": lambda: index.concepts(
                type="Metric", offset=5000, limit=50
            ),
            "ID prefix d010/ (50)": lambda: index.concepts(prefix="d010/", limit=50),
        }
        rows = [(name, _median_ms(fn)) for name, fn in shapes.items()]
    lines = [
        "## Listing concepts (`Index.concepts`, MCP `list_concepts`)",
        "",
        f"{total} concepts, watching off (each call reconciles first), median of {RUNS}.",
        "",
        "| call | median ms | / search `type:Metric` |",
        "| --- | --- | --- |",
        f"| search `type:Metric` (50 results) | {peer:.1f} | 1.00 |",
    ]
    lines += [f"| {name} | {ms:.1f} | {ms / peer:.2f} |" for name, ms in rows]
    return "\n".join(lines) + "\n"
