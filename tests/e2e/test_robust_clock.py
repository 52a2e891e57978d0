"""Robustness, clock and stat (docs/reliability.md, "Clock and stat"):
Racy-clean and coarse-timestamp behaviour, deterministically,
through the indexer (not only the reconciler): the reconciler's `stat` and
`clock_ns` are injected with tests/ctindex/reconciler/fakes.py's distorted views of the
filesystem (rounded timestamps like HFS+/FAT, an NFS-like attribute cache,
FUSE-like inode renumbering) and a clock the test moves by hand.

What is provable, and what is not (docs/reliability.md):
* an edit inside the racy window (2 s after the content was read) is found,
  even when it keeps the size and the mtime and the filesystem has no ctime;
* outside the window such a forged edit is invisible unless ctime moved (the
  limit git has; on POSIX ctime cannot be set back by users);
* behind an attribute cache (NFS actimeo) staleness is bounded by the cache
  lifetime: the first pass after it expires finds every change; before, a
  pass can trust cached attributes (no filesystem-independent way to know);
* renumbered inodes/devices (FUSE, CIFS remounts) are metadata-only changes,
  never re-indexing or delete+add; renames are still found by content.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctindex import reconciler
from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from tests.conftest import write_config
from tests.ctindex.reconciler.fakes import AttributeCacheStat, RemappingStat, rounding_stat

S = 1_000_000_000
# A whole second (rounding keeps it), later than any real ctime the test's
# writes get: the real ctime is then never inside the racy window by accident.
T0 = (time.time_ns() // S + 1000) * S


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    write_config(tmp_path, "kb", watch=False)
    (tmp_path / "kb").mkdir()
    yield Project.at(tmp_path)


@pytest.fixture
def inject(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Make every reconcile the indexer runs use this stat and clock."""
    real = reconciler.reconcile

    def use(stat: Callable[[str], Any], clock: Clock) -> None:
        monkeypatch.setattr(
            reconciler, "reconcile", functools.partial(real, stat=stat, clock_ns=clock)
        )

    return use


def write(project: Project, key: str, text: str, mtime_ns: int) -> Path:
    import os

    path = Path(project.root) / key
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def update(project: Project) -> transaction.UpdateReport:
    return transaction.update(project, load_plan(project))


def found(project: Project, word: str) -> set[str]:
    from ctindex.search.execute import search_index
    from ctindex.search.query import parse_query

    out = search_index(project.index_dir, parse_query(word), 100, want_keys=True)
    return set(out.keys)


def test_robust_clock_same_size_edit_in_racy_window_is_found(
    project: Project, inject: Callable[..., None]
) -> None:
    clock = Clock(T0 + 300_000_000)
    # 1 s timestamps and ctime mirroring mtime: the edit below leaves the
    # whole fingerprint (size, mtime, ctime, inode) exactly as it was.
    inject(rounding_stat(S, ctime_is_mtime=True), clock)
    write(project, "kb/a.md", "# A\n\nalpha word\n", T0)
    assert update(project).added == 1
    write(project, "kb/a.md", "# A\n\nbravo word\n", T0)  # same size, same mtime
    clock.now = T0 + 600_000_000  # still inside the 2 s window of the first read
    report = update(project)
    assert report.changed == 1
    assert found(project, "bravo") == {"kb/a.md"} and found(project, "alpha") == set()
    # Once the window has passed, the entry (re-read at 0.6 s) is trusted.
    clock.now = T0 + 5 * S
    assert update(project).changed == 0


def test_robust_clock_two_second_timestamps_racy_rule(
    project: Project, inject: Callable[..., None]
) -> None:
    """FAT: 2 s mtime steps. An edit 1.5 s after indexing rounds to the same
    stamp; the read happened inside the window, so it is re-read and found."""
    clock = Clock(T0 + 100_000_000)
    inject(rounding_stat(2 * S, ctime_is_mtime=True), clock)
    write(project, "kb/f.md", "# F\n\ncharlie\n", T0)
    update(project)
    write(project, "kb/f.md", "# F\n\ndeltaaa\n", T0 + 1_500_000_000)  # rounds to T0
    clock.now = T0 + 1_900_000_000
    assert update(project).changed == 1
    assert found(project, "deltaaa") == {"kb/f.md"}


def test_robust_clock_limit_forged_edit_outside_window_needs_ctime(
    project: Project, inject: Callable[..., None]
) -> None:
    """The documented limit: first read well after the mtime, then a same-size
    edit with the mtime restored. Without ctime (mirrored) it is invisible;
    with the real ctime (POSIX: users cannot set it back) it is found."""
    import os

    clock = Clock(T0 + 10 * S)
    inject(rounding_stat(S, ctime_is_mtime=True), clock)
    write(project, "kb/a.md", "# A\n\nalpha word\n", T0)
    update(project)
    write(project, "kb/a.md", "# A\n\nbravo word\n", T0)
    clock.now = T0 + 11 * S
    assert update(project).changed == 0  # invisible to the fingerprint: the limit
    assert found(project, "alpha") == {"kb/a.md"}
    inject(os.lstat, clock)  # the real ctime moved with the write
    assert update(project).changed == 1
    assert found(project, "bravo") == {"kb/a.md"}


def test_robust_clock_nfs_attribute_cache_staleness_is_bounded(
    project: Project, inject: Callable[..., None]
) -> None:
    clock = Clock(T0)
    stat = AttributeCacheStat(3 * S, clock)
    inject(stat, clock)
    write(project, "kb/n.md", "# N\n\nechoword\n", T0 - 100 * S)
    update(project)
    write(project, "kb/n.md", "# N\n\nfoxtrotword grows the file\n", T0 - 100 * S)
    clock.now = T0 + 1 * S  # the client still serves the attributes fetched at T0
    stale = update(project)
    assert stale.changed == 0 and found(project, "echoword") == {"kb/n.md"}  # the limit
    clock.now = T0 + 3 * S  # cache expired: the first pass after it finds the change
    assert update(project).changed == 1
    assert found(project, "foxtrotword") == {"kb/n.md"} and found(project, "echoword") == set()


def test_robust_clock_nfs_cached_size_never_indexes_a_torn_read(
    project: Project, inject: Callable[..., None]
) -> None:
    """A file read while the cached size disagrees with what is on disk is
    held back as dirty (retried later), never indexed from a mismatched view."""
    clock = Clock(T0)
    stat = AttributeCacheStat(3 * S, clock)
    inject(stat, clock)
    write(project, "kb/g.md", "# G\n\ngolfword\n", T0 - 100 * S)
    stat(str(Path(project.root) / "kb" / "g.md"))  # attributes cached now
    write(project, "kb/g.md", "# G\n\nhotelword and a longer body\n", T0 - 100 * S)
    report = update(project)  # a new key: it must be read, under a stale size
    assert report.dirty == 1 and report.added == 0
    assert found(project, "golfword") == set() and found(project, "hotelword") == set()
    clock.now = T0 + 3 * S
    assert update(project).added == 1
    assert found(project, "hotelword") == {"kb/g.md"}


def test_robust_clock_fuse_inode_renumbering_is_metadata_only(
    project: Project, inject: Callable[..., None]
) -> None:
    clock = Clock(T0 + 10 * S)
    stat = RemappingStat()
    inject(stat, clock)
    for i in range(5):
        write(project, f"kb/r{i}.md", f"# R{i}\n\nromeo{i} shared\n", T0)
    first = update(project)
    assert first.added == 5
    stat.remount()
    again = update(project)
    assert (again.added, again.changed, again.removed, again.renamed) == (0, 0, 0, 0)
    assert again.metadata_only == 5 and again.generation == first.generation
    stat.remount()
    (Path(project.root) / "kb" / "r0.md").rename(Path(project.root) / "kb" / "moved.md")
    moved = update(project)
    assert moved.renamed == 1 and moved.changed == 0
    assert found(project, "romeo0") == {"kb/moved.md"}
    assert len(found(project, "shared")) == 5
