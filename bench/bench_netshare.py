"""Benchmark: indexed queries on a network share versus `find -printf` through the same mount.

The share is the test rig of tests/netshare.py: sshfs over loopback in a
private namespace, a delaying proxy adding DELAY_MS each way, mounted with
the client caches off (the configuration docs/network-shares.md recommends
for freshness: every stat reaches the server). ~600 OKF concepts (the four
fixture bundles, eleven times). Side by side, interleaved, in one run:

* without a daemon on the share's host: the nothing-changed query with the
  serial walk (`CTINDEX_WALK_THREADS=0`) and with the parallel walk (the
  default there), and a query after one server-side change;
* with the host's daemon (`ctindex watch start` on the export folder, where
  the project is local): the nothing-changed query, a query right after
  a change made through a second mount (another host), and a
  nothing-changed `ctindex update` run by the host's daemon beside the
  same update written over the share (`CTINDEX_SHARE_WRITE_HERE=1`);
* `find -type f -printf` through the mount, the peer of every row.

Then the scale rows: the same with the host's daemon at ~6,000 concepts
(the query should not grow with the tree; `find` does). Each figure is a
whole process, as a user runs it (interpreter start included). Needs root,
FUSE, sshfs, sshd.
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
from pathlib import Path

from tests.conftest import BUNDLES, CORPUS
from tests.netshare import DELAY_MS, Rig, RigUnavailable, rig, unavailable

COPIES = 11  # x 53 concepts
SCALE_COPIES = 113
RUNS = 5
SCALE_RUNS = 3
WORD = "zqxv7benchnone"
# 0: leave out the rows at ~6,000 concepts (`find` alone takes minutes there).
SCALE_ENV = "CTINDEX_BENCH_NET_SCALE"
SCALE = os.environ.get(SCALE_ENV, "1") != "0"
BASE_ENV = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}


def _timed(r: Rig, argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = r.run(argv, env=env)
    return (time.perf_counter() - t0) * 1000, done.stdout


def _reason(out: str) -> str:
    reason = json.loads(out)["freshness"]["reason"] or ""
    # "share host vm, barrier 12 ms" -> "share host vm"; the walk's cost is per run.
    reason = reason.split(", barrier")[0].split(": reconciled")[0]
    return reason.split(" (")[0] + reason[reason.index(");") + 1 :] if " (" in reason else reason


def _project(r: Rig, copies: int) -> tuple[Path, int]:
    server = r.export / f"proj{copies}"
    for i in range(copies):
        for name in BUNDLES:
            shutil.copytree(CORPUS / name, server / "okf" / "bundles" / f"{name}_{i}")
    (server / ".git").mkdir()
    concepts = sum(1 for p in server.rglob("*.md") if p.name not in ("index.md", "log.md"))
    return server, concepts


def _host_daemon(server: Path, action: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(server), "watch", action],
        capture_output=True,
        text=True,
        env=BASE_ENV,
        timeout=600,
    )
    if action == "start" and done.returncode != 0:
        raise RuntimeError(f"host daemon did not start: {done.stdout}{done.stderr}")


def _with_host(
    r: Rig,
    server: Path,
    runs: int,
    rows: dict[str, list[float]],
    reasons: set[str],
    updates: bool = False,
) -> None:
    """Interleaved: find, the nothing-changed query, a change through the
    second mount and the query right after it (the host's daemon running)."""
    c1, c2 = r.mounts["host1"] / server.name, r.mounts["host2"] / server.name
    query = [sys.executable, "-m", "ctindex", "-C", str(c1), "--json", "search", WORD]
    find = ["find", str(c1), "-type", "f", "-printf", r"%s %T@ %i\n"]
    update = [sys.executable, "-m", "ctindex", "-C", str(c1), "--json", "update"]
    note = c2 / "okf" / "bundles" / f"{BUNDLES[0]}_0" / "zz_bench_remote.md"
    _host_daemon(server, "start")
    try:
        r.run(query, env=BASE_ENV)  # the host's first pass done, this process's caches warm
        for i in range(runs):
            rows["find"].append(_timed(r, find, BASE_ENV)[0])
            ms, out = _timed(r, query, BASE_ENV)
            rows["host"].append(ms)
            reasons.add(_reason(out))
            write = "import sys; open(sys.argv[1], 'w').write(sys.argv[2])"
            text = f"# Remote\n\nchange {i} {'x' * i}\n"
            r.run([sys.executable, "-c", write, str(note), text], env=BASE_ENV)
            ms, out = _timed(r, query, BASE_ENV)
            rows["host_changed"].append(ms)
            reasons.add(_reason(out))
            if updates:  # nothing changed since the query: the same update both ways
                ms, out = _timed(r, update, BASE_ENV)
                assert json.loads(out).get("share_host"), out
                rows["update_host"].append(ms)
                here = {**BASE_ENV, "CTINDEX_SHARE_WRITE_HERE": "1"}
                ms, out = _timed(r, update, here)
                assert not json.loads(out).get("share_host"), out
                rows["update_here"].append(ms)
                # Once more: its file table now holds this mount's inode
                # numbers, so only the walk is left (no re-read).
                rows["update_here_again"].append(_timed(r, update, here)[0])
                # The host vouches only for what it built or checked: the
                # first query after a client wrote the index itself pays
                # for that check. Its own row, so that the next round's
                # nothing-changed query is the steady one.
                rows["host_after_here"].append(_timed(r, query, BASE_ENV)[0])
    finally:
        _host_daemon(server, "stop")


def _without_host(
    r: Rig, server: Path, runs: int, rows: dict[str, list[float]], reasons: set[str]
) -> None:
    c1 = r.mounts["host1"] / server.name
    query = [sys.executable, "-m", "ctindex", "-C", str(c1), "--json", "search", WORD]
    find = ["find", str(c1), "-type", "f", "-printf", r"%s %T@ %i\n"]
    serial_env = {**BASE_ENV, "CTINDEX_WALK_THREADS": "0"}
    r.run(query, env=BASE_ENV)  # the walk after the host daemon: timed below (after_host)
    for i in range(runs):
        rows["find"].append(_timed(r, find, BASE_ENV)[0])
        rows["serial"].append(_timed(r, query, serial_env)[0])
        ms, out = _timed(r, query, BASE_ENV)
        rows["parallel"].append(ms)
        reasons.add(_reason(out))
        note = server / "okf" / "bundles" / f"{BUNDLES[0]}_0" / "zz_bench.md"
        note.write_text(f"# Bench\n\nchange {i} {'x' * i}\n")
        rows["changed"].append(_timed(r, query, BASE_ENV)[0])
        # The host indexes on its own disk (its inode numbers, its
        # nanoseconds): the client's next walk meets every record so.
        subprocess.run(
            [sys.executable, "-m", "ctindex", "-C", str(server), "update"],
            capture_output=True,
            env=BASE_ENV,
            timeout=600,
            check=True,
        )
        rows["after_host"].append(_timed(r, query, BASE_ENV)[0])
        mine = c1 / "okf" / "bundles" / f"{BUNDLES[0]}_0" / "zz_bench_client.md"
        write = "import sys; open(sys.argv[1], 'w').write(sys.argv[2])"
        r.run([sys.executable, "-c", write, str(mine), f"# Mine\n\nedit {i} {'y' * i}\n"])
        rows["client_edit"].append(_timed(r, query, BASE_ENV)[0])


def _table(rows: dict[str, list[float]], names: list[tuple[str, str, str]]) -> list[str]:
    f_ms = statistics.median(rows["find"])
    out = ["| run | median | vs find | all runs (ms) |", "| --- | --- | --- | --- |"]
    for key, name, target in [("find", "`find -type f -printf '%s %T@ %i\\n'`", ""), *names]:
        ms = statistics.median(rows[key])
        runs = ", ".join(f"{t:.0f}" for t in rows[key])
        out.append(f"| {name} | {ms:.0f} ms | {ms / f_ms:.3f}x {target} | {runs} |")
    return out


def _ratio(rows: dict[str, list[float]], here: str = "update_here") -> float:
    return statistics.median(rows["update_host"]) / statistics.median(rows[here])


def run() -> str:
    head = "## Network share: queries vs `find -printf` through the same mount"
    why = unavailable()
    if why:
        return f"{head}\n\nskipped: {why}\n"
    work = Path(tempfile.mkdtemp(prefix="ctindex-bench-net-"))
    rows: dict[str, list[float]] = {
        k: []
        for k in (
            "find",
            "serial",
            "parallel",
            "changed",
            "after_host",
            "client_edit",
            "host",
            "host_changed",
            "update_host",
            "update_here",
            "update_here_again",
            "host_after_here",
        )
    }
    scale: dict[str, list[float]] = {k: [] for k in ("find", "host", "host_changed")}
    reasons: set[str] = set()
    try:
        with rig(work / "rig") as r:
            server, concepts = _project(r, COPIES)
            r.mount("host1")
            r.mount("host2")
            lstat = [
                sys.executable,
                "-c",
                "import os, sys, time\nt = time.perf_counter()\n"
                "for _ in range(100): os.lstat(sys.argv[1])\n"
                "print((time.perf_counter() - t) * 10)",
                str(r.mounts["host1"] / server.name / ".git"),
            ]
            rtt = float(r.run(lstat).stdout.strip() or "nan")
            # `find` runs beside both halves; its median is over all of them.
            _with_host(r, server, RUNS, rows, reasons, updates=True)
            _without_host(r, server, RUNS, rows, reasons)
            big_concepts = 0
            if SCALE:
                big, big_concepts = _project(r, SCALE_COPIES)
                _with_host(r, big, SCALE_RUNS, scale, reasons)
    except RigUnavailable as exc:
        return f"{head}\n\nskipped: {exc}\n"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return "\n".join(
        [
            head,
            "",
            f"sshfs over loopback through a proxy adding {DELAY_MS:g} ms each way, caches off",
            f"(`{','.join(('dir_cache=no', 'attr_timeout=0', 'entry_timeout=0'))}`); "
            f"one `lstat` through the mount costs {rtt:.1f} ms here",
            "(several sftp round trips on a loaded machine, so more than the 2 ms of added delay).",
            f"Medians of {RUNS} interleaved runs ({SCALE_RUNS} at scale), whole processes; "
            f"freshness reasons: `{'`, `'.join(sorted(reasons))}`.",
            "",
            f"{concepts} concepts:",
            "",
            *_table(
                rows,
                [
                    ("host", "query, nothing changed, share host's daemon", "(target <= 0.05x)"),
                    (
                        "host_changed",
                        "query right after a change through another mount, share host's daemon",
                        "(target <= 0.1x)",
                    ),
                    ("serial", "query, nothing changed, no host daemon, serial walk", ""),
                    (
                        "parallel",
                        "query, nothing changed, no host daemon, parallel walk (default)",
                        "(target <= 0.8x)",
                    ),
                    (
                        "changed",
                        "query after one server-side change, no host daemon",
                        "(target <= 0.8x)",
                    ),
                    (
                        "after_host",
                        "first query after the host indexed on its own disk, no host daemon",
                        "(target <= 0.8x)",
                    ),
                    (
                        "client_edit",
                        "query after an edit through this mount, no host daemon",
                        "(target <= 0.8x)",
                    ),
                    (
                        "update_host",
                        "`update`, nothing changed, run by the share host's daemon",
                        "",
                    ),
                    (
                        "update_here",
                        "`update`, nothing changed, written over the share (no host asked)",
                        "",
                    ),
                    (
                        "update_here_again",
                        "the same, run again at once (the table holds this mount's inodes)",
                        "",
                    ),
                    (
                        "host_after_here",
                        "query right after those two, share host's daemon (it checks their"
                        " generation)",
                        "",
                    ),
                ],
            ),
            "",
            f"`update` by the host / written over the share: {_ratio(rows):.3f}x "
            f"({_ratio(rows, 'update_here_again'):.3f}x against the run again at once).",
            *_scale_table(scale, big_concepts),
        ]
    )


def _scale_table(scale: dict[str, list[float]], big_concepts: int) -> list[str]:
    if not big_concepts:
        return ["", f"(the scale rows were not run: {SCALE_ENV}=0)", ""]
    return [
        "",
        f"{big_concepts} concepts (scale):",
        "",
        *_table(
            scale,
            [
                ("host", "query, nothing changed, share host's daemon", "(target <= 0.05x)"),
                (
                    "host_changed",
                    "query right after a change through another mount, share host's daemon",
                    "(target <= 0.1x)",
                ),
            ],
        ),
        "",
    ]


if __name__ == "__main__":
    print(run())
