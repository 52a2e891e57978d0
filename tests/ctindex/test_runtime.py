"""Runtime folder: permissions, unsafe folders, short socket path, spawn-failure cache."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctindex import runtime as rt
from ctindex.policy.project import Project


def paths_for(root: Path) -> rt.RuntimePaths:
    return rt.RuntimePaths.for_project(Project.at(root))


def test_layout_lives_under_the_hard_excluded_runtime_folder(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    assert p.dir == tmp_path / ".ct" / "okf" / "runtime"
    assert p.cookies == p.dir / "cookies" / "c"  # nested two levels (git fsmonitor)
    assert p.socket == p.dir / "daemon.sock" and not p.socket_is_fallback


def test_private_dir_and_atomic_files_are_owner_only(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    old = os.umask(0o022)
    try:
        rt.ensure_private_dir(p.cookies, within=p.dir)
        rt.write_json(p.status, {"lane": "clean"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(p.dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p.cookies).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p.cookies.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p.status).st_mode) == 0o600
    assert rt.read_json(p.status) == {"lane": "clean"}
    assert [n for n in os.listdir(p.dir) if n.endswith(".tmp")] == []


def test_loose_permissions_are_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o777)
    rt.ensure_private_dir(folder)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_symlinked_or_file_runtime_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError):
        rt.ensure_private_dir(link)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        rt.ensure_private_dir(blocker / "sub")
    with pytest.raises(OSError):
        rt.ensure_private_dir(blocker)


def test_corrupt_runtime_records_read_as_absent(tmp_path: Path) -> None:
    bad = tmp_path / "status.json"
    bad.write_bytes(b"\x00{not json")
    assert rt.read_json(bad) is None
    bad.write_text("[1, 2]")
    assert rt.read_json(bad) is None
    assert rt.read_json(tmp_path / "missing.json") is None


def test_long_project_path_falls_back_to_a_short_private_socket_folder(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    p = paths_for(deep)
    assert p.socket_is_fallback
    assert len(os.fsencode(p.socket)) <= rt.SUN_PATH_MAX
    assert p.socket.parent == p.fallback_dir
    rt.ensure_fallback_dir(p)
    st = os.lstat(p.fallback_dir)
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert paths_for(deep).socket == p.socket  # stable per project
    assert paths_for(tmp_path / ("d" * 60)).fallback_dir != p.fallback_dir


def test_spawn_failure_backs_off_doubling(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    rt.ensure_private_dir(p.dir)
    assert rt.spawn_failure(p, now=1000.0) is None
    assert rt.record_spawn_failure(p, "boom", now=1000.0)
    assert rt.spawn_failure(p, now=1059.0)["error"] == "boom"
    assert rt.spawn_failure(p, now=1061.0) is None
    rt.record_spawn_failure(p, "boom again", now=1061.0)
    record = rt.spawn_failure(p, now=1061.0 + 119.0)
    assert record is not None and record["count"] == 2
    assert rt.spawn_failure(p, now=1061.0 + 121.0) is None
    rt.clear_spawn_failure(p)
    assert rt.spawn_failure(p, now=1062.0) is None


def test_spawn_failure_is_cached_outside_an_unusable_runtime_folder(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    p.dir.parent.mkdir(parents=True)
    p.dir.write_text("not a folder")  # mkdir of the runtime folder fails, even for root
    try:
        assert rt.record_spawn_failure(p, "runtime folder unusable", now=50.0)
        assert p.fallback_failed.exists()
        assert rt.spawn_failure(p, now=60.0) is not None
    finally:
        rt.clear_spawn_failure(p)


def test_store_link_sees_a_link_at_each_store_folder(tmp_path: Path) -> None:
    """The query client's check before it asks a daemon (ctindex/fast_entry.py)."""
    assert rt.store_link(str(tmp_path)) is False
    (tmp_path / ".ct" / "okf" / "runtime").mkdir(parents=True)
    assert rt.store_link(str(tmp_path)) is False
    for key in (".ct/okf/runtime", ".ct/okf", ".ct"):
        real = tmp_path / f"{key}.real"
        (tmp_path / key).rename(real)
        (tmp_path / key).symlink_to(real)
        assert rt.store_link(str(tmp_path)) is True
        (tmp_path / key).unlink()
        real.rename(tmp_path / key)
