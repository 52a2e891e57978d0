"""The daemon's singleton lock and runtime folders (ctindex/daemon/singleton.py),
without starting a daemon: one holder across processes, no hang on a FIFO,
and `lock_intact` noticing a lock file deleted or replaced (docs/daemon.md:
the daemon then stops, `lock-file-lost`)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from ctindex.base.statefile import UnsafeFile
from ctindex.daemon.singleton import (
    acquire_lock,
    clear_folder,
    lock_intact,
    repair_folder,
    touch,
)

HOLDER = """
import sys
from pathlib import Path
from ctindex.daemon.singleton import acquire_lock
held = acquire_lock(Path(sys.argv[1]))
print("held" if held else "refused", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def other_holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "daemon.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.communicate(timeout=30)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[IO[str]]:
    fh = acquire_lock(tmp_path / "daemon.lock")
    assert fh is not None
    try:
        yield fh
    finally:
        fh.close()


def test_one_holder_across_processes(tmp_path: Path, other_holder: subprocess.Popen[str]) -> None:
    assert acquire_lock(tmp_path / "daemon.lock", attempts=2) is None
    other_holder.kill()
    other_holder.wait()
    fh = acquire_lock(tmp_path / "daemon.lock", attempts=1)  # dies with its holder
    assert fh is not None
    fh.close()


def test_a_second_open_in_the_same_process_is_refused(tmp_path: Path, held: IO[str]) -> None:
    assert acquire_lock(tmp_path / "daemon.lock", attempts=1) is None
    held.close()
    again = acquire_lock(tmp_path / "daemon.lock", attempts=1)
    assert again is not None
    again.close()


def test_the_holder_starts_from_an_empty_file(tmp_path: Path) -> None:
    """The content (`pid instance`) is informational: the new holder's, not
    the previous daemon's."""
    (tmp_path / "daemon.lock").write_text("4242 old-instance\n")
    fh = acquire_lock(tmp_path / "daemon.lock")
    assert fh is not None
    try:
        assert (tmp_path / "daemon.lock").read_text() == ""
        fh.write("1 new\n")
        fh.flush()
        assert (tmp_path / "daemon.lock").read_text() == "1 new\n"
    finally:
        fh.close()


def test_a_refused_attempt_leaves_the_holders_content(tmp_path: Path, held: IO[str]) -> None:
    held.write("7 mine\n")
    held.flush()
    assert acquire_lock(tmp_path / "daemon.lock", attempts=1) is None
    assert (tmp_path / "daemon.lock").read_text() == "7 mine\n"


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_a_lock_path_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "daemon.lock"
    target = tmp_path / "elsewhere"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to(target)
    else:
        path.mkdir()
    with pytest.raises(OSError) as caught:
        acquire_lock(path)
    if kind != "folder":  # a folder fails the open itself (EISDIR)
        assert isinstance(caught.value, UnsafeFile)
    assert not target.exists()  # nothing created through the link


def test_lock_intact_while_the_file_is_ours(tmp_path: Path, held: IO[str]) -> None:
    assert lock_intact(tmp_path / "daemon.lock", held)


def test_a_deleted_lock_file_is_noticed_and_no_longer_excludes(
    tmp_path: Path, held: IO[str]
) -> None:
    path = tmp_path / "daemon.lock"
    path.unlink()
    assert not lock_intact(path, held)
    # why the daemon must stop: a second daemon now gets "the" lock
    second = acquire_lock(path, attempts=1)
    assert second is not None
    try:
        assert not lock_intact(path, held) and lock_intact(path, second)
    finally:
        second.close()


def test_a_replaced_lock_file_is_noticed(tmp_path: Path, held: IO[str]) -> None:
    path = tmp_path / "daemon.lock"
    (tmp_path / "other").write_text("")
    os.replace(tmp_path / "other", path)
    assert not lock_intact(path, held)


def test_touch_creates_a_private_file_once(tmp_path: Path) -> None:
    touch(tmp_path / "cookie")
    assert stat.S_IMODE(os.stat(tmp_path / "cookie").st_mode) & 0o077 == 0
    assert (tmp_path / "cookie").read_bytes() == b""
    with pytest.raises(FileExistsError):
        touch(tmp_path / "cookie")


def test_clear_folder_removes_files_only(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "sub").mkdir()
    clear_folder(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["sub"]


def test_repair_folder_makes_every_level_a_private_folder(tmp_path: Path) -> None:
    within = tmp_path / "runtime"
    within.mkdir(mode=0o755)
    within.chmod(0o755)
    (within / "cookies").write_text("a file took the folder's place")
    outside = tmp_path / "outside"
    outside.mkdir()
    repair_folder(within / "cookies" / "c", within)
    for level in (within, within / "cookies", within / "cookies" / "c"):
        st = os.lstat(level)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700, level
    # a link in a level's place is removed, its target untouched
    (within / "cookies" / "c").rmdir()
    (within / "cookies" / "c").symlink_to(outside)
    repair_folder(within / "cookies" / "c", within)
    assert not (within / "cookies" / "c").is_symlink()
    assert (within / "cookies" / "c").is_dir() and outside.is_dir()
    assert list(outside.iterdir()) == []
