"""Benchmark: a query while the project's daemon is stopped (SIGSTOP).

On a watched copy of bench/bench_index.py's corpus (~40k documents), each
round stops the daemon, clears the back-off record, and times three whole
`ctindex search` processes: the first (it waits up to 0.5 s for the
daemon's ACK, then records the back-off, ctindex/unanswered.py) and the
next two (they skip the daemon). Beside them, in the same round, the plain
fallback: the same search on a second copy of the corpus with watching off,
which reconciles in the process exactly as a fallback does, with no daemon
to ask. Medians over ROUNDS; targets (docs/daemon.md): first ≤ 0.5 s beyond
the fallback, later ones ≤ the fallback + 5 ms.

`run()` returns the Markdown section; the daemon is resumed and stopped
afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from pathlib import Path

from bench.bench_daemon import _ctindex, _own_copy, _status, _steady, _timed_ms, _wait_clean

ROUNDS = 9
CONFIG_OFF = '{"version": 1, "watch": false}\n'


def _reason(root: Path, query: str) -> str:
    doc = json.loads(_ctindex(root, "--json", "search", query).stdout)
    return f"{doc['freshness']['mode']} ({doc['freshness']['reason']})"


def run() -> str:
    from bench.bench_index import MARKER
    from ctindex import runtime as rt
    from ctindex import unanswered
    from ctindex.policy.project import Project

    root = _own_copy("stopped")
    peer = _own_copy("stopped-peer")
    (peer / ".ct" / "index.jsonc").write_text(CONFIG_OFF)
    query = json.loads(MARKER.read_text())["vocab_top"][40]
    paths = rt.RuntimePaths.for_project(Project.at(root))
    record = unanswered.record_path(paths)
    first: list[float] = []
    later: list[float] = []
    plain: list[float] = []
    try:
        _ctindex(root, "update")
        _ctindex(peer, "update")
        _ctindex(root, "watch", "start")
        _wait_clean(root, query)
        _steady(root, query)
        _steady(peer, query)
        clean = _reason(root, query)
        labels: list[str] = []
        for _ in range(ROUNDS):
            pid = int(_status(root)["pid"])  # this round's daemon
            os.kill(pid, signal.SIGSTOP)
            try:
                record.unlink(missing_ok=True)
                first.append(_timed_ms(lambda: _ctindex(root, "search", query)))
                plain.append(_timed_ms(lambda: _ctindex(peer, "search", query)))
                later.append(_timed_ms(lambda: _ctindex(root, "search", query)))
                plain.append(_timed_ms(lambda: _ctindex(peer, "search", query)))
                later.append(_timed_ms(lambda: _ctindex(root, "search", query)))
                if not labels:
                    labels.append(_reason(root, query))
            finally:
                os.kill(pid, signal.SIGCONT)
            _wait_clean(root, query)
        resumed = _reason(root, query)
    finally:
        _ctindex(root, "watch", "stop")
    fallback_ms = statistics.median(plain)
    first_ms, later_ms = statistics.median(first), statistics.median(later)
    return "\n".join(
        [
            "## Stopped daemon (`bench/bench_stopped_daemon.py`)",
            "",
            f"Corpus of `bench_index.py`, two copies: one watched by a daemon that each "
            f"round stops (SIGSTOP, back-off record cleared), one with watching off (the "
            f"plain fallback: it reconciles in the process, no daemon to ask). Whole "
            f"`ctindex search {query}` processes, interleaved, medians of {ROUNDS} rounds "
            f"(first) and {2 * ROUNDS} (the others).",
            "",
            "| figure | stopped daemon | plain fallback | delta | target |",
            "| --- | --- | --- | --- | --- |",
            f"| first query (waits for the ACK, records the back-off) | {first_ms:.0f} ms | "
            f"{fallback_ms:.0f} ms | +{first_ms - fallback_ms:.0f} ms | ≤ +500 ms |",
            f"| later queries (skip the daemon) | {later_ms:.0f} ms | {fallback_ms:.0f} ms | "
            f"{later_ms - fallback_ms:+.0f} ms | ≤ +5 ms |",
            "",
            f"Labels: clean `{clean}`; stopped `{labels[0] if labels else '-'}`; after "
            f"SIGCONT `{resumed}`.",
            "",
        ]
    )


if __name__ == "__main__":
    t0 = time.monotonic()
    print(run())
    print(f"({time.monotonic() - t0:.0f} s)")
