"""The parallel metadata walk (ctindex/reconciler/parallel_walk.py) gives exactly the
serial walk's results: a differential test on the same trees, full and
narrowed, with changes, symlinks, pruned and unreadable folders, depth
limits and vanished entries; and it keeps its bounds (threads, fds)."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path
from typing import Any

import pytest

from ctindex.reconciler import FsOps, Manifest, reconcile
from ctindex.reconciler.parallel_walk import MAX_WORKERS, ParallelWalker
from ctindex.reconciler.platform_features import has_dir_fd
from tests.ctindex.reconciler.fakes import SimpleFilter

OLD = 1_500_000_000_000_000_000  # stamps far older than the racy window


def _tree(root: Path, seed: int, folders: int = 60, files: int = 400) -> None:
    rnd = random.Random(seed)
    dirs = [root]
    for i in range(folders):
        d = rnd.choice(dirs) / f"d{i}"
        d.mkdir()
        dirs.append(d)
    for i in range(files):
        f = rnd.choice(dirs) / f"f{i}.md"
        f.write_bytes(b"x" * rnd.randrange(0, 50))
        os.utime(f, ns=(OLD, OLD))
    (root / "d0" / "skip").mkdir(exist_ok=True)
    (root / "d0" / "skip" / "hidden.md").write_text("no")
    os.symlink("../f1.md", root / "d0" / "link.md")
    os.symlink("..", root / "d0" / "loop")


def _summary(res: Any) -> dict[str, Any]:
    return {
        "added": sorted(res.added),
        "changed": res.changed,
        "removed": sorted(res.removed),
        "renamed": sorted(res.renamed),
        "metadata_only": res.metadata_only,
        "dirty": res.dirty,
        "linked": sorted(res.linked),
        "unchanged": res.unchanged,
        "manifest": {k: e[:6] for k, e in res.manifest.raw().items()},
        "report": res.report.as_dict(),
        "visited": (res.metrics.entries_visited, res.metrics.dirs_visited),
        "counts": dict(res.metrics.counts),
    }


def _both(root: Path, previous: Manifest, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    flt = kw.pop("flt", SimpleFilter(skip_dirs=frozenset({"skip"})))
    serial = reconcile(root, flt, previous, **kw)
    parallel = reconcile(root, flt, previous, workers=8, **kw)
    return _summary(serial), _summary(parallel)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_parallel_walk_equals_serial_walk_full_and_after_changes(tmp_path: Path, seed: int) -> None:
    _tree(tmp_path, seed)
    serial, parallel = _both(tmp_path, Manifest())
    assert serial == parallel
    assert len(serial["added"]) == 400
    table = reconcile(tmp_path, SimpleFilter(skip_dirs=frozenset({"skip"})), Manifest()).manifest
    rnd = random.Random(seed)
    names = sorted(table.raw())
    for key in rnd.sample(names, 20):
        (tmp_path / key).write_bytes(b"changed " + key.encode())
    for key in rnd.sample(names, 10):
        (tmp_path / key).unlink(missing_ok=True)
    os.rename(tmp_path / names[0], tmp_path / (names[0] + ".moved.md")) if (
        tmp_path / names[0]
    ).exists() else None
    (tmp_path / "d3" / "new.md").parent.mkdir(exist_ok=True)
    (tmp_path / "d3" / "new.md").write_text("new")
    serial, parallel = _both(tmp_path, table)
    assert serial == parallel
    assert serial["changed"] or serial["removed"]
    # Narrowed passes (the daemon's and update_paths') agree too.
    serial, parallel = _both(tmp_path, table, only=["d3", names[5], "d0"])
    assert serial == parallel


def test_parallel_walk_equals_serial_walk_with_errors_and_depth(tmp_path: Path) -> None:
    _tree(tmp_path, 7, folders=30, files=100)
    deep = tmp_path / "deep"
    deep.mkdir()
    cur = deep
    for i in range(6):
        cur = cur / f"l{i}"
        cur.mkdir()
        (cur / "x.md").write_text(str(i))
    real_scandir, real_open = os.scandir, os.open
    denied = {"d2", "d5"}

    def scandir(fd: int) -> Any:
        # Which folder is this? Compare its inode with the denied ones'.
        st = os.fstat(fd)
        for name in denied:
            path = next(tmp_path.rglob(name), None)
            if path is not None and os.lstat(path).st_ino == st.st_ino:
                raise OSError(errno.EACCES, "Permission denied")
        return real_scandir(fd)

    def opener(name: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if name == "d7":
            raise OSError(errno.EACCES, "Permission denied", name)
        return real_open(name, flags, mode, dir_fd=dir_fd)

    ops = FsOps(scandir=scandir, open=opener)
    serial, parallel = _both(tmp_path, Manifest(), ops=ops, max_depth=4)
    assert serial == parallel
    assert serial["report"]["too_deep"]["count"] > 0
    assert serial["report"]["unreadable_dirs"]["count"] > 0


def test_parallel_walk_bounds_threads_and_closes_every_fd(tmp_path: Path) -> None:
    _tree(tmp_path, 11, folders=200, files=300)
    before = len(os.listdir("/proc/self/fd"))
    res = reconcile(tmp_path, SimpleFilter(), Manifest(), workers=10_000)
    assert len(res.added) == 301
    assert len(os.listdir("/proc/self/fd")) == before
    walker = ParallelWalker(
        str(tmp_path),
        SimpleFilter(),
        os.lstat,
        lambda fd, b: None,
        lambda k: None,
        res.report,
        res.metrics,
        workers=10_000,
    )
    assert walker.workers == MAX_WORKERS


@pytest.mark.parametrize("seed", [4, 5])
def test_sibling_roots_walked_at_once_equal_the_serial_walk(tmp_path: Path, seed: int) -> None:
    """Many sibling scope roots (bundles) are walked concurrently: the same
    results as root by root, with a missing root, a root that is a symlink,
    an unreadable root and changes between passes."""
    rnd = random.Random(seed)
    roots = []
    for i in range(12):
        root = tmp_path / "bundles" / f"b{i:02d}"
        root.mkdir(parents=True)
        _tree(root, seed * 100 + i, folders=5, files=rnd.randrange(0, 30))
        roots.append(f"bundles/b{i:02d}")
    os.symlink(tmp_path / "bundles" / "b00", tmp_path / "bundles" / "linked")
    (tmp_path / "bundles" / "shut").mkdir()
    (tmp_path / "bundles" / "shut" / "a.md").write_text("a")
    extra = ["bundles/gone", "bundles/linked", "bundles/shut"]
    real_open = os.open

    def opener(name: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if name == "shut":
            raise OSError(errno.EACCES, "Permission denied", name)
        return real_open(name, flags, mode, dir_fd=dir_fd)

    flt = SimpleFilter(root_keys=tuple(sorted(roots + extra)), skip_dirs=frozenset({"skip"}))
    # (Folder handles without dir_fd open by path: the refusal is dir_fd's.)
    ops = FsOps(open=opener) if has_dir_fd() else None
    serial, parallel = _both(tmp_path, Manifest(), flt=flt, ops=ops)
    assert serial == parallel
    assert serial["report"]["missing_roots"]["count"] == 2  # gone, and the symlink
    table = reconcile(tmp_path, flt, Manifest(), ops=ops).manifest
    for key in rnd.sample(sorted(table.raw()), 15):
        (tmp_path / key).write_bytes(b"changed " + key.encode())
    serial, parallel = _both(tmp_path, table, flt=flt, ops=ops)
    assert serial == parallel and serial["changed"]
