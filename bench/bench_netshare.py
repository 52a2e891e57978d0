"""Benchmark: indexed queries on a network share versus `find -printf` through the same mount.

The share is the test rig of tests/netshare.py: sshfs over loopback in a
private namespace, a delaying proxy adding DELAY_MS each way, mounted with
the client caches off (the configuration docs/network-shares.md recommends
for freshness: every stat reaches the server). ~600 OKF concepts (the four
fixture bundles, eight times). Side by side, interleaved, in one run: the
nothing-changed query with the serial walk (`CTINDEX_WALK_THREADS=0`) and
with the parallel walk (the default there), `find -type f -printf`, and a
query after one server-side change. Each figure is a whole process, as a
user runs it (interpreter start included). Needs root, FUSE, sshfs, sshd.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import BUNDLES, CORPUS
from tests.netshare import DELAY_MS, RigUnavailable, rig, unavailable

COPIES = 8
RUNS = 5
WORD = "zqxv7benchnone"


def _timed(r: object, argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = r.run(argv, env=env)  # type: ignore[attr-defined]
    return (time.perf_counter() - t0) * 1000, done.stdout


def run() -> str:
    head = "## Network share: nothing-changed query vs `find -printf` through the same mount"
    why = unavailable()
    if why:
        return f"{head}\n\nskipped: {why}\n"
    work = Path(tempfile.mkdtemp(prefix="ctindex-bench-net-"))
    try:
        with rig(work / "rig") as r:
            server = r.export / "proj"
            for i in range(COPIES):
                for name in BUNDLES:
                    shutil.copytree(CORPUS / name, server / "okf" / "bundles" / f"{name}_{i}")
            (server / ".git").mkdir()
            concepts = sum(1 for p in server.rglob("*.md") if p.name not in ("index.md", "log.md"))
            client = r.mount("host1") / "proj"
            base = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
            serial_env = {**base, "CTINDEX_WALK_THREADS": "0"}
            query = [sys.executable, "-m", "ctindex", "-C", str(client), "--json", "search", WORD]
            find = ["find", str(client), "-type", "f", "-printf", r"%s %T@ %i\n"]
            r.run(query, env=base)  # builds the index (not measured)
            lstat = [
                sys.executable,
                "-c",
                "import os, sys, time\nt = time.perf_counter()\n"
                "for _ in range(100): os.lstat(sys.argv[1])\n"
                "print((time.perf_counter() - t) * 10)",
                str(client / ".git"),
            ]
            rtt = float(r.run(lstat).stdout.strip() or "nan")
            serial: list[float] = []
            parallel: list[float] = []
            finds: list[float] = []
            changed: list[float] = []
            reasons: set[str] = set()
            for i in range(RUNS):
                finds.append(_timed(r, find, base)[0])
                serial.append(_timed(r, query, serial_env)[0])
                ms, out = _timed(r, query, base)
                parallel.append(ms)
                reasons.add(json.loads(out)["freshness"]["reason"].split(":")[0])
                note = server / "okf" / "bundles" / f"{BUNDLES[0]}_0" / "zz_bench.md"
                note.write_text(f"# Bench\n\nchange {i} {'x' * i}\n")
                changed.append(_timed(r, query, base)[0])
    except RigUnavailable as exc:
        return f"{head}\n\nskipped: {exc}\n"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    f_ms = statistics.median(finds)
    s_ms, p_ms, c_ms = (statistics.median(x) for x in (serial, parallel, changed))

    def row(name: str, ms: float, all_ms: list[float], target: str = "") -> str:
        runs = ", ".join(f"{t:.0f}" for t in all_ms)
        return f"| {name} | {ms:.0f} ms | {ms / f_ms:.2f}x {target} | {runs} |"

    return "\n".join(
        [
            head,
            "",
            f"sshfs over loopback through a proxy adding {DELAY_MS:g} ms each way, caches off",
            f"(`{','.join(('dir_cache=no', 'attr_timeout=0', 'entry_timeout=0'))}`); "
            f"{concepts} concepts; one `lstat` through the mount costs {rtt:.1f} ms here",
            "(several sftp round trips on a loaded machine, so more than the 2 ms of added delay).",
            f"Medians of {RUNS} interleaved runs, whole processes; freshness reason: "
            f"`{', '.join(sorted(reasons))}`.",
            "",
            "| run | median | vs find | all runs (ms) |",
            "| --- | --- | --- | --- |",
            row("`find -type f -printf '%s %T@ %i\\n'`", f_ms, finds),
            row("query, nothing changed, serial walk", s_ms, serial),
            row(
                "query, nothing changed, parallel walk (default)",
                p_ms,
                parallel,
                "(target <= 1.0x, moonshot <= 0.25x)",
            ),
            row("query after one server-side change", c_ms, changed),
            "",
        ]
    )


if __name__ == "__main__":
    print(run())
