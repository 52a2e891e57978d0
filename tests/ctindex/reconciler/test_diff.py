"""Diff semantics: added/changed/removed/renamed, metadata-only, racy-clean, dirty, narrowed."""

from __future__ import annotations

import os
from pathlib import Path

import xxhash

from ctindex.reconciler import Manifest, reconcile
from ctindex.reconciler.manifest import DIRTY_SIZE
from tests.ctindex.reconciler.fakes import SimpleFilter, rounding_stat, with_fields

ALL = SimpleFilter()
SEC = 1_000_000_000


def write(p: Path, data: bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def settled(base: Path) -> Manifest:
    """A manifest recorded long after the files were written (nothing racy)."""
    far = max(os.lstat(p).st_ctime_ns for p in base.rglob("*")) + 100 * SEC
    return reconcile(base, ALL, Manifest(), clock_ns=lambda: far).manifest


def test_added_changed_removed_unchanged(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", b"one")
    write(tmp_path / "d/b.txt", b"two")
    write(tmp_path / "d/c.txt", b"three")
    m = settled(tmp_path)
    write(tmp_path / "a.txt", b"ONE!")
    write(tmp_path / "d/e.txt", b"brand new")  # before the unlink: no inode reuse -> no rename
    (tmp_path / "d/b.txt").unlink()
    res = reconcile(tmp_path, ALL, m)
    assert res.changed == ["a.txt"]
    assert res.removed == ["d/b.txt"]
    assert res.added == ["d/e.txt"]
    assert res.unchanged == 1
    assert sorted(res.manifest) == ["a.txt", "d/c.txt", "d/e.txt"]
    assert res.manifest["a.txt"].digest == xxhash.xxh3_128_digest(b"ONE!")
    assert res.metrics.counts["changed"] == 1 and res.metrics.files_hashed == 2


def test_nothing_changed_reads_nothing(tmp_path: Path) -> None:
    for i in range(20):
        write(tmp_path / f"d{i % 3}/f{i}", b"x" * i)
    m = settled(tmp_path)
    res = reconcile(tmp_path, ALL, m)
    assert res.metrics.files_hashed == 0 and res.unchanged == 20
    assert not res.has_changes and res.manifest == m


def test_sink_gets_exact_bytes_of_new_content(tmp_path: Path) -> None:
    write(tmp_path / "keep", b"same")
    m = settled(tmp_path)
    write(tmp_path / "new", b"fresh")
    write(tmp_path / "keep", b"SAME")
    got: dict[str, bytes] = {}
    res = reconcile(tmp_path, ALL, m, sink=got.__setitem__)
    assert got == {"new": b"fresh", "keep": b"SAME"}
    for k, data in got.items():
        assert res.manifest[k].digest == xxhash.xxh3_128_digest(data)


def test_rename_by_inode_and_by_content(tmp_path: Path) -> None:
    write(tmp_path / "a", b"alpha")
    write(tmp_path / "b", b"beta")
    m = settled(tmp_path)
    os.rename(tmp_path / "a", tmp_path / "a2")  # same inode
    data = (tmp_path / "b").read_bytes()
    (tmp_path / "b").unlink()
    write(tmp_path / "b2", data)  # new inode, same content
    got: dict[str, bytes] = {}
    res = reconcile(tmp_path, ALL, m, sink=got.__setitem__)
    assert sorted(res.renamed) == [("a", "a2"), ("b", "b2")]
    assert res.added == [] and res.removed == []
    assert got == {"a2": b"alpha", "b2": b"beta"}  # the new path's content is still delivered


def test_metadata_only_when_fingerprint_moves_but_content_does_not(tmp_path: Path) -> None:
    f = write(tmp_path / "t", b"content")
    m = settled(tmp_path)
    os.utime(f, ns=(0, 12345 * SEC))
    res = reconcile(tmp_path, ALL, m)
    assert res.metadata_only == ["t"] and res.changed == []
    assert res.manifest["t"].fp.mtime_ns == 12345 * SEC


def test_inode_remap_with_same_content_is_by_path(tmp_path: Path) -> None:
    """FUSE/CIFS may renumber inodes: same path + same content is not delete+create."""
    write(tmp_path / "f", b"stable")
    m = settled(tmp_path)

    def remapped(path: str) -> os.stat_result:
        st = os.lstat(path)
        return with_fields(st, st_ino=st.st_ino + 1000, st_dev=st.st_dev + 1)

    res = reconcile(tmp_path, ALL, m, stat=remapped)
    assert res.metadata_only == ["f"]
    assert not (res.added or res.removed or res.renamed or res.changed)


def _racy_case(tmp_path: Path, step_ns: int, clock_offset_ns: int) -> tuple[list[str], int]:
    """Write, record, then edit in place (same size, mtime restored): what does pass 2 see?"""
    stat = rounding_stat(step_ns, ctime_is_mtime=True)
    f = write(tmp_path / "r", b"v1-data")
    os.utime(f, ns=(0, 1_000_000 * SEC + 300_000_000))  # mtime well inside one step
    mtime = stat(str(f)).st_mtime_ns
    clock = lambda: mtime + clock_offset_ns  # noqa: E731 - deterministic "now"
    m = reconcile(tmp_path, ALL, Manifest(), stat=stat, clock_ns=clock).manifest
    write(f, b"v2-data")
    os.utime(f, ns=(0, 1_000_000 * SEC + 300_000_000))
    res = reconcile(tmp_path, ALL, m, stat=stat, clock_ns=clock)
    return res.changed, res.metrics.counts.get("racy_rehashed", 0)


def test_racy_clean_caught_with_1s_timestamps(tmp_path: Path) -> None:
    assert _racy_case(tmp_path, SEC, SEC // 2) == (["r"], 1)


def test_racy_clean_caught_with_2s_timestamps(tmp_path: Path) -> None:
    assert _racy_case(tmp_path, 2 * SEC, SEC + SEC // 2) == (["r"], 1)


def test_outside_racy_window_a_full_match_is_trusted(tmp_path: Path) -> None:
    # Recorded 10 s after the mtime: the fingerprint is trusted, the file is not read.
    # (This is the documented limit: a later edit that forges size+mtime+ctime is invisible.)
    assert _racy_case(tmp_path, SEC, 10 * SEC) == ([], 0)


def test_racy_entry_rehashed_unchanged_is_not_reported(tmp_path: Path) -> None:
    write(tmp_path / "f", b"data")
    m = reconcile(tmp_path, ALL, Manifest()).manifest  # recorded right now: racy
    res = reconcile(tmp_path, ALL, m)
    assert res.metrics.counts.get("racy_rehashed") == 1 and res.unchanged == 1
    assert not res.has_changes


def test_file_changing_during_read_is_dirty_and_rehashed_next_time(tmp_path: Path) -> None:
    write(tmp_path / "hot", b"aaaa")
    write(tmp_path / "cold", b"bbbb")
    m = settled(tmp_path)
    write(tmp_path / "hot", b"AAAA")
    ticks = iter(range(1, 10_000))

    def churning(path: str) -> os.stat_result:  # every look sees a newer mtime
        st = os.lstat(path)
        if path.endswith("/hot"):
            return with_fields(st, st_mtime_ns=st.st_mtime_ns + next(ticks))
        return st

    got: dict[str, bytes] = {}
    res = reconcile(tmp_path, ALL, m, stat=churning, sink=got.__setitem__)
    assert res.dirty == ["hot"] and res.changed == [] and got == {}
    assert res.manifest["hot"].fp.size == DIRTY_SIZE  # old digest kept, forced re-hash
    assert res.manifest["hot"].digest == m["hot"].digest
    res2 = reconcile(tmp_path, ALL, res.manifest)
    assert res2.changed == ["hot"] and res2.dirty == []


def test_change_between_walk_and_read_is_retried_not_dirty(tmp_path: Path) -> None:
    write(tmp_path / "f", b"0123")
    m = settled(tmp_path)
    calls = {"n": 0}

    def once_stale(path: str) -> os.stat_result:  # the walk's view is stale once
        calls["n"] += 1
        st = os.lstat(path)
        return with_fields(st, st_size=999) if calls["n"] == 1 else st

    write(tmp_path / "f", b"4567")
    res = reconcile(tmp_path, ALL, m, stat=once_stale)
    assert res.changed == ["f"] and res.dirty == []
    assert res.manifest["f"].fp.size == 4


def test_narrowed_file_folder_and_vanished_keys(tmp_path: Path) -> None:
    write(tmp_path / "a/x", b"x")
    write(tmp_path / "a/y", b"y")
    write(tmp_path / "b/z", b"z")
    write(tmp_path / "c", b"c")
    m = settled(tmp_path)
    write(tmp_path / "a/x", b"X!")
    write(tmp_path / "b/z", b"Z!")  # outside `only`: must be carried over untouched
    # Before the unlink: a file made after it may take c's inode, and a
    # removed inode seen again is paired as a rename (this test failed so).
    write(tmp_path / "a/new/deep", b"d")
    (tmp_path / "c").unlink()
    res = reconcile(tmp_path, ALL, m, only=["a", "c", "no/such"])
    assert res.changed == ["a/x"] and res.removed == ["c"] and res.added == ["a/new/deep"]
    assert res.manifest["b/z"] == m["b/z"]
    full = reconcile(tmp_path, ALL, m)
    for k in ("a/x", "a/y", "a/new/deep"):
        assert full.manifest[k].digest == res.manifest[k].digest
    assert "c" not in full.manifest and full.changed == ["a/x", "b/z"]


def test_narrowed_respects_pruning_and_roots(tmp_path: Path) -> None:
    write(tmp_path / "docs/skip/x", b"x")
    write(tmp_path / "docs/ok", b"ok")
    write(tmp_path / "outside", b"o")
    flt = SimpleFilter(root_keys=("docs",), skip_dirs=frozenset({"skip"}))
    m = reconcile(tmp_path, flt, Manifest()).manifest
    assert sorted(m) == ["docs/ok"]
    res = reconcile(tmp_path, flt, m, only=["docs/skip/x", "outside", "docs/ok"])
    assert sorted(res.manifest) == ["docs/ok"] and not res.added


def test_size_limit_decided_by_filter(tmp_path: Path) -> None:
    write(tmp_path / "small", b"1")
    write(tmp_path / "big", b"1" * 100)
    res = reconcile(tmp_path, SimpleFilter(max_size=10), Manifest())
    assert res.added == ["small"] and res.metrics.counts["rejected"] == 1


def test_nested_root_under_pruned_folder_full_and_narrowed_agree(tmp_path: Path) -> None:
    write(tmp_path / "top/f", b"1")
    write(tmp_path / "top/skip/g", b"2")  # pruned for root "top", but a root of its own
    write(tmp_path / "top/skip/sub/h", b"3")
    flt = SimpleFilter(root_keys=("top", "top/skip/sub"), skip_dirs=frozenset({"skip"}))
    full = reconcile(tmp_path, flt, Manifest())
    assert sorted(full.manifest) == ["top/f", "top/skip/sub/h"]
    narrow = reconcile(tmp_path, flt, Manifest(), only=["top/skip", "top/f/", "top/f"])
    assert sorted(narrow.manifest) == ["top/f", "top/skip/sub/h"]
    assert narrow.added == full.added


def test_only_base_is_a_full_pass(tmp_path: Path) -> None:
    write(tmp_path / "a/b", b"1")
    m = settled(tmp_path)
    (tmp_path / "a/b").unlink()
    res = reconcile(str(tmp_path), ALL, m, only=[".", "a/b"])
    assert res.removed == ["a/b"] and len(res.manifest) == 0


def test_metrics_and_report_are_plain_data(tmp_path: Path) -> None:
    for i in range(25):
        os.symlink("/nonexistent", tmp_path / f"l{i}")
    write(tmp_path / "f", b"abc")
    res = reconcile(tmp_path, ALL, Manifest())
    d = res.metrics.as_dict()
    assert d["entries_visited"] == 26 and d["files_hashed"] == 1 and d["bytes_hashed"] == 3
    assert d["counts"] == res.metrics.counts and res.metrics.counts["symlinks"] == 25
    assert res.report.as_dict()["vanished"] == {"count": 0, "sample": []}


def test_default_stat_fast_path_agrees_with_an_injected_stat(tmp_path: Path) -> None:
    """The walker checks fingerprints inline only with the default stat; an
    injected stat takes the general path. Both must classify alike."""
    for i in range(12):
        write(tmp_path / f"d{i % 3}/f{i}", b"v%d" % i)
    m = settled(tmp_path)
    write(tmp_path / "d0/f0", b"changed")
    os.utime(tmp_path / "d1/f1", ns=(SEC, SEC))  # touched: metadata only
    write(tmp_path / "d2/new", b"new")
    clock = m["d0/f3"].recorded_ns + 10 * SEC
    fast = reconcile(tmp_path, ALL, m, clock_ns=lambda: clock)
    slow = reconcile(tmp_path, ALL, m, stat=lambda p: os.lstat(p), clock_ns=lambda: clock)
    assert fast.unchanged == slow.unchanged == 10
    for kind in ("added", "changed", "removed", "metadata_only", "dirty"):
        assert getattr(fast, kind) == getattr(slow, kind), kind
    assert fast.manifest == slow.manifest
    assert (fast.changed, fast.metadata_only, fast.added) == (["d0/f0"], ["d1/f1"], ["d2/new"])
