"""Benchmark: a query while the project's daemon is stopped (SIGSTOP).

On a watched copy of bench/bench_index.py's corpus (~40k documents), each
round stops the daemon, clears the back-off record, and times three whole
`ctindex search` processes: the first (it waits up to 0.5 s for the
daemon's ACK, then records the back-off, ctindex/client/unanswered.py) and the
next two (they skip the daemon). Beside them, in the same round, the plain
fallback: the same search on a second watched copy where no daemon runs and
none may start (`CI=true`, docs/daemon.md "CI mode"): the same code path,
reconciling in the process, with no daemon to ask. Medians over ROUNDS;
targets (docs/daemon.md): first ≤ 0.5 s beyond the fallback, later ones ≤
the fallback + 5 ms.

`run()` returns the Markdown section; the daemon is resumed and stopped
afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.bench_daemon import _ctindex, _own_copy, _status, _steady, _timed_ms, _wait_clean

ROUNDS = 15
CONFIG_ON = '{"version": 1, "watch": true}\n'


def _reason(root: Path, query: str) -> str:
    doc = json.loads(_ctindex(root, "--json", "search", query).stdout)
    return f"{doc['freshness']['mode']} ({doc['freshness']['reason']})"


def _search_ms(
    root: Path, query: str, labels: list[str], *, no_daemon: bool = False
) -> tuple[float, float]:
    """One timed `--json search` process: wall and CPU milliseconds (on a
    shared machine the wall time also holds the waits for a core, the CPU
    time does not); its freshness label is kept. `no_daemon`: CI mode, no
    daemon is started (the plain fallback)."""
    from bench.bench_index import _ENV

    env = {**_ENV, "CI": "true"} if no_daemon else _ENV
    argv = [sys.executable, "-m", "ctindex", "-C", str(root), "--json", "search", query]
    done: list[bytes] = []
    before = _children_cpu_s()
    ms = _timed_ms(
        lambda: done.append(subprocess.run(argv, capture_output=True, env=env, check=False).stdout)
    )
    cpu = (_children_cpu_s() - before) * 1000
    fresh = json.loads(done[0])["freshness"]
    labels.append(f"{fresh['mode']} ({fresh['reason']}, reconcile {fresh['reconcile_ms']} ms)")
    return ms, cpu


def _children_cpu_s() -> float:
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run() -> str:
    from bench.bench_index import MARKER
    from ctindex.client import unanswered
    from ctindex.ipc.runtime_dir import RuntimePaths
    from ctindex.policy.project import Project

    root = _own_copy("stopped")
    peer = _own_copy("stopped-peer")
    (peer / ".ct" / "index.jsonc").write_text(CONFIG_ON)
    query = json.loads(MARKER.read_text())["vocab_top"][40]
    paths = RuntimePaths.for_project(Project.at(root))
    record = unanswered.record_path(paths)
    first: list[tuple[float, float]] = []
    later: list[tuple[float, float]] = []
    plain: list[tuple[float, float]] = []
    try:
        _ctindex(root, "update")
        _ctindex(peer, "watch", "stop")  # none runs there: the plain fallback
        _ctindex(peer, "update")
        _ctindex(root, "watch", "start")
        _wait_clean(root, query)
        _steady(root, query)
        _search_ms(peer, query, [], no_daemon=True)  # (never `_steady`: it starts a daemon)
        clean = _reason(root, query)
        labels: list[str] = []
        peer_labels: list[str] = []
        for _ in range(ROUNDS):
            pid = int(_status(root)["pid"])  # this round's daemon
            os.kill(pid, signal.SIGSTOP)
            try:
                record.unlink(missing_ok=True)
                first.append(_search_ms(root, query, labels))
                plain.append(_search_ms(peer, query, peer_labels, no_daemon=True))
                later.append(_search_ms(root, query, labels))
                plain.append(_search_ms(peer, query, peer_labels, no_daemon=True))
                later.append(_search_ms(root, query, labels))
            finally:
                os.kill(pid, signal.SIGCONT)
            _wait_clean(root, query)
        resumed = _reason(root, query)
    finally:
        _ctindex(root, "watch", "stop")
    fallback_ms, fallback_cpu = _medians(plain)
    (first_ms, first_cpu), (later_ms, later_cpu) = _medians(first), _medians(later)
    return "\n".join(
        [
            "## Stopped daemon (`bench/bench_stopped_daemon.py`)",
            "",
            f"Corpus of `bench_index.py`, two watched copies: one with a daemon that each "
            f"round stops (SIGSTOP, back-off record cleared), one where no daemon runs or "
            f"starts (`CI=true`: the plain fallback, reconciling in the process). Whole "
            f"`ctindex search {query}` processes, interleaved, medians of {ROUNDS} rounds "
            f"(first) and {2 * ROUNDS} (the others); wall time, and the processes' CPU time.",
            "",
            "| figure | stopped daemon | plain fallback | delta | target |",
            "| --- | --- | --- | --- | --- |",
            f"| first query (waits for the ACK, records the back-off), wall | {first_ms:.0f} ms | "
            f"{fallback_ms:.0f} ms | {first_ms - fallback_ms:+.0f} ms | ≤ +500 ms |",
            f"| later queries (skip the daemon), wall | {later_ms:.0f} ms | "
            f"{fallback_ms:.0f} ms | {later_ms - fallback_ms:+.0f} ms | ≤ +5 ms |",
            f"| first query, CPU | {first_cpu:.0f} ms | {fallback_cpu:.0f} ms | "
            f"{first_cpu - fallback_cpu:+.0f} ms | |",
            f"| later queries, CPU | {later_cpu:.0f} ms | {fallback_cpu:.0f} ms | "
            f"{later_cpu - fallback_cpu:+.0f} ms | |",
            "",
            f"Labels: clean `{clean}`; stopped, first query `{labels[0]}`, a later one "
            f"`{labels[1]}`; plain `{peer_labels[0]}`; after SIGCONT `{resumed}`. Median "
            f"reconcile inside the processes: stopped {_median_reconcile(labels):.0f} ms, "
            f"plain {_median_reconcile(peer_labels):.0f} ms.",
            "",
        ]
    )


def _medians(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def _median_reconcile(labels: list[str]) -> float:
    found = [x.rpartition("reconcile ")[2].split()[0] for x in labels]
    return statistics.median([float(x) for x in found if x != "None"] or [0.0])


if __name__ == "__main__":
    t0 = time.monotonic()
    print(run())
    print(f"({time.monotonic() - t0:.0f} s)")
