"""Queries at scale: `python -m bench.scale --tldr PAGES.tar.gz [--copies K] [--write FILE]`.

The corpus is the tldr pages (github.com/tldr-pages/tldr, ~38,400 small
Markdown pages, CC BY 4.0) copied K times into one project (4 copies:
~154,000 documents). Side by side in one run, on the same files:

* build: `ctindex update` from nothing, and an SQLite FTS5 table of the
  same pages (porter, title and body), with each one's peak RSS;
* queries, in process, over the same QUERIES words: `ctindex.Index.search`
  with a settled daemon (every query still asks the daemon's barrier) and
  the FTS5 query, ten results each; p50 and p95;
* the daemon's own account: its file watches, whether any file is left to
  the audit, and which freshness every answer had.

The figure that matters here is whether the barrier's cost grows with the
corpus (docs/reliability.md, "File watches": no size alone makes every
barrier a full pass). Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

START, END = "<!-- scale:start -->", "<!-- scale:end -->"
QUERIES = 200
RUNS = 5  # of the nothing-changed update and of `find`
LIMIT = 10
WORDS = (
    "file", "list", "directory", "create", "remove", "git", "commit", "docker", "image",
    "container", "network", "package", "install", "update", "user", "password", "server",
    "process", "memory", "display", "archive", "compress", "extract", "search", "pattern",
    "print", "output", "input", "version", "config", "branch", "remote", "kernel", "module",
)  # fmt: skip
FTS_SQL = (
    "SELECT path, title FROM docs WHERE docs MATCH ? ORDER BY bm25(docs, 0, 3.0, 1.0) LIMIT 10"
)


def make_project(tldr: Path, copies: int, root: Path) -> int:
    """root/kb/cNN/<pages>; returns the number of pages."""
    kb = root / "kb"
    kb.mkdir(parents=True)
    (kb / "index.md").write_text("# tldr pages, copied\n")
    (root / ".git").mkdir()
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": true}\n')
    with tarfile.open(tldr) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".md")]
        tar.extractall(kb / "c00", members=members, filter="data")
    for i in range(1, copies):
        subprocess.run(["cp", "-r", str(kb / "c00"), str(kb / f"c{i:02d}")], check=True)
    return sum(1 for _ in kb.rglob("*.md")) - 1


def peak_rss_mb(argv: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS of the command in MB), measured by a fresh parent."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *argv], check=True, capture_output=True)
    seconds, kib = out.stdout.split()
    return float(seconds), int(kib) / 1024


def fts5_build(root: Path, db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, title, body, "
        "tokenize='porter unicode61')"
    )
    rows = []
    for p in sorted((root / "kb").rglob("*.md")):
        text = p.read_text("utf-8", errors="replace")
        title = text.splitlines()[0].lstrip("# ") if text else p.stem
        rows.append((str(p.relative_to(root)), title, text))
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()


def nothing_changed(root: Path) -> tuple[float, float, float]:
    """A nothing-changed `ctindex update` beside `find -printf` of the same
    tree, measured as bench/bench_update.py does (settled past the racy
    window, interleaved, cached bytecode): their medians in ms and the
    median of the per-pair ratios."""
    from bench.bench_update import BASE_ENV, FIND, settle, timed

    settle(root, BASE_ENV)
    update_argv = [sys.executable, "-m", "ctindex", "-C", str(root), "update"]
    update, find = [], []
    for _ in range(RUNS):
        update.append(timed(update_argv, BASE_ENV))
        find.append(timed(FIND, BASE_ENV, root))
    ratio = statistics.median(u / f for u, f in zip(update, find, strict=True))
    return statistics.median(update), statistics.median(find), ratio


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ctindex(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args], capture_output=True, check=False
    )


def run(tldr: Path, copies: int) -> str:
    import ctindex

    work = Path(tempfile.mkdtemp(prefix="ctindex-scale-"))
    root = work / "p"
    docs = make_project(tldr, copies, root)
    rng = random.Random(7)
    queries = [rng.choice(WORDS) for _ in range(QUERIES)]
    build_s, build_mb = peak_rss_mb([sys.executable, "-m", "ctindex", "-C", str(root), "update"])
    fts_code = "import sys; from bench.scale import fts5_build; from pathlib import Path; "
    fts_code += "fts5_build(Path(sys.argv[1]), Path(sys.argv[2]))"
    db = work / "fts5.db"
    fts_s, fts_mb = peak_rss_mb([sys.executable, "-c", fts_code, str(root), str(db)])
    index_bytes = sum(p.stat().st_size for p in (root / ".ct" / "okf").rglob("*") if p.is_file())
    fts_bytes = db.stat().st_size
    update_ms, find_ms, update_ratio = nothing_changed(root)
    started = _ctindex(root, "watch", "start")
    if started.returncode != 0:
        raise RuntimeError(started.stdout.decode() + started.stderr.decode())
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            doc = json.loads(_ctindex(root, "--json", "search", "file").stdout)
            if doc["freshness"]["mode"] == "watcher-clean":
                break
            time.sleep(1)
        time.sleep(2.5)  # past the config's racy window: the steady state
        con = sqlite3.connect(db)
        ct: list[float] = []
        fts: list[float] = []
        reasons: dict[str, int] = {}
        with ctindex.Index(root) as index:
            for q in queries[:20]:  # warm both
                index.search(q, limit=LIMIT)
                con.execute(FTS_SQL, (q,)).fetchall()
            for q in queries:  # interleaved: load hits both alike
                t0 = time.perf_counter()
                res = index.search(q, limit=LIMIT)
                ct.append((time.perf_counter() - t0) * 1000)
                label = f"{res.freshness.mode}: {res.freshness.reason or '-'}"
                reasons[label] = reasons.get(label, 0) + 1
                t0 = time.perf_counter()
                con.execute(FTS_SQL, (q,)).fetchall()
                fts.append((time.perf_counter() - t0) * 1000)
        status = _ctindex(root, "watch", "status").stdout.decode()
        daemon = json.loads(_ctindex(root, "--json", "watch", "status").stdout)
    finally:
        _ctindex(root, "watch", "stop")
        subprocess.run(["rm", "-rf", str(work)], check=False)
    files = next((ln for ln in status.splitlines() if ln.startswith("file_watches")), "")
    rss = (daemon.get("rss_bytes") or 0) / 2**20
    return "\n".join(
        [
            START,
            f"## Scale: {docs:,} documents (tldr pages x {copies})",
            "",
            "| | ctindex | SQLite FTS5 |",
            "| --- | --- | --- |",
            f"| build, s | {build_s:.1f} | {fts_s:.1f} |",
            f"| build peak RSS, MB | {build_mb:.0f} | {fts_mb:.0f} |",
            f"| query p50 ms (in process; ctindex: barrier included) | {statistics.median(ct):.2f}"
            f" | {statistics.median(fts):.2f} |",
            f"| query p95 ms | {_pct(ct, 0.95):.2f} | {_pct(fts, 0.95):.2f} |",
            f"| index MB (FTS5 also stores the text) | {index_bytes / 2**20:.1f}"
            f" | {fts_bytes / 2**20:.1f} |",
            "",
            f"A nothing-changed `ctindex update` takes {update_ms:.0f} ms against {find_ms:.0f} ms"
            f" for `find -printf` over the same tree: {update_ratio:.2f}x (median of {RUNS}"
            " interleaved pairs' ratios, settled first as in bench/bench_update.py).",
            "",
            f"{QUERIES} one-word queries, ten results each. Answers: "
            + ", ".join(f"{n} {label}" for label, n in sorted(reasons.items()))
            + f". Daemon RSS {rss:.0f} MB; `{files}`.",
            END,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    p.add_argument("--tldr", type=Path, required=True, metavar="PAGES.tar.gz")
    p.add_argument("--copies", type=int, default=4)
    p.add_argument("--write", type=Path, metavar="FILE", help="replace the section in FILE")
    args = p.parse_args(argv)
    section = run(args.tldr, args.copies)
    if args.write:
        from bench.relevance import write_section

        write_section(args.write, section, START, END)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
