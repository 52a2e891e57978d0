"""ctindex/base/durable.py: the one tmp-then-rename write, with each writer's options."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.base.durable import WriteFailed, atomic_write, hidden_tmp_name, write_new


@settings(max_examples=30, deadline=None)
@given(first=st.binary(max_size=4096), second=st.binary(max_size=4096))
def test_replaces_the_whole_file_and_leaves_nothing_beside_it(first: bytes, second: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "f"
        atomic_write(target, first)
        atomic_write(target, second, sync=False)
        assert target.read_bytes() == second
        assert os.listdir(tmp) == ["f"]


def test_mode_goes_through_the_umask_unless_exact(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        atomic_write(tmp_path / "masked", b"x", mode=0o660)
        atomic_write(tmp_path / "exact", b"x", mode=0o660, exact_mode=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "masked").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "exact").stat().st_mode) == 0o660


def test_a_name_placed_beforehand_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / ".f.tmp").symlink_to(victim)
    with pytest.raises(WriteFailed) as caught:
        atomic_write(tmp_path / "f", b"evil", tmp_name=".f.tmp")
    assert caught.value.stage == "create" and caught.value.filename == str(tmp_path / ".f.tmp")
    assert victim.read_bytes() == b"keep" and not (tmp_path / "f").exists()


def test_a_failed_rename_removes_its_temp_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "inside").write_bytes(b"")  # a non-empty folder: rename over it fails
    with pytest.raises(WriteFailed) as caught:
        atomic_write(tmp_path / "d", b"x")
    assert caught.value.stage == "rename" and "cannot publish" in str(caught.value)
    assert isinstance(caught.value.as_os_error(), OSError)
    assert sorted(os.listdir(tmp_path)) == ["d"]


def test_a_full_disk_names_the_file_and_leaves_no_part_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    target = tmp_path / "new"
    with pytest.raises(WriteFailed) as caught:
        write_new(target, [b"a", b"b"])
    assert caught.value.stage == "write" and caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(target) and not target.exists()
    with pytest.raises(WriteFailed):
        atomic_write(tmp_path / "other", b"x")
    assert os.listdir(tmp_path) == []


def test_hidden_tmp_names_start_with_a_dot_and_differ() -> None:
    a, b = hidden_tmp_name(Path("/x/metrics.prom")), hidden_tmp_name(Path("/x/metrics.prom"))
    assert a.startswith(".metrics.prom.") and a.endswith(".tmp") and a != b
