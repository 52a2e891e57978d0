"""The optional native folder scan (reconciler/_native.c) gives exactly the
pure-Python answer (docs/reliability.md, "Native core").

The reconciler is run twice over the same tree from the same previous table:
once with the table as a dict (the pure path: every entry stat'ed, filtered
and compared in Python) and once with it packed (the native scan, when the
extension is built; under CTINDEX_PURE=1 the pure path both times). Every
list, count, report bucket and the new table must agree. Trees are random
(hypothesis): odd and undecodable names, symlinks to files and folders,
dangling links, hard links, FIFOs, folders that can not be opened, files
changed with their mtime put back, racily-clean stamps. A clock fixed ahead
of the files keeps "recorded at" identical between the two passes.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ctindex.reconciler import FsOps, Manifest, ReconcileResult, reconcile
from ctindex.reconciler import native as native_mod
from ctindex.reconciler.testing import SimpleFilter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NOW = time.time_ns() + 3_600 * 10**9  # the fixed clock: an hour ahead of every file
HAVE_NATIVE = native_mod.module() is not None

# Names: plain, with spaces and newlines, non-ASCII, and bytes that are not
# UTF-8 (kept as surrogate escapes by the walk, reported as undecodable).
NAME = st.one_of(
    st.text(alphabet="abcXYZ019", min_size=1, max_size=6),
    st.sampled_from(["a b", "new\nline", "ünï", "日本", "e\u0301", "-x", "#h", "ÿ"]),
    st.binary(min_size=1, max_size=4).filter(
        lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
    ),
)


def _fsname(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else name.encode("utf-8")


# One tree: (kind, folder index, name); kinds below.
KINDS = [
    "file",
    "file",
    "file",
    "dir",
    "dir",
    "symlink-file",
    "symlink-dir",
    "dangling",
    "hardlink",
    "fifo",
    "denied-dir",
]
NODES = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 6), NAME), max_size=30)
# Changes before the second pass: (kind, node index)
CHANGES = st.lists(
    st.tuples(
        st.sampled_from(
            ["edit-same-size-mtime-back", "append", "delete", "rename", "racy", "to-dir", "new"]
        ),
        st.integers(0, 40),
    ),
    max_size=8,
)


def _build(
    root: bytes, nodes: list[tuple[str, int, str | bytes]]
) -> tuple[list[bytes], set[bytes]]:
    """Create the tree; returns the regular files made and the folders to deny."""
    dirs = [root]
    files: list[bytes] = []
    denied: set[bytes] = set()
    for n, (kind, where, name) in enumerate(nodes):
        parent = dirs[where % len(dirs)]
        path = os.path.join(parent, _fsname(name) + b"%d" % n)
        if kind == "file":
            with open(path, "wb") as fh:
                fh.write(b"text %d " % n * (n % 3 + 1))
            files.append(path)
        elif kind in ("dir", "denied-dir"):
            os.mkdir(path)
            dirs.append(path)
            if kind == "denied-dir":
                denied.add(path)
                with open(os.path.join(path, b"inside.md"), "wb") as fh:
                    fh.write(b"hidden")
        elif kind == "symlink-file" and files:
            os.symlink(files[-1], path)
        elif kind == "symlink-dir":
            os.symlink(parent, path)
        elif kind == "dangling":
            os.symlink(b"/nonexistent/target", path)
        elif kind == "hardlink" and files:
            os.link(files[n % len(files)], path)
            files.append(path)
        elif kind == "fifo":
            os.mkfifo(path)
    return files, denied


def _change(files: list[bytes], changes: list[tuple[str, int]]) -> None:
    for kind, i in changes:
        if not files:
            return
        path = files[i % len(files)]
        if not os.path.lexists(path) or not os.path.isfile(path):
            continue
        st_ = os.lstat(path)
        if kind == "edit-same-size-mtime-back":
            with open(path, "rb") as fh:
                data = fh.read()
            with open(path, "wb") as fh:
                fh.write(bytes(reversed(data)) if data != data[::-1] else data.upper())
            os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))  # only ctime tells
        elif kind == "append":
            with open(path, "ab") as fh:
                fh.write(b" more")
        elif kind == "delete":
            os.unlink(path)
        elif kind == "rename":
            os.rename(path, path + b".moved")
            files.append(path + b".moved")
        elif kind == "racy":
            os.utime(path, ns=(NOW, NOW - 10**9))  # within the 2 s window of "recorded at"
        elif kind == "to-dir":
            os.unlink(path)
            os.mkdir(path)
            with open(os.path.join(path, b"child"), "wb") as fh:
                fh.write(b"child")
        elif kind == "new":
            with open(path + b".new", "wb") as fh:
                fh.write(b"brand new")


def _denying(denied: set[bytes]) -> FsOps:
    """Folders that can not be opened (EACCES, as for another user: we are root)."""
    names = {os.fsdecode(os.path.basename(d)) for d in denied}

    def open_(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        if os.fsdecode(os.path.basename(os.fsencode(path))) in names:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return os.open(path, flags, *args, **kw)

    return FsOps(open=open_)


def summary(res: ReconcileResult) -> dict[str, Any]:
    """Everything a pass reports, except its duration."""
    metrics = res.metrics.as_dict()
    metrics.pop("duration_ms")
    return {
        "added": res.added,
        "changed": res.changed,
        "removed": res.removed,
        "renamed": res.renamed,
        "metadata_only": res.metadata_only,
        "dirty": res.dirty,
        "linked": res.linked,
        "unchanged": res.unchanged,
        "has_changes": res.has_changes,
        "table": sorted(res.manifest.raw().items()),
        "len": len(res.manifest),
        "report": res.report.as_dict(),
        "metrics": metrics,
    }


def both_ways(
    root: str, flt: SimpleFilter, previous: Manifest, ops: FsOps | None = None
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(pure summary, packed-table summary, whether the native scan ran)."""
    clock: Callable[[], int] = lambda: NOW  # noqa: E731
    pure = reconcile(
        root, flt, Manifest(dict(previous.raw())), clock_ns=clock, ops=ops, trust_filter=True
    )
    packed = Manifest.from_bytes(previous.to_bytes())
    used = packed.native_table() is not None
    fast = reconcile(root, flt, packed, clock_ns=clock, ops=ops, trust_filter=True)
    return summary(pure), summary(fast), used


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=NODES, changes=CHANGES, skip=st.booleans(), cap=st.sampled_from([None, 12]))
def test_native_scan_equals_pure_on_random_trees(
    nodes: list[tuple[str, int, str | bytes]],
    changes: list[tuple[str, int]],
    skip: bool,
    cap: int | None,
) -> None:
    tmp = tempfile.mkdtemp(prefix="ctindex-native-")
    try:
        root = os.fsencode(tmp)
        files, denied = _build(root, nodes)
        flt = SimpleFilter(skip_dirs=frozenset({"abc0"} if skip else ()), max_size=cap)
        ops = _denying(denied) if denied else None
        first = reconcile(tmp, flt, Manifest(), clock_ns=lambda: NOW, ops=ops)
        # Nothing changed: the common pass, and the one the scan exists for.
        pure, fast, used = both_ways(tmp, flt, first.manifest, ops)
        assert fast == pure
        assert used == HAVE_NATIVE
        assert not pure["has_changes"]
        _change(files, changes)
        pure, fast, _ = both_ways(tmp, flt, first.manifest, ops)
        assert fast == pure
    finally:
        shutil.rmtree(tmp)


def test_native_scan_skips_the_filter_only_for_unchanged_known_keys(tmp_path: Path) -> None:
    """With trust_filter the scan calls accept() for no unchanged key: that is
    the saving. Changed and new files are still filtered."""
    for i in range(50):
        (tmp_path / f"f{i}.md").write_text(f"doc {i}")

    class Counting(SimpleFilter):
        calls = 0

        def accept(self, key: str, st_: os.stat_result) -> bool:
            Counting.calls += 1
            return True

    first = reconcile(tmp_path, Counting(), Manifest(), clock_ns=lambda: NOW)
    (tmp_path / "f3.md").write_text("doc 3 edited")
    (tmp_path / "new.md").write_text("new")
    Counting.calls = 0
    res = reconcile(
        tmp_path,
        Counting(),
        Manifest.from_bytes(first.manifest.to_bytes()),
        clock_ns=lambda: NOW,
        trust_filter=True,
    )
    assert (res.changed, res.added) == (["f3.md"], ["new.md"])
    assert Counting.calls == (2 if HAVE_NATIVE else 51)
    Counting.calls = 0
    reconcile(
        tmp_path, Counting(), Manifest.from_bytes(first.manifest.to_bytes()), clock_ns=lambda: NOW
    )  # without the caller's word: every file is filtered
    assert Counting.calls == 51


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to another user")
def test_native_scan_equals_pure_with_real_permission_denials() -> None:
    """Real EACCES (we are root, so the comparison runs in a child switched to
    nobody): a folder that can not be listed, one that can be listed but whose
    entries can not be stat'ed, and an unreadable file."""
    tmp_path = Path(tempfile.mkdtemp(prefix="ctindex-native-perm-"))  # pytest's is 0700
    try:
        _compare_as_nobody(tmp_path)
    finally:
        for folder, _dirs, _files in os.walk(tmp_path):
            os.chmod(folder, 0o755)
        shutil.rmtree(tmp_path)


def _compare_as_nobody(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for sub in ("open", "nolist", "nostat"):
        (root / sub).mkdir(parents=True)
        for i in range(3):
            (root / sub / f"f{i}.md").write_text(f"{sub} {i}")
    (root / "open" / "secret.md").write_text("secret")
    os.chmod(root / "open" / "secret.md", 0o000)
    os.chmod(root / "nolist", 0o311)  # search, no read: listing fails
    os.chmod(root / "nostat", 0o644)  # read, no search: names listed, stats fail
    for p in (tmp_path, root, root / "open"):
        os.chmod(p, 0o755)
    first = reconcile(root, SimpleFilter(), Manifest(), clock_ns=lambda: NOW)
    blob = tmp_path / "table.bin"
    blob.write_bytes(first.manifest.to_bytes())
    os.chmod(blob, 0o644)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compare as nobody, report through the pipe
        code = 1
        try:
            os.close(read_fd)
            os.setgid(65534)
            os.setuid(65534)
            previous = Manifest.from_bytes(blob.read_bytes())
            pure, fast, used = both_ways(str(root), SimpleFilter(), previous)
            report = pure["report"]
            ok = (
                fast == pure
                and used == HAVE_NATIVE
                and report["unreadable_dirs"]["count"] >= 1
                and report["unreadable_files"]["count"] >= 1
            )
            os.write(write_fd, repr((ok, report)).encode())
            code = 0
        except BaseException as exc:
            os.write(write_fd, repr(exc).encode())
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        got = fh.read().decode()
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and got.startswith("(True"), got


def test_packed_table_with_delta_answers_like_the_dict() -> None:
    """The hash index over a base plus delta (updates, removals, new keys)
    holds the same keys and records as the materialized dict."""
    if not HAVE_NATIVE:
        pytest.skip("extension not in use (not built, or CTINDEX_PURE set)")
    base = {f"k/{i:03d}": (i, i + 1, i + 2, i + 3, 7, bytes(16), i + 10) for i in range(300)}
    delta: dict[str, Any] = {
        "k/005": None,
        "k/006": (1, 2, 3, 4, 5, b"x" * 16, 6),
        "k/new": (9, 9, 9, 9, 9, b"y" * 16, 9),
        "absent": None,
    }
    m = Manifest(base)
    data = m.to_bytes()
    table = native_mod.build_table(
        memoryview(data)[24 : 24 + 64 * 300],
        memoryview(data)[24 + 64 * 300 : -16],
        300,
        delta.items(),
    )
    assert table is not None
    want = dict(base)
    for k, e in delta.items():
        if e is None:
            want.pop(k, None)
        else:
            want[k] = e
    assert table.live == len(want)
    for k in [*base, *delta]:
        rec = table.get(native_mod.encode_key(k))
        assert (None if rec is None else native_mod.unpack(rec)) == want.get(k)
    unseen = sorted(k.decode() for k in table.unseen(bytearray(table.size)))
    assert unseen == sorted(want)


def test_pure_switch_and_missing_extension_fall_back_silently(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """CTINDEX_PURE=1, or an extension that fails to import: the pure path,
    with no message, and the same answers."""
    (tmp_path / "a.md").write_text("a")
    first = reconcile(tmp_path, SimpleFilter(), Manifest(), clock_ns=lambda: NOW)
    try:
        monkeypatch.setenv("CTINDEX_PURE", "1")
        native_mod.reset()
        assert native_mod.module() is None
        monkeypatch.delenv("CTINDEX_PURE")

        import importlib

        real_import = importlib.import_module

        def broken(name: str, *args: Any, **kw: Any) -> Any:
            if name == "ctindex.reconciler._native":
                raise ImportError("undefined symbol: PyFoo")  # a wrong-ABI build
            return real_import(name, *args, **kw)

        monkeypatch.setattr(importlib, "import_module", broken)
        native_mod.reset()
        assert native_mod.module() is None
        packed = Manifest.from_bytes(first.manifest.to_bytes())
        assert packed.native_table() is None
        res = reconcile(tmp_path, SimpleFilter(), packed, clock_ns=lambda: NOW, trust_filter=True)
        assert res.unchanged == 1 and not res.has_changes
    finally:
        monkeypatch.undo()
        native_mod.reset()
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
