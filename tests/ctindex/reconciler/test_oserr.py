"""How the reconciler classifies OSErrors (ctindex/reconciler/oserr.py): the errors
the system really raises for an entry that went away are GONE, a refusal to
look is DENIED, and anything else is neither (an error to report)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ctindex.reconciler.hashing import FILE_FLAGS
from ctindex.reconciler.oserr import DENIED, GONE


def _errno_of(call: object, *args: object, **kwargs: object) -> int:
    assert callable(call)
    with pytest.raises(OSError) as caught:
        call(*args, **kwargs)
    assert caught.value.errno is not None
    return caught.value.errno


def test_the_classes_are_disjoint() -> None:
    assert not GONE & DENIED
    assert {errno.ENOENT, errno.ENOTDIR, errno.ELOOP} == GONE
    assert {errno.EACCES, errno.EPERM} == DENIED


def test_a_deleted_file_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("x")
    path.unlink()
    assert _errno_of(os.open, path, FILE_FLAGS) in GONE
    assert _errno_of(os.lstat, path) in GONE


def test_a_folder_replaced_by_a_file_is_gone(tmp_path: Path) -> None:
    (tmp_path / "dir").write_text("now a file")
    assert _errno_of(os.open, tmp_path / "dir" / "a.md", FILE_FLAGS) in GONE
    assert _errno_of(os.scandir, tmp_path / "dir") in GONE


def test_a_file_replaced_by_a_symlink_is_gone_to_a_no_follow_open(tmp_path: Path) -> None:
    (tmp_path / "target.md").write_text("x")
    (tmp_path / "a.md").symlink_to("target.md")
    assert _errno_of(os.open, tmp_path / "a.md", FILE_FLAGS) in GONE


def test_a_folder_opened_relative_to_its_parent_is_gone_when_it_became_a_link(
    tmp_path: Path,
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "dir").symlink_to("real")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    assert _errno_of(os.open, tmp_path / "dir", flags) in GONE


def test_an_unreadable_file_is_denied(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file: no EACCES to observe")
    path = tmp_path / "secret.md"
    path.write_text("x")
    path.chmod(0)
    assert _errno_of(os.open, path, FILE_FLAGS) in DENIED


def test_other_failures_are_neither(tmp_path: Path) -> None:
    """A name too long to open, or reading a folder as a file: errors the
    walk reports, not "gone" (which would drop the entry) nor "denied"."""
    too_long = _errno_of(os.open, tmp_path / ("x" * 300), FILE_FLAGS)
    (tmp_path / "folder").mkdir()
    fd = os.open(tmp_path / "folder", os.O_RDONLY)
    try:
        is_dir = _errno_of(os.read, fd, 1)
    finally:
        os.close(fd)
    for code in (too_long, is_dir, errno.EIO, errno.EMFILE, errno.ENOSPC):
        assert code not in GONE and code not in DENIED, errno.errorcode[code]
