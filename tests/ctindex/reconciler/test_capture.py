"""Deferred capture (ctindex/reconciler/capture.py): a pass that defers its reads,
finished with a KeyReader's outcomes, says exactly what the pass reading as
it walks says; and what changes between the walk and the read (a file gone,
a folder swapped for a symlink, a refused open, a file that will not hold
still) is reported as the walk itself would have, never followed outside."""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex.reconciler import FsOps, Manifest, ReconcileResult, reconcile
from ctindex.reconciler.capture import Captured, KeyReader, complete, ship
from ctindex.reconciler.fingerprint import Fingerprint, fingerprint_of
from ctindex.reconciler.hashing import Outcome
from tests.ctindex.reconciler.fakes import SimpleFilter
from tests.ctindex.reconciler.test_native import NODES, NOW, _build, _denying, summary

ALL = SimpleFilter()


def _clock() -> int:
    return NOW


def deferred(root: str, flt: SimpleFilter = ALL, ops: FsOps | None = None) -> ReconcileResult:
    return reconcile(root, flt, Manifest(), clock_ns=_clock, ops=ops, defer_reads=True)


def finish(res: ReconcileResult, root: str, ops: FsOps | None = None) -> ReconcileResult:
    with KeyReader(root, ops=ops, clock_ns=_clock) as reader:
        complete(res, [ship([Captured.of(p.key, reader.read(p)) for p in reversed(res.pending)])])
    return res


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=NODES, cap=st.sampled_from([None, 12]))
def test_deferred_reads_equal_the_walks_own_reads(
    nodes: list[tuple[str, int, str | bytes]], cap: int | None
) -> None:
    tmp = tempfile.mkdtemp()
    try:
        root = os.path.join(tmp.encode(), b"root")
        os.mkdir(root)
        _, denied = _build(root, nodes)
        ops = _denying(denied)
        flt = SimpleFilter(max_size=cap)
        path = os.fsdecode(root)
        sink: dict[str, bytes] = {}
        walk = reconcile(path, flt, Manifest(), sink=sink.__setitem__, clock_ns=_clock, ops=ops)
        res = deferred(path, flt, ops)
        assert res.manifest.raw() == {} and len(res.pending) == walk.metrics.files_hashed
        assert summary(finish(res, path, ops)) == summary(walk)
        assert len(res.pending) == 0
    finally:
        shutil.rmtree(tmp)


def _tree(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "top.md").write_text("top")
    (root / "a" / "one.md").write_text("one")
    (root / "a" / "b" / "two.md").write_text("two")


def test_what_went_away_since_the_walk_is_reported_vanished(tmp_path: Path) -> None:
    _tree(tmp_path)
    res = deferred(str(tmp_path))
    (tmp_path / "top.md").unlink()
    shutil.rmtree(tmp_path / "a" / "b")
    finish(res, str(tmp_path))
    assert res.added == ["a/one.md"] and sorted(res.manifest.raw()) == ["a/one.md"]
    assert sorted(res.report.vanished.sample) == ["a/b/two.md", "top.md"]


@pytest.mark.parametrize("swap", ["folder", "file"])
def test_a_symlink_swapped_in_since_the_walk_is_not_followed(tmp_path: Path, swap: str) -> None:
    """The outside holds the same names: following the symlink would read
    them. The reader opens each folder and the file with O_NOFOLLOW."""
    root = tmp_path / "root"
    root.mkdir()
    _tree(root)
    outside = tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    (outside / "one.md").write_text("SECRET")
    (outside / "b" / "two.md").write_text("SECRET")
    res = deferred(str(root))
    if swap == "folder":
        (root / "a").rename(tmp_path / "a-old")
        (root / "a").symlink_to(outside)
    else:
        (root / "a" / "one.md").unlink()
        (root / "a" / "one.md").symlink_to(outside / "one.md")
    finish(res, str(root))
    gone = ["a/b/two.md", "a/one.md"] if swap == "folder" else ["a/one.md"]
    assert sorted(res.report.vanished.sample) == gone
    assert "a/one.md" not in res.manifest.raw()
    for key in res.manifest.raw():
        assert (root / key).read_text() != "SECRET"


def test_a_refused_read_is_reported_unreadable(tmp_path: Path) -> None:
    _tree(tmp_path)
    res = deferred(str(tmp_path))

    def refusing(name: Any, flags: int, *args: Any, **kw: Any) -> int:
        if os.fsdecode(name) == "one.md":
            raise PermissionError(errno.EACCES, "Permission denied", name)
        return os.open(name, flags, *args, **kw)

    finish(res, str(tmp_path), FsOps(open=refusing))
    assert res.report.unreadable_files.sample == ["a/one.md"]
    assert sorted(res.manifest.raw()) == ["a/b/two.md", "top.md"]


def test_a_file_that_keeps_changing_is_dirty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctindex.reconciler import hashing

    _tree(tmp_path)
    res = deferred(str(tmp_path))
    target = tmp_path / "top.md"
    real = hashing._read_all

    def read_while_growing(fd: int, size: int) -> bytes:
        data = real(fd, size)
        if os.fstat(fd).st_ino == target.stat().st_ino:
            with open(target, "ab") as fh:  # changes under every read
                fh.write(b"x")
        return data

    monkeypatch.setattr(hashing, "_read_all", read_while_growing)
    # The fault is injected into the pure attempt; the C one
    # (tests/ctindex/reconciler/test_hashing_native.py) gives the same verdicts.
    monkeypatch.setattr(hashing, "_attempt_native", lambda: None)
    with KeyReader(str(tmp_path), clock_ns=_clock) as reader:
        captured = [Captured.of(p.key, reader.read(p)) for p in res.pending]
    assert {c.key: c.outcome for c in captured}["top.md"] is Outcome.DIRTY
    complete(res, [ship(captured)])
    assert res.dirty == ["top.md"] and "top.md" not in res.manifest.raw()


def test_only_a_full_pass_from_nothing_defers(tmp_path: Path) -> None:
    """From a previous table, narrowed, or on an injected stat, a pass asked
    to defer reads as usual: nothing pending, the same result."""
    _tree(tmp_path)
    done = reconcile(str(tmp_path), ALL, Manifest(), clock_ns=_clock)
    (tmp_path / "top.md").write_text("changed")
    for kwargs in (
        {"previous": done.manifest},
        {"previous": Manifest(), "only": ["a"]},
        {"previous": Manifest(), "stat": os.lstat.__call__},
    ):
        sink: dict[str, bytes] = {}
        plain = reconcile(str(tmp_path), ALL, clock_ns=_clock, **kwargs)  # type: ignore[arg-type]
        asked = reconcile(
            str(tmp_path), ALL, clock_ns=_clock, sink=sink.__setitem__, defer_reads=True, **kwargs
        )  # type: ignore[arg-type]
        assert len(asked.pending) == 0 and summary(asked) == summary(plain) and sink


def test_the_reader_reuses_the_open_folders_and_closes_them(tmp_path: Path) -> None:
    _tree(tmp_path)
    opened: list[str] = []
    closed: list[int] = []

    def open_(name: Any, flags: int, *args: Any, **kw: Any) -> int:
        opened.append(os.fsdecode(name))
        return os.open(name, flags, *args, **kw)

    def close_(fd: int) -> None:
        closed.append(fd)
        os.close(fd)

    res = deferred(str(tmp_path))
    finish(res, str(tmp_path), FsOps(open=open_, close=close_))
    folders = [n for n in opened if not n.endswith(".md")]
    assert folders == [str(tmp_path), "a", "b"]  # sorted keys: a/b/two.md, a/one.md, top.md
    assert len(closed) == len(folders)  # every folder closed, files closed by read_stable


def test_a_folder_that_fails_to_open_leaves_no_stale_chain(tmp_path: Path) -> None:
    """After a folder beside the open one can not be opened, a read back in
    the first folder opens it again rather than reading in what is left of
    the chain, in any key order."""
    from ctindex.reconciler.pending import Pending

    for folder in ("a/b", "a/c"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "a/b/x.md").write_text("x in b")
    (tmp_path / "a/c/y.md").write_text("y in c")
    (tmp_path / "a/x.md").write_text("x in a")  # what a stale chain would read

    def refusing(name: Any, flags: int, *args: Any, **kw: Any) -> int:
        if os.fsdecode(name) == "c":
            raise PermissionError(errno.EACCES, "Permission denied", name)
        return os.open(name, flags, *args, **kw)

    keys = ["a/b/x.md", "a/c/y.md", "a/b/x.md", "a/x.md", "a/b/x.md"]
    with KeyReader(str(tmp_path), FsOps(open=refusing), clock_ns=_clock) as reader:
        got = [reader.read(Pending(k, fingerprint_of(os.lstat(tmp_path / k)))) for k in keys]
    assert [(r.outcome, r.data) for r in got] == [
        (Outcome.OK, b"x in b"),
        (Outcome.ERROR, b""),
        (Outcome.OK, b"x in b"),
        (Outcome.OK, b"x in a"),
        (Outcome.OK, b"x in b"),
    ]


_i64 = st.integers(-(2**63), 2**63 - 1)
_u64 = st.integers(0, 2**64 - 1)
_captured = st.one_of(
    st.builds(
        Captured,
        st.text(min_size=1).filter(lambda k: "\0" not in k),
        st.just(Outcome.OK),
        st.builds(Fingerprint, _i64, _i64, _i64, _u64, _u64),
        st.binary(min_size=16, max_size=16),
        _i64,
        _i64,
    ),
    st.builds(
        Captured,
        st.text(min_size=1),
        st.sampled_from(list(Outcome)),
        st.none() | st.builds(Fingerprint, _i64, _i64, _i64, _u64, _u64),
        st.binary(max_size=20),
        _i64,
        _i64,
        st.integers(0, 200),
        st.text(max_size=10),
    ),
)


@settings(max_examples=200, deadline=None)
# At most a report's sample (SAMPLE_SIZE) of outcomes: every key a bucket got is in it.
@given(
    captured=st.lists(_captured, max_size=20, unique_by=lambda c: c.key), parts=st.integers(1, 4)
)
@pytest.mark.slow
def test_shipments_complete_a_pass_as_each_outcome_says(
    captured: list[Captured], parts: int
) -> None:
    """What workers send back (ship, through pickle as the process pool
    sends it, one shipment each) completes the pass as each outcome, taken
    one by one, says it should."""
    # A read that succeeded always has the fingerprint it read under.
    fp = Fingerprint(1, 2, 3, 4, 5)
    captured = [
        c._replace(fingerprint=c.fingerprint or fp) if c.outcome is Outcome.OK else c
        for c in captured
    ]
    size = -(-len(captured) // parts) or 1
    shipments = [
        pickle.loads(pickle.dumps(ship(captured[i : i + size])))
        for i in range(0, len(captured), size)
    ]
    with tempfile.TemporaryDirectory() as empty:
        res = reconcile(empty, ALL, Manifest(), defer_reads=True)
    complete(res, shipments)
    ok = [c for c in captured if c.outcome is Outcome.OK]
    assert res.manifest.raw() == {c.key: (*c.fingerprint, c.digest, c.recorded_ns) for c in ok}
    assert res.added == sorted(c.key for c in ok)
    assert sorted(res.dirty) == sorted(c.key for c in captured if c.outcome is Outcome.DIRTY)
    # Gone: vanished. A failed read: filed by its errno (ENOENT is vanished too).
    gone = {c.key for c in captured if c.outcome is Outcome.GONE}
    failed = {c.key for c in captured if c.outcome is Outcome.ERROR}
    assert res.report.vanished.count >= len(gone)
    assert gone <= set(res.report.vanished.sample) <= gone | failed
    assert sum(b.count for b in _buckets(res)) == len(gone) + len(failed)
    assert res.metrics.files_hashed == len(ok)
    assert res.metrics.bytes_hashed == sum(c.size for c in ok)


def _buckets(res: ReconcileResult) -> list[Any]:
    from dataclasses import fields

    return [getattr(res.report, f.name) for f in fields(res.report)]


@pytest.mark.parametrize("claimed", [0, 1, 99_999, 100_000, 100_001, 10**6])
def test_a_read_takes_every_byte_whatever_size_it_was_told(tmp_path: Path, claimed: int) -> None:
    """read_stable sizes its first read from the fstat; a file longer than
    that (a stale NFS size) is still read to its end, so the size check
    sees the difference instead of a silently cut read."""
    from ctindex.reconciler import hashing

    data = os.urandom(100_000)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        assert hashing._read_all(fd, claimed) == data
    finally:
        os.close(fd)
    (tmp_path / "empty").write_bytes(b"")
    fd = os.open(tmp_path / "empty", os.O_RDONLY)
    try:
        assert hashing._read_all(fd, claimed) == b""
    finally:
        os.close(fd)
