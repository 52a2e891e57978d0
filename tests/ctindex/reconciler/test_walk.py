"""The walk: symlinks, odd roots, unreadable/vanishing entries, odd names, deep trees."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ctindex.reconciler import FsOps, Manifest, reconcile
from tests.ctindex.reconciler.fakes import SimpleFilter, as_packed

ALL = SimpleFilter()


def write(p: Path, data: bytes = b"x") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def test_symlinks_to_outside_dir_and_file_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.txt", b"secret")
    base = tmp_path / "base"
    write(base / "in.txt")
    os.symlink(outside, base / "dirlink")
    os.symlink(outside / "secret.txt", base / "filelink")
    os.symlink(base / "nowhere", base / "dangling")
    res = reconcile(base, ALL, Manifest())
    assert res.added == ["in.txt"]
    assert res.metrics.counts["symlinks"] == 3


def test_root_that_is_a_symlink_is_reported_missing(tmp_path: Path) -> None:
    write(tmp_path / "real/a")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    res = reconcile(tmp_path, SimpleFilter(root_keys=("alias",)), Manifest())
    assert res.added == [] and res.report.missing_roots.sample == ["alias"]


def test_missing_root_removes_entries_but_says_so(tmp_path: Path) -> None:
    write(tmp_path / "docs/a")
    write(tmp_path / "notes/b")
    flt = SimpleFilter(root_keys=("docs", "notes"))
    m = reconcile(tmp_path, flt, Manifest()).manifest
    (tmp_path / "docs/a").unlink()
    (tmp_path / "docs").rmdir()
    write(tmp_path / "docs", b"now a file")
    res = reconcile(tmp_path, flt, m)
    assert res.removed == ["docs/a"]
    assert res.report.missing_roots.count == 1 and res.report.missing_roots.sample == ["docs"]
    assert sorted(res.manifest) == ["notes/b"]


def test_hidden_entries_are_walked_filter_decides(tmp_path: Path) -> None:
    write(tmp_path / ".hidden/f")
    write(tmp_path / ".g")
    write(tmp_path / "skipme/h")
    res = reconcile(tmp_path, SimpleFilter(skip_dirs=frozenset({"skipme"})), Manifest())
    assert res.added == [".g", ".hidden/f"] and res.metrics.counts["pruned"] == 1


def test_non_utf8_names_round_trip_and_are_reported(tmp_path: Path) -> None:
    raw = os.fsencode(str(tmp_path)) + b"/caf\xe9-\xff.txt"
    with open(raw, "wb") as f:
        f.write(b"latin-1 name")
    got: dict[str, bytes] = {}
    res = reconcile(tmp_path, ALL, Manifest(), sink=got.__setitem__)
    (key,) = res.added
    assert os.fsencode(key) == b"caf\xe9-\xff.txt"
    assert got[key] == b"latin-1 name"
    assert res.report.undecodable.count == 1
    again = as_packed(res.manifest)  # packed keys: surrogate escapes round-trip
    assert key in again
    assert reconcile(tmp_path, ALL, again).removed == []


def test_deep_tree_is_walked_iteratively(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:  # build 300 levels relative to an fd so PATH_MAX never matters
        for _ in range(300):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"bottom")
        os.close(leaf)
    finally:
        os.close(fd)
    got: dict[str, bytes] = {}
    res = reconcile(tmp_path, ALL, Manifest(), sink=got.__setitem__)
    assert res.added == ["d/" * 300 + "leaf"] and got[res.added[0]] == b"bottom"
    assert res.report.is_clean()


def test_too_deep_is_reported_and_previous_entries_kept(tmp_path: Path) -> None:
    write(tmp_path / "a/b/c/f", b"deep")
    write(tmp_path / "a/g", b"shallow")
    m = reconcile(tmp_path, ALL, Manifest()).manifest
    res = reconcile(tmp_path, ALL, m, max_depth=2)
    assert res.report.too_deep.sample == ["a/b/c"]
    assert res.removed == [] and "a/b/c/f" in res.manifest


def _deny(names: set[str], real: FsOps | None = None) -> FsOps:
    """FsOps whose open() fails with EACCES for the given names (works as root too)."""
    base = real or FsOps()

    def opener(path: str, flags: int, *a: object, **kw: object) -> int:
        if os.path.basename(path) in names:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return base.open(path, flags, *a, **kw)

    return FsOps(scandir=base.scandir, open=opener)


def test_unreadable_folder_keeps_previous_entries(tmp_path: Path) -> None:
    write(tmp_path / "locked/inner/a", b"1")
    write(tmp_path / "open/b", b"2")
    m = reconcile(tmp_path, ALL, Manifest()).manifest
    write(tmp_path / "locked/new", b"invisible")
    res = reconcile(tmp_path, ALL, m, ops=_deny({"locked"}))
    assert res.removed == [] and res.added == []
    assert res.report.unreadable_dirs.sample == ["locked"]
    assert sorted(res.manifest) == ["locked/inner/a", "open/b"]


def test_unreadable_file_keeps_previous_entry(tmp_path: Path) -> None:
    write(tmp_path / "f", b"old")
    m = reconcile(tmp_path, ALL, Manifest()).manifest
    write(tmp_path / "f", b"new content")
    write(tmp_path / "g", b"never readable")
    res = reconcile(tmp_path, ALL, m, ops=_deny({"f", "g"}))
    assert res.changed == [] and res.added == [] and res.removed == []
    assert res.manifest["f"] == m["f"] and "g" not in res.manifest
    assert sorted(res.report.unreadable_files.sample) == ["f", "g"]


def _as_unprivileged(fn: Callable[[], list[str]]) -> list[str]:
    """Run fn in a forked child that dropped root (so mode 000 really denies); return its list."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            os.close(r)
            if os.geteuid() == 0:
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
            os.write(w, json.dumps(fn()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return list(json.loads(out))


def test_real_chmod_000_folder_and_file() -> None:
    base = Path(tempfile.mkdtemp(prefix="ctrecon-"))
    try:
        write(base / "locked/a", b"a")
        write(base / "secret", b"s")
        write(base / "open", b"o")
        m = reconcile(base, ALL, Manifest()).manifest
        for dirpath, dirs, files in os.walk(base):  # readable by the dropped-privilege child
            for n in dirs + files:
                os.chmod(os.path.join(dirpath, n), 0o777 if n in dirs else 0o666)
        base.chmod(0o777)
        (base / "locked").chmod(0)
        (base / "secret").chmod(0)

        def look() -> list[str]:
            res = reconcile(base, ALL, m)
            return [
                *res.removed,
                "|",
                *res.report.unreadable_dirs.sample,
                "|",
                *res.report.unreadable_files.sample,
                "|",
                *sorted(res.manifest),
            ]

        got = _as_unprivileged(look)
    finally:
        (base / "locked").chmod(0o755)
        shutil.rmtree(base)
    assert got == ["|", "locked", "|", "secret", "|", "locked/a", "open", "secret"]


def test_entry_vanishing_mid_walk_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "stays", b"s")
    write(tmp_path / "goes", b"g")
    write(tmp_path / "dir/inner", b"i")
    m = reconcile(tmp_path, ALL, Manifest()).manifest

    def deleting_stat(path: str) -> os.stat_result:  # the entry disappears as we look at it
        if path.endswith("/goes"):
            os.unlink(path)
        return os.lstat(path)

    res = reconcile(tmp_path, ALL, m, stat=deleting_stat)
    assert res.removed == ["goes"] and res.report.vanished.sample == ["goes"]


def test_folder_replaced_by_file_after_listing(tmp_path: Path) -> None:
    write(tmp_path / "d/x", b"x")
    m = reconcile(tmp_path, ALL, Manifest()).manifest
    real = FsOps()

    def swapping_open(path: str, flags: int, *a: object, **kw: object) -> int:
        if path == "d":  # ENOTDIR race: d became a file between listing and opening
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", path)
        return real.open(path, flags, *a, **kw)

    res = reconcile(tmp_path, ALL, m, ops=FsOps(open=swapping_open))
    assert res.removed == ["d/x"] and res.report.vanished.sample == ["d"]


def test_fifo_and_sockets_are_not_files(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    write(tmp_path / "f")
    res = reconcile(tmp_path, ALL, Manifest())
    assert res.added == ["f"] and res.metrics.counts["other"] == 1


def test_report_samples_are_capped_but_counts_are_complete(tmp_path: Path) -> None:
    for i in range(30):
        write(tmp_path / f"f{i:02d}", b"x")
    res = reconcile(tmp_path, ALL, Manifest(), ops=_deny({f"f{i:02d}" for i in range(30)}))
    assert res.report.unreadable_files.count == 30
    assert len(res.report.unreadable_files.sample) == 20
    assert not res.report.is_clean()
