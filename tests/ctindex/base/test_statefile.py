"""read_bounded (ctindex/base/statefile.py): the whole file, in one read when it
did not grow, and never more than the bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctindex.base import statefile
from ctindex.base.statefile import MIB, UnsafeFile, read_bounded


@pytest.mark.parametrize("size", [0, 1, MIB - 1, MIB, MIB + 1, 3 * MIB + 5])
def test_reads_the_whole_file(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    assert read_bounded(path, 4 * MIB) == data
    assert read_bounded(path, size) == data  # exactly at the bound


def test_a_file_read_in_one_call_when_it_did_not_grow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 18 MB file table must not be read in 1 MiB chunks and joined:
    that copy cost ~10 ms of a nothing-changed update."""
    data = os.urandom(3 * MIB + 5)
    path = tmp_path / "f"
    path.write_bytes(data)
    sizes: list[int] = []
    real_read = os.read

    def read(fd: int, n: int) -> bytes:
        sizes.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(statefile.os, "read", read)
    assert read_bounded(path, 1 << 40) == data
    assert sizes[0] == len(data) + 1 and len(sizes) == 2  # the data, then end of file


def test_larger_and_growing_files_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    with pytest.raises(UnsafeFile, match="too large"):
        read_bounded(path, 9)
    real_fstat = os.fstat

    def fstat(fd: int) -> os.stat_result:  # as if the file grew after the fstat
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 3, *st[7:10]))

    monkeypatch.setattr(statefile.os, "fstat", fstat)
    with pytest.raises(UnsafeFile, match="grew past 5 bytes"):
        read_bounded(path, 5)
    assert read_bounded(path, 10) == b"x" * 10
