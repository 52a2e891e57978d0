"""Benchmark: a nothing-changed reconcile over 200k files versus `find -printf`.

`run()` returns a Markdown section for docs/benchmarks.md. The tree is
generated once into the temp folder and reused by later runs (a marker file
records that it is complete), so only the first run pays for creating it.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import corpus_marker
from ctindex.reconciler import Manifest, ReconcileResult, reconcile
from tests.ctindex.reconciler.fakes import SimpleFilter, as_packed

FILES = 200_000
DIRS = 2_000  # 100 files per folder, folders two levels deep
RUNS = 5
TREE = Path(tempfile.gettempdir()) / f"ctindex-bench-tree-{FILES}"


def make_tree(root: Path = TREE) -> Path:
    params = {"files": FILES, "dirs": DIRS, "generator": 1}
    if corpus_marker.reuse(root, root, params) is not None:
        return root
    per_dir = FILES // DIRS
    for d in range(DIRS):
        folder = root / f"g{d // 50:03d}" / f"d{d:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        for f in range(per_dir):
            (folder / f"f{f:03d}.md").write_bytes(b"# note %d/%d\nbody text\n" % (d, f))
    corpus_marker.seal(root, root, params)
    return root


def median_ms(fn: Callable[[], object], runs: int = RUNS) -> tuple[float, list[float]]:
    """Time fn() alone: its result is freed after the clock stops (a ctindex
    process leaves with os._exit and never pays for tearing its tables down)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
        del result
    return statistics.median(times), times


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def find_once(root: Path) -> None:
    subprocess.run(
        ["find", str(root), "-type", "f", "-printf", r"%s %T@ %i\n"],
        stdout=subprocess.DEVNULL,
        check=True,
    )


def os_scandir_walk(root: Path) -> int:
    """Plain os.scandir walk with one lstat per entry (integer ns available)."""
    n, todo = 0, [str(root)]
    while todo:
        with os.scandir(todo.pop()) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                if e.is_dir(follow_symlinks=False):
                    todo.append(e.path)
                n += st.st_mtime_ns > 0
    return n


def scandir_rs_walk(root: Path) -> int | None:
    try:
        import scandir_rs
    except ImportError:
        return None
    n = 0
    for e in scandir_rs.Scandir(str(root), return_type=scandir_rs.ReturnType.Ext):
        n += e.mtime > 0  # float seconds / datetime (microseconds): no integer ns
    return n


def run() -> str:
    t0 = time.perf_counter()
    root = make_tree()
    gen_s = time.perf_counter() - t0
    flt = SimpleFilter()
    t0 = time.perf_counter()
    first = reconcile(root, flt, Manifest())
    build_ms = (time.perf_counter() - t0) * 1000
    first_mb = first.metrics.bytes_hashed / 1e6
    settled = reconcile(root, flt, first.manifest).manifest  # settle racily-clean entries
    # Compare against a packed table, as a real `update` process loads it.
    manifest = as_packed(settled)
    manifest.raw()  # the pure pass compares against the dict: built before the clock runs
    # The native scan (ctindex/reconciler/native.py) compares against the packed table in place.
    packed = as_packed(settled)
    native_used = packed.native_table() is not None
    del first, settled
    gc.collect()

    results: list[int] = []

    def nothing_changed() -> ReconcileResult:
        res = reconcile(root, flt, manifest)
        results.append(res.metrics.files_hashed)
        if res.has_changes:
            raise RuntimeError(f"tree changed during the benchmark: {res.metrics.counts}")
        return res

    def nothing_changed_native() -> ReconcileResult:
        res = reconcile(root, flt, packed, trust_filter=True)
        if res.has_changes:
            raise RuntimeError(f"tree changed during the benchmark: {res.metrics.counts}")
        return res

    find_once(root)  # warm the dentry/inode caches for both sides alike
    # Interleaved, so load from other processes on a shared machine hits both alike.
    rec_all: list[float] = []
    find_all: list[float] = []
    rec_cpu: list[float] = []
    find_cpu: list[float] = []
    nat_all: list[float] = []
    for _ in range(RUNS):
        nat_all += median_ms(nothing_changed_native, 1)[1]
        c0 = time.process_time()
        rec_all += median_ms(nothing_changed, 1)[1]
        rec_cpu.append((time.process_time() - c0) * 1000)
        c0 = _children_cpu_s()
        find_all += median_ms(lambda: find_once(root), 1)[1]
        find_cpu.append((_children_cpu_s() - c0) * 1000)
    rec_ms, find_ms = statistics.median(rec_all), statistics.median(find_all)
    ratio = rec_ms / find_ms
    pair_ratio = statistics.median(r / f for r, f in zip(rec_all, find_all, strict=True))
    fastest_ratio = min(rec_all) / min(find_all)
    cpu_ratio = statistics.median(rec_cpu) / statistics.median(find_cpu)

    with tempfile.TemporaryDirectory() as tmp:
        mpath = Path(tmp) / "manifest.bin"
        save_ms, _ = median_ms(lambda: manifest.save(mpath))
        load_ms, _ = median_ms(lambda: Manifest.load(mpath))
        size_mb = mpath.stat().st_size / 1e6
    scan_ms, _ = median_ms(lambda: os_scandir_walk(root), 3)
    rs_ms: float | None = None
    if scandir_rs_walk(root) is not None:
        rs_ms, _ = median_ms(lambda: scandir_rs_walk(root), 3)

    n = len(manifest)
    fmt = ", ".join
    lines = [
        "## Reconciler: nothing-changed pass vs `find`",
        "",
        f"Tree: {n} files in {DIRS} folders ({root}; generated in {gen_s:.1f} s, "
        "reused when present). Python " + sys.version.split()[0] + f", {os.cpu_count()} CPUs.",
        "",
        "| measurement | median of runs | runs (ms) |",
        "|---|---|---|",
        f"| reconcile, nothing changed (pure Python) | {rec_ms:.0f} ms | "
        f"{fmt(f'{t:.0f}' for t in rec_all)} |",
        f"| reconcile, nothing changed, native scan{'' if native_used else ' (not built: pure)'}"
        f" | {statistics.median(nat_all):.0f} ms | {fmt(f'{t:.0f}' for t in nat_all)} |",
        f"| ratio native / find | {statistics.median(nat_all) / find_ms:.2f}x | |",
        f"| `find ROOT -type f -printf '%s %T@ %i\\n'` | {find_ms:.0f} ms | "
        f"{fmt(f'{t:.0f}' for t in find_all)} |",
        f"| **ratio reconcile / find** | **{ratio:.2f}x** (target <= 2.0x) | "
        f"median of per-pair ratios {pair_ratio:.2f}x |",
        f"| ratio of the fastest runs (least disturbed by other load) | {fastest_ratio:.2f}x | "
        f"{min(rec_all):.0f} / {min(find_all):.0f} ms |",
        f"| ratio of CPU time (user+sys; insensitive to waiting for a CPU) | {cpu_ratio:.2f}x | "
        f"{statistics.median(rec_cpu):.0f} / {statistics.median(find_cpu):.0f} ms |",
        f"| first pass (hash everything, {first_mb:.1f} MB) | {build_ms:.0f} ms | 1 run |",
        f"| Manifest.load ({n} entries, {size_mb:.1f} MB) | {load_ms:.1f} ms | {RUNS} runs |",
        f"| Manifest.save (atomic, fsync) | {save_ms:.1f} ms | {RUNS} runs |",
        f"| bare os.scandir + lstat walk | {scan_ms:.0f} ms | 3 runs |",
    ]
    if rs_ms is not None:
        lines.append(f"| bare scandir-rs walk (Ext, float times) | {rs_ms:.0f} ms | 3 runs |")
    lines += ["", f"Files re-read during the nothing-changed passes: {max(results)}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
