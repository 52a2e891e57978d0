"""The walk without dir_fd (ctindex/reconciler/path_folders.py): same answers as the
descriptor walk, and a swapped folder or file is refused, not followed."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ctindex.reconciler import FsOps, Manifest, path_folders, platform_features, reconcile
from tests.ctindex.reconciler.fakes import SimpleFilter

ALL = SimpleFilter()
NOW = 2_000_000_000_000_000_000
FD_OPS = FsOps(
    scandir=os.scandir,
    open=os.open,
    close=os.close,
    lstat_at=lambda name, *, dir_fd: os.stat(name, dir_fd=dir_fd, follow_symlinks=False),
)
PATH_OPS = FsOps(
    scandir=path_folders.scandir,
    open=path_folders.open_at,
    close=path_folders.close,
    lstat_at=path_folders.lstat_at,
)


def _tree(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "top.md").write_text("top")
    (root / "a" / "one.md").write_text("one")
    (root / "a" / "b" / "two.md").write_text("two\r\nlines")
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    (root / "link").symlink_to(outside)
    (root / "a" / "linked.md").symlink_to(outside / "secret.md")


@pytest.mark.parametrize("workers", [0, 4])
def test_path_walk_gives_the_descriptor_walks_answers(tmp_path: Path, workers: int) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _tree(root)
    by_fd = reconcile(root, ALL, Manifest(), clock_ns=lambda: NOW, ops=FD_OPS, workers=workers)
    by_path = reconcile(root, ALL, Manifest(), clock_ns=lambda: NOW, ops=PATH_OPS, workers=workers)
    assert sorted(by_path.added) == sorted(by_fd.added) == ["a/b/two.md", "a/one.md", "top.md"]
    assert dict(by_path.manifest.raw()) == dict(by_fd.manifest.raw())
    assert by_path.metrics.counts == by_fd.metrics.counts
    assert by_path.metrics.counts["symlinks"] == 2  # seen, not followed
    assert path_folders.open_count() == 0  # every folder handle was closed


def test_a_symlinked_folder_is_refused_like_o_nofollow(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(OSError) as got:
        path_folders.open_at(str(tmp_path / "link"), path_folders.WANT_DIR)
    assert got.value.errno == errno.ELOOP
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError) as got:
        path_folders.open_at(str(tmp_path / "file"), path_folders.WANT_DIR)
    assert got.value.errno == errno.ENOTDIR


def test_a_folder_swapped_during_the_walk_is_not_listed(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "inside.md").write_text("in")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    handle = path_folders.open_at(str(tmp_path / "d"), path_folders.WANT_DIR)
    try:
        (tmp_path / "d").rename(tmp_path / "d-old")
        (tmp_path / "d").symlink_to(outside)  # the path now leads outside
        with pytest.raises(OSError) as got, path_folders.scandir(handle):
            pass
        assert got.value.errno == errno.ENOENT
    finally:
        path_folders.close(handle)
    assert path_folders.open_count() == 0


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_parent_swapped_for_a_symlink_does_not_lead_outside(tmp_path: Path, kind: str) -> None:
    """The name exists on both sides: lstat and open both follow the swapped
    parent to the outside entry, so only the parent's identity gives it away."""
    (tmp_path / "d" / "same").mkdir(parents=True)
    (tmp_path / "d" / "same.md").write_text("in")
    outside = tmp_path / "outside"
    (outside / "same").mkdir(parents=True)
    (outside / "same.md").write_text("secret")
    handle = path_folders.open_at(str(tmp_path / "d"), path_folders.WANT_DIR)
    try:
        (tmp_path / "d").rename(tmp_path / "d-old")
        (tmp_path / "d").symlink_to(outside)
        name, flags = (
            ("same.md", os.O_RDONLY) if kind == "file" else ("same", path_folders.WANT_DIR)
        )
        with pytest.raises(OSError) as got:
            path_folders.open_at(name, flags, dir_fd=handle)
        assert got.value.errno == errno.ENOENT
    finally:
        path_folders.close(handle)
    assert path_folders.open_count() == 0


@pytest.mark.skipif(not path_folders.tells_final_path(), reason="the system does not tell it")
def test_a_parent_swapped_out_and_back_between_the_checks_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ABA: the parent is a symlink to the outside while the file is looked
    up and opened, and the real folder again when its identity is checked.
    The open file's real path gives it away: closed unread."""
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "same.md").write_text("in")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "same.md").write_text("secret")
    top = path_folders.open_at(str(root), path_folders.WANT_DIR)
    handle = path_folders.open_at("d", path_folders.WANT_DIR, dir_fd=top)
    real_check = path_folders._check
    opened: list[int] = []
    real_open = os.open

    def spy_open(path: str, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        opened.append(fd)
        return fd

    try:
        (root / "d").rename(root / "d-real")
        (root / "d").symlink_to(outside)

        def swap_back_then_check(folder: path_folders.Folder) -> None:
            if (root / "d").is_symlink():  # the swap back lands just before the check
                (root / "d").unlink()
                (root / "d-real").rename(root / "d")
            real_check(folder)

        monkeypatch.setattr(path_folders, "_check", swap_back_then_check)
        monkeypatch.setattr(path_folders.os, "open", spy_open)
        with pytest.raises(OSError) as got:
            path_folders.open_at("same.md", os.O_RDONLY, dir_fd=handle)
        assert got.value.errno == errno.ENOENT
        assert len(opened) == 1  # it was opened (outside), then closed unread
        with pytest.raises(OSError):
            os.fstat(opened[0])
        monkeypatch.undo()
        fd = path_folders.open_at("same.md", os.O_RDONLY, dir_fd=handle)  # the real one
        try:
            assert os.read(fd, 10) == b"in"
        finally:
            os.close(fd)
    finally:
        path_folders.close(handle)
        path_folders.close(top)
    assert path_folders.open_count() == 0


def test_the_final_path_is_where_the_file_is(tmp_path: Path) -> None:
    (tmp_path / "f.md").write_text("x")
    fd = os.open(tmp_path / "f.md", os.O_RDONLY)
    try:
        got = path_folders.final_path(fd)
        if path_folders.tells_final_path():
            assert got == os.path.realpath(tmp_path / "f.md")
        else:
            assert got is None
    finally:
        os.close(fd)


def test_a_file_replaced_by_a_symlink_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("secret")
    (tmp_path / "f.md").symlink_to(tmp_path / "secret.md")
    handle = path_folders.open_at(str(tmp_path), path_folders.WANT_DIR)
    try:
        with pytest.raises(OSError) as got:
            path_folders.open_at("f.md", os.O_RDONLY, dir_fd=handle)
        assert got.value.errno == errno.ELOOP
    finally:
        path_folders.close(handle)


def test_the_simulation_switch_picks_the_path_primitives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(platform_features.SIMULATE_ENV, "no-dir-fd")
    platform_features.reset()
    try:
        assert not platform_features.has_dir_fd()
        assert FsOps().open is path_folders.open_at
    finally:
        monkeypatch.delenv(platform_features.SIMULATE_ENV)
        platform_features.reset()
    assert FsOps().open is (os.open if platform_features.has_dir_fd() else path_folders.open_at)


def test_listed_entries_carry_the_full_fingerprint(tmp_path: Path) -> None:
    # os.DirEntry on Windows reports st_ino/st_dev/st_nlink as 0: the path
    # listing's entries stat the path, so the fingerprint is whole anywhere.
    (tmp_path / "f.md").write_text("x")
    os.link(tmp_path / "f.md", tmp_path / "g.md")
    handle = path_folders.open_at(str(tmp_path), path_folders.WANT_DIR)
    try:
        with path_folders.scandir(handle) as it:
            entries = {e.name: e for e in it}
    finally:
        path_folders.close(handle)
    st = entries["f.md"].stat(follow_symlinks=False)
    real = os.lstat(tmp_path / "f.md")
    assert (st.st_ino, st.st_dev, st.st_nlink) == (real.st_ino, real.st_dev, 2)
    assert not entries["f.md"].is_dir(follow_symlinks=False)
