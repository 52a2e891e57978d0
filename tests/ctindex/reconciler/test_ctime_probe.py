"""ctindex/reconciler/ctime_probe.py: a filesystem that keeps its own ctime is
told apart from one that mirrors mtime (sshfs: tests/e2e/test_netshare.py),
and the probe leaves nothing behind, whatever happens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctindex.reconciler import ctime_probe


@pytest.fixture(autouse=True)
def fresh() -> None:
    ctime_probe.forget()


def test_a_local_disk_keeps_ctime_and_nothing_is_left(tmp_path: Path) -> None:
    assert ctime_probe.ctime_kept(tmp_path) is True
    assert os.listdir(tmp_path) == []


def test_a_filesystem_whose_ctime_follows_mtime_is_found_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_stat = os.stat

    def mirrored(path: str, **kw: bool) -> os.stat_result:
        st = real_stat(path, **kw)
        fields = list(st)
        fields[9] = fields[8]  # st_ctime as st_mtime, as sshfs reports it
        out = os.stat_result(fields, {"st_ctime_ns": st.st_mtime_ns, "st_mtime_ns": st.st_mtime_ns})
        return out

    monkeypatch.setattr(ctime_probe.os, "stat", mirrored)
    assert ctime_probe.ctime_kept(tmp_path) is False
    assert os.listdir(tmp_path) == []


def test_an_unwritable_or_missing_folder_is_untested_and_the_answer_kept(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    assert ctime_probe.ctime_kept(gone) is None
    gone.mkdir()
    assert ctime_probe.ctime_kept(gone) is None  # once per folder per process
    ctime_probe.forget()
    assert ctime_probe.ctime_kept(gone) is True
