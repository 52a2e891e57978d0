"""ctindex/daemon/storeguard.py: which published stores the daemon may go on
vouching for, on a real store built by the indexer."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from ctindex.daemon.storeguard import Distrust, StoreGuard
from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project


def make(root: Path, words: str = "alpha") -> Project:
    (root / ".git").mkdir(parents=True)
    (root / "kb").mkdir()
    (root / "kb" / "index.md").write_text("# kb\n")
    (root / "kb" / "a.md").write_text(f"# A\n\n{words}\n")
    return Project.at(root)


def publish(project: Project, text: str) -> str:
    (project.root / "kb" / "a.md").write_text(f"# A\n\n{text}\n")
    return transaction.update(project, load_plan(project)).identity


def test_nothing_is_judged_before_the_first_pass(tmp_path: Path) -> None:
    project = make(tmp_path / "p")
    assert StoreGuard(project.index_dir).check() is None


def test_its_own_generation_and_writers_passes_on_top_of_it_are_trusted(tmp_path: Path) -> None:
    project = make(tmp_path / "p")
    guard = StoreGuard(project.index_dir)
    guard.learn(publish(project, "beta"))
    assert guard.check() is None
    later = [publish(project, f"gamma {i}") for i in range(3)]  # `ctindex update` runs
    assert guard.check() is None
    assert guard.known == later[-1]
    rebuilt = transaction.rebuild(project, load_plan(project)).identity  # `ctindex rebuild`
    assert guard.check() is None and guard.known == rebuilt


def test_an_older_manifest_restored_is_reported(tmp_path: Path) -> None:
    project = make(tmp_path / "p")
    publish(project, "beta")
    old = (project.index_dir / "MANIFEST").read_bytes()
    guard = StoreGuard(project.index_dir)
    guard.learn(publish(project, "gamma"))
    (project.index_dir / "MANIFEST").write_bytes(old)
    why = guard.check()
    assert why is not None and not why.verify and "not one published on top of" in why.why


def test_a_store_published_in_another_folder_is_reported_even_with_our_lineage(
    tmp_path: Path,
) -> None:
    """A copy of the project forked from our generation, updated there and
    copied back: its lineage names ours, its home does not."""
    project = make(tmp_path / "p")
    guard = StoreGuard(project.index_dir)
    guard.learn(publish(project, "beta"))
    fork = tmp_path / "fork"
    shutil.copytree(project.root, fork, symlinks=True)
    forked = Project.at(fork)
    publish(forked, "delta only in the fork")
    shutil.rmtree(project.index_dir)
    shutil.copytree(forked.index_dir, project.index_dir)
    why = guard.check()
    assert why is not None and not why.verify and "another folder" in why.why


def test_a_removed_manifest_damage_and_a_resized_segment_are_reported(tmp_path: Path) -> None:
    project = make(tmp_path / "p")
    guard = StoreGuard(project.index_dir)
    guard.learn(publish(project, "beta"))
    seg = next(project.index_dir.glob("seg-*.seg"))
    with seg.open("ab") as f:
        f.write(b"x")
    assert "bytes, the manifest says" in str(guard.check())
    os.truncate(seg, seg.stat().st_size - 1)
    assert guard.check() is None
    manifest = project.index_dir / "MANIFEST"
    data = manifest.read_bytes()
    manifest.write_bytes(data[:-8])
    assert "checksum" in str(guard.check())
    manifest.unlink()
    assert guard.check() == Distrust("MANIFEST removed")


def settled() -> int:
    """A wall clock far enough ahead that nothing just written is racily clean."""
    return time.time_ns() + 60 * 10**9


def test_a_settled_manifest_is_read_once_then_vouched_for_by_its_fingerprint(
    tmp_path: Path,
) -> None:
    project = make(tmp_path / "p")
    guard = StoreGuard(project.index_dir, clock_ns=settled)
    guard.learn(publish(project, "beta"))
    assert [guard.check() for _ in range(4)] == [None] * 4
    assert guard.manifest.reads == 1
    later = publish(project, "gamma")  # another file: read again, then vouched for
    assert [guard.check() for _ in range(3)] == [None] * 3
    assert guard.manifest.reads == 2 and guard.known == later


def test_a_racily_clean_manifest_is_read_on_every_check(tmp_path: Path) -> None:
    project = make(tmp_path / "p")
    guard = StoreGuard(project.index_dir)  # the real clock: published this instant
    guard.learn(publish(project, "beta"))
    assert [guard.check() for _ in range(3)] == [None] * 3
    assert guard.manifest.reads == 3


def test_an_older_manifest_written_back_in_place_with_its_mtime_is_reported(
    tmp_path: Path,
) -> None:
    """The cached manifest's fingerprint must not vouch for other bytes: the
    same inode, the accepted file's mtime put back (`cp -p`, `tar`), only
    ctime tells."""
    project = make(tmp_path / "p")
    publish(project, "beta")
    manifest = project.index_dir / "MANIFEST"
    old = manifest.read_bytes()
    guard = StoreGuard(project.index_dir, clock_ns=settled)
    guard.learn(publish(project, "gamma"))
    assert guard.check() is None and guard.check() is None and guard.manifest.reads == 1
    st = manifest.stat()
    with manifest.open("r+b") as f:
        f.write(old)
        f.truncate()
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
    why = guard.check()
    assert why is not None and not why.verify and "not one published on top of" in why.why


def test_a_generation_published_through_a_network_mount_is_verified_not_learnt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client of the share published on top of ours through its mount (no
    home folder recorded): in the lineage, but built from the client's view.
    The guard keeps vouching for nothing new until a full pass of the
    daemon's own learns the generation it checked (the driver's part)."""
    from ctindex.store import writer

    project = make(tmp_path / "p")
    guard = StoreGuard(project.index_dir)
    ours = publish(project, "beta")
    guard.learn(ours)
    monkeypatch.setattr(writer, "_home", lambda _index_dir: None)
    theirs = publish(project, "gamma through a mount")
    distrust = guard.check()
    assert distrust is not None and distrust.verify and "network mount" in distrust.why
    assert guard.known == ours  # asked again: still in doubt
    assert guard.check() == distrust
    guard.learn(theirs)  # the full pass found it current (or published over it)
    assert guard.check() is None
