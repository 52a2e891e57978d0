"""The optional native folder scan (ctindex/reconciler/_native.c) gives exactly the
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex.reconciler import FsOps, Manifest, ReconcileResult, reconcile
from ctindex.reconciler import native as native_mod
from ctindex.reconciler.manifest import RawEntry
from tests.ctindex.reconciler.fakes import PackedSource, SimpleFilter, as_packed

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
    packed = as_packed(previous)
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
        assert _in_byte_order(tmp, flt, first.manifest, ops) == pure
        _change(files, changes)
        pure, fast, _ = both_ways(tmp, flt, first.manifest, ops)
        assert fast == pure
        assert _in_byte_order(tmp, flt, first.manifest, ops) == pure
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
        as_packed(first.manifest),
        clock_ns=lambda: NOW,
        trust_filter=True,
    )
    assert (res.changed, res.added) == (["f3.md"], ["new.md"])
    assert Counting.calls == (2 if HAVE_NATIVE else 51)
    Counting.calls = 0
    reconcile(
        tmp_path, Counting(), as_packed(first.manifest), clock_ns=lambda: NOW
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
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compare as nobody, report through the pipe
        code = 1
        try:
            os.close(read_fd)
            os.setgid(65534)
            os.setuid(65534)
            previous = as_packed(first.manifest)  # the child has the parent's memory
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
    source = PackedSource(Manifest(base))
    table = native_mod.build_table(source.records, source.blob, 300, delta.items())
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


# -- the sorted base: binary search in place, or the hash index as fallback ----------

DeltaItems = list[tuple[str, "RawEntry | None"]]


class _SortedSource:
    """A TableSource laid out like a base file table (ctindex/store/filetable.py):
    records and NUL-joined keys in `order` (byte order unless given), with
    `delta` items on top in their order (None removes; a later item wins)."""

    def __init__(
        self,
        raw: dict[str, RawEntry],
        delta: DeltaItems | None = None,
        order: list[str] | None = None,
    ) -> None:
        self.raw, self.delta = raw, list(delta or [])
        self.order = sorted(raw, key=native_mod.encode_key) if order is None else order

    def materialize(self) -> dict[str, RawEntry]:
        out = dict(self.raw)
        for k, e in self.delta:
            if e is None:
                out.pop(k, None)
            else:
                out[k] = e
        return out

    def native(self) -> native_mod.NativeTable | None:
        keys = self.order
        return native_mod.build_table(
            b"".join(native_mod.pack(self.raw[k]) for k in keys),
            b"\0".join(native_mod.encode_key(k) for k in keys),
            len(keys),
            self.delta,
        )


@dataclass
class _Examined(SimpleFilter):
    """Notes each file accept() is asked about: with trust_filter, the files
    the native scan did not find unchanged in the table (a key its search
    missed would show here, though Python then finds it and the result is
    the same)."""

    asked: list[str] = field(default_factory=list)

    def accept(self, key: str, st_: os.stat_result) -> bool:
        self.asked.append(key)
        return True


def sorted_ways(
    root: Path, source: _SortedSource
) -> tuple[dict[str, Any], dict[str, Any], native_mod.NativeTable | None]:
    """(pure summary, summary over `source` packed, its native table or None),
    after checking that the packed pass examined only the files that are not
    unchanged."""
    clock: Callable[[], int] = lambda: NOW  # noqa: E731
    flt = _Examined()
    pure = reconcile(root, flt, Manifest(source.materialize()), clock_ns=clock, trust_filter=True)
    packed = Manifest(source=source)
    table = packed.native_table()
    flt = _Examined()
    fast = reconcile(root, flt, packed, clock_ns=clock, trust_filter=True)
    if table is not None:
        res = summary(fast)
        differ = res["added"] + res["changed"] + res["metadata_only"] + res["dirty"]
        differ += [new for _old, new in res["renamed"]]
        assert sorted(flt.asked) == sorted(differ)
    return summary(pure), summary(fast), table


def _in_byte_order(
    root: str, flt: SimpleFilter, previous: Manifest, ops: FsOps | None
) -> dict[str, Any]:
    """The summary of a pass over `previous` laid out as a base file table
    lays it out, keys in byte order: the native scan searches it in place."""
    packed = Manifest(source=_SortedSource(dict(previous.raw())))
    table = packed.native_table()
    assert (table is not None and table.ordered) if HAVE_NATIVE else table is None
    return summary(reconcile(root, flt, packed, clock_ns=lambda: NOW, ops=ops, trust_filter=True))


def _answers_like(
    table: native_mod.NativeTable, want: dict[str, RawEntry], probes: list[str]
) -> None:
    """get() and unseen() of `table` agree with the dict `want`."""
    assert table.live == len(want)
    for k in [*want, *probes]:
        rec = table.get(native_mod.encode_key(k))
        assert (None if rec is None else native_mod.unpack(rec)) == want.get(k), k
    unseen = table.unseen(bytearray(table.size))
    assert sorted(k.decode("utf-8", "surrogateescape") for k in unseen) == sorted(want)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_keys_out_of_byte_order_fall_back_to_the_hash_index(tmp_path: Path) -> None:
    """The base file sorts by code point; a surrogate escape (a name byte
    that is not UTF-8) sorts after 'é' that way but before it as bytes. Such
    a table is hashed, not searched, and answers the same."""
    root = tmp_path / "tree"
    for name in ("a.md", "é.md", "z.md", "\udc80.md", "\udcff", "e\u0301"):
        for folder in ("", "d/", "d/é/"):
            _write(root / (folder + name), f"{folder}{name}".encode("utf-8", "surrogateescape"))
    raw = reconcile(root, SimpleFilter(), Manifest(), clock_ns=lambda: NOW).manifest.raw()
    by_code_point = sorted(raw)
    assert by_code_point != sorted(raw, key=native_mod.encode_key)
    for order, ordered in ((by_code_point, False), (None, True)):
        source = _SortedSource(dict(raw), order=order)
        pure, fast, table = sorted_ways(root, source)
        assert fast == pure
        assert pure["unchanged"] == len(raw) and not pure["has_changes"]
        if HAVE_NATIVE:
            assert table is not None and table.ordered is ordered
            _answers_like(table, raw, ["d/\udc81", "d/é/zz", "d/a.mc"])
    if HAVE_NATIVE:  # a repeated key is not "increasing" either: the later record wins
        recs = [(i, i, i, i, i, bytes(16), i) for i in range(3)]
        table = native_mod.build_table(b"".join(map(native_mod.pack, recs)), b"a\0a\0b", 3)
        assert table is not None and not table.ordered
        _answers_like(table, {"a": recs[1], "b": recs[2]}, ["", "c"])
    (root / "d" / "\udc80.md").write_bytes(b"edited, longer than before")
    (root / "d" / "é.md").unlink()
    pure, fast, table = sorted_ways(root, _SortedSource(dict(raw), order=by_code_point))
    assert fast == pure
    assert (pure["changed"], pure["removed"]) == (["d/\udc80.md"], ["d/é.md"])


def test_delta_overrides_and_removes_keys_of_a_sorted_base(tmp_path: Path) -> None:
    """The delta answers before the base: an override, a removal, a new key,
    a removal of a key the base never had, repeated items (the later wins),
    and keys whose files are gone, each counted once."""
    root = tmp_path / "tree"
    for i in range(12):
        _write(root / "k" / f"f{i:02d}", b"file %d" % i)
    _write(root / "top.md", b"top")
    true = dict(reconcile(root, SimpleFilter(), Manifest(), clock_ns=lambda: NOW).manifest.raw())

    def wrong(e: RawEntry) -> RawEntry:  # another size and content
        return (e[0] + 1, *e[1:5], b"\xff" * 16, e[6])

    def fake(n: int) -> RawEntry:  # a file no longer there (an inode and digest of its own)
        return (n, n, n, 10**9 + n, 1, n.to_bytes(16, "little"), n)

    base = {k: e for k, e in true.items() if k != "k/f03"}
    base["k/f01"] = wrong(true["k/f01"])
    base.update({"k/gone1": fake(1), "k/gone2": fake(2), "k/gone3": fake(3)})
    delta: DeltaItems = [
        ("k/f01", true["k/f01"]),  # overrides a stale base record: trusted
        ("k/f02", None),  # removes a key whose file is there: added
        ("k/f03", true["k/f03"]),  # a key the base lacks: trusted
        ("k/f04", wrong(true["k/f04"])),  # overrides a right record: changed
        ("k/f05", wrong(true["k/f05"])),
        ("k/f05", true["k/f05"]),  # the later item wins: trusted
        ("k/f06", true["k/f06"]),
        ("k/f06", None),  # the later item wins: added
        ("k/gone2", fake(22)),  # overridden, file gone: removed once
        ("k/gone3", None),  # removed, file gone: nothing
        ("k/gone4", fake(4)),  # new, file gone: removed
        ("absent", None),  # the base never had it: harmless
    ]
    source = _SortedSource(base, delta)
    pure, fast, table = sorted_ways(root, source)
    assert fast == pure
    assert pure["added"] == ["k/f02", "k/f06"]
    assert pure["changed"] == ["k/f04"]
    assert pure["removed"] == ["k/gone1", "k/gone2", "k/gone4"]
    assert pure["unchanged"] == len(true) - 3
    if HAVE_NATIVE:
        assert table is not None and table.ordered
        assert table.size == len(base) + len(delta)
        _answers_like(table, source.materialize(), ["k/f1", "k/", "k", "k/f00/x", "absenT"])


def test_folder_ranges_of_a_sorted_base_at_their_edges(tmp_path: Path) -> None:
    """Keys that are prefixes of each other ('-' and '.' sort before '/',
    '0' right after it): each folder's range in the base holds its own keys
    and no neighbour's, down to the first and last of them."""
    root = tmp_path / "tree"
    for key in ("a-b", "a.md", "a0", "a/b-x", "a/b0", "a/b/c", "a/b/c.d", "a/b/c0", "b"):
        _write(root / key, key.encode())
    true = dict(reconcile(root, SimpleFilter(), Manifest(), clock_ns=lambda: NOW).manifest.raw())
    stale = {"a": (1, 1, 1, 9001, 1, bytes(16), 1), "a/b": (2, 2, 2, 9002, 1, bytes(16), 2)}
    stale["a/b/c/d"] = (3, 3, 3, 9003, 1, bytes(16), 3)
    base = {**true, **stale}
    pure, fast, table = sorted_ways(root, _SortedSource(base))
    assert fast == pure
    assert pure["unchanged"] == len(true) and pure["removed"] == sorted(stale)
    if HAVE_NATIVE:
        assert table is not None and table.ordered
        _answers_like(table, base, ["", "a/", "a/b/", "a.", "a/b/c/", "a/b/c/d/e", "b/", "a1"])
    for key in ("a/b-x", "a/b0", "a/b/c", "a/b/c0", "a-b", "b"):  # first and last of each range
        (root / key).write_bytes(b"changed " + key.encode())
        pure, fast, _ = sorted_ways(root, _SortedSource(base))
        assert fast == pure
        assert pure["changed"] == [key], key
        (root / key).write_bytes(key.encode())
        os.utime(root / key, ns=(true[key][1], true[key][1]))


def test_empty_sorted_table(tmp_path: Path) -> None:
    """No base keys: every file is new, with or without a delta."""
    root = tmp_path / "tree"
    for key in ("x.md", "d/y.md"):
        _write(root / key, key.encode())
    true = dict(reconcile(root, SimpleFilter(), Manifest(), clock_ns=lambda: NOW).manifest.raw())
    gone: RawEntry = (5, 5, 5, 9005, 1, bytes(16), 5)
    for delta in ([], [("d/y.md", true["d/y.md"]), ("gone", None), ("z", gone)]):
        source = _SortedSource({}, delta)
        pure, fast, table = sorted_ways(root, source)
        assert fast == pure
        if HAVE_NATIVE:
            assert table is not None and table.ordered and table.size == len(delta)
            _answers_like(table, source.materialize(), ["", "x.md", "d", "d/y.md", "gone"])
    assert pure["unchanged"] == 1 and pure["added"] == ["x.md"] and pure["removed"] == ["z"]
    if HAVE_NATIVE:
        empty = native_mod.build_table(b"", b"", 0)
        assert empty is not None and (empty.ordered, empty.live, empty.size) == (True, 0, 0)
        assert empty.get(b"") is None and empty.unseen(bytearray()) == []


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
        packed = as_packed(first.manifest)
        assert packed.native_table() is None
        res = reconcile(tmp_path, SimpleFilter(), packed, clock_ns=lambda: NOW, trust_filter=True)
        assert res.unchanged == 1 and not res.has_changes
    finally:
        monkeypatch.undo()
        native_mod.reset()
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
