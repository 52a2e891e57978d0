"""reconcile(ctime_blind=True): a tree seen through a filesystem that keeps
no ctime of its own and numbers inodes itself (sshfs: whole-second mtimes,
ctime = mtime, its own inode and device numbers), against a table recorded
where the files live. Size and mtime at the mount's precision are the rule:
nothing is re-read for the mount's other numbers, every change a stat can
show is found, and the racy rule still holds."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.reconciler import Manifest, reconcile
from ctindex.reconciler.diff import same_mtime
from tests.ctindex.reconciler.fakes import RemappingStat, SimpleFilter, rounding_stat

ALL = SimpleFilter()
SEC = 1_000_000_000


def mount_view() -> RemappingStat:
    """What a client of the share sees: sftp's whole seconds, ctime = mtime,
    the mount's own inode and device numbers."""
    return RemappingStat(rounding_stat(SEC, ctime_is_mtime=True))


def write(p: Path, data: bytes, mtime_ns: int | None = None) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    if mtime_ns is not None:
        os.utime(p, ns=(mtime_ns, mtime_ns))


def recorded_at_home(base: Path) -> Manifest:
    """The table the share's host records (full fingerprints, nothing racy)."""
    far = max(os.lstat(p).st_ctime_ns for p in base.rglob("*")) + 100 * SEC
    return reconcile(base, ALL, Manifest(), clock_ns=lambda: far).manifest


def test_a_table_recorded_at_home_is_trusted_through_the_mount(tmp_path: Path) -> None:
    for i in range(30):
        write(tmp_path / f"d{i % 4}/f{i}.md", b"x" * i, mtime_ns=1_700_000_000 * SEC + i * 7919)
    home = recorded_at_home(tmp_path)
    view = mount_view()
    full = reconcile(tmp_path, ALL, home, stat=view)
    assert full.metrics.files_hashed == 30  # the full rule re-reads all of it
    blind = reconcile(tmp_path, ALL, home, stat=view, ctime_blind=True)
    assert blind.metrics.files_hashed == 0 and blind.unchanged == 30
    assert not blind.has_changes and blind.manifest == home


def test_every_change_a_stat_can_show_is_found(tmp_path: Path) -> None:
    t = 1_700_000_000 * SEC
    write(tmp_path / "same.md", b"kept", t)
    write(tmp_path / "grown.md", b"short", t)
    write(tmp_path / "touched.md", b"same size", t)
    write(tmp_path / "gone.md", b"bye", t)
    home = recorded_at_home(tmp_path)
    write(tmp_path / "grown.md", b"longer now", t)  # size differs, mtime restored
    write(tmp_path / "touched.md", b"SAME SIZE", t + 5 * SEC)  # same size, mtime moved
    (tmp_path / "gone.md").unlink()
    write(tmp_path / "new.md", b"fresh", t)
    res = reconcile(tmp_path, ALL, home, stat=mount_view(), ctime_blind=True)
    assert sorted(res.changed) == ["grown.md", "touched.md"]
    assert res.removed == ["gone.md"] and res.added == ["new.md"]
    assert res.unchanged == 1


def test_what_it_cannot_see_is_a_same_size_rewrite_with_its_mtime_restored(
    tmp_path: Path,
) -> None:
    """The documented blind spot (the caller labels it), and the full rule
    on the files' own disk still sees it: ctime moved there."""
    t = 1_700_000_000 * SEC
    write(tmp_path / "a.md", b"before", t)
    home = recorded_at_home(tmp_path)
    write(tmp_path / "a.md", b"after!", t)  # cp -p, rsync -a, tar -x
    assert not reconcile(tmp_path, ALL, home, stat=mount_view(), ctime_blind=True).has_changes
    assert reconcile(tmp_path, ALL, home).changed == ["a.md"]


def test_a_recent_ctime_at_home_does_not_make_the_record_racy(tmp_path: Path) -> None:
    """Copied with its mtime kept (cp -p) and indexed at once at home: the
    record's ctime is recent, its mtime old. The mount shows no ctime, so
    only the mtime's age decides, and it is old enough."""
    write(tmp_path / "a.md", b"text", 1_700_000_000 * SEC)
    st = os.lstat(tmp_path / "a.md")
    home = reconcile(tmp_path, ALL, Manifest(), clock_ns=lambda: st.st_ctime_ns).manifest
    res = reconcile(tmp_path, ALL, home, stat=mount_view(), ctime_blind=True)
    assert res.metrics.files_hashed == 0 and res.unchanged == 1


def test_the_racy_rule_still_holds(tmp_path: Path) -> None:
    """A record made within one granularity of the file's mtime proves
    nothing: the file is read again, blind or not."""
    write(tmp_path / "a.md", b"text")
    st = os.lstat(tmp_path / "a.md")
    racy = reconcile(tmp_path, ALL, Manifest(), clock_ns=lambda: st.st_mtime_ns).manifest
    res = reconcile(tmp_path, ALL, racy, stat=mount_view(), ctime_blind=True)
    assert res.metrics.files_hashed == 1 and res.metrics.counts.get("racy_rehashed") == 1


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**40),
    st.integers(-(10**10), 10**10),
)
def test_same_mtime_agrees_to_the_precision_shown(recorded_s: int, delta_ns: int) -> None:
    recorded = recorded_s * SEC + abs(delta_ns) % SEC
    shown_whole = recorded // SEC * SEC
    assert same_mtime(recorded, shown_whole)  # sftp's seconds: the record agrees
    other = recorded + delta_ns
    if other % SEC:  # a mount that shows nanoseconds: they must all agree
        assert same_mtime(recorded, other) == (delta_ns == 0)
    else:
        assert same_mtime(recorded, other) == (recorded // SEC == other // SEC)
