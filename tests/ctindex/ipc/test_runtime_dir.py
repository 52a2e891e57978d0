"""Runtime folder: layout, permissions, unsafe folders, short socket path, linked store folders."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctindex.ipc.runtime_dir import (
    SUN_PATH_MAX,
    RuntimePaths,
    ensure_fallback_dir,
    ensure_private_dir,
    store_link,
)
from ctindex.policy.project import Project


def paths_for(root: Path) -> RuntimePaths:
    return RuntimePaths.for_project(Project.at(root))


def test_layout_lives_under_the_hard_excluded_runtime_folder(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    assert p.dir == tmp_path / ".ct" / "okf" / "runtime"
    assert p.cookies == p.dir / "cookies" / "c"  # nested two levels (git fsmonitor)
    assert p.socket == p.dir / "daemon.sock" and not p.socket_is_fallback


def test_loose_permissions_are_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o777)
    ensure_private_dir(folder)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_symlinked_or_file_runtime_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError):
        ensure_private_dir(link)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        ensure_private_dir(blocker / "sub")
    with pytest.raises(OSError):
        ensure_private_dir(blocker)


def test_long_project_path_falls_back_to_a_short_private_socket_folder(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    p = paths_for(deep)
    assert p.socket_is_fallback
    assert len(os.fsencode(p.socket)) <= SUN_PATH_MAX
    assert p.socket.parent == p.fallback_dir
    ensure_fallback_dir(p)
    st = os.lstat(p.fallback_dir)
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert paths_for(deep).socket == p.socket  # stable per project
    assert paths_for(tmp_path / ("d" * 60)).fallback_dir != p.fallback_dir


def test_store_link_sees_a_link_at_each_store_folder(tmp_path: Path) -> None:
    """The query client's check before it asks a daemon (ctindex/fast_entry.py)."""
    assert store_link(str(tmp_path)) is False
    (tmp_path / ".ct" / "okf" / "runtime").mkdir(parents=True)
    assert store_link(str(tmp_path)) is False
    for key in (".ct/okf/runtime", ".ct/okf", ".ct"):
        real = tmp_path / f"{key}.real"
        (tmp_path / key).rename(real)
        (tmp_path / key).symlink_to(real)
        assert store_link(str(tmp_path)) is True
        (tmp_path / key).unlink()
        real.rename(tmp_path / key)
