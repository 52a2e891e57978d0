"""Runtime records: written whole and owner-only, read as absent when corrupt."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ctindex.ipc.records import read_record, write_record
from ctindex.ipc.runtime_dir import (
    RuntimePaths,
    ensure_private_dir,
)
from ctindex.policy.project import Project


def paths_for(root: Path) -> RuntimePaths:
    return RuntimePaths.for_project(Project.at(root))


def test_private_dir_and_atomic_files_are_owner_only(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    old = os.umask(0o022)
    try:
        ensure_private_dir(p.cookies, within=p.dir)
        write_record(p.status, {"lane": "clean"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(p.dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p.cookies).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p.cookies.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p.status).st_mode) == 0o600
    assert read_record(p.status) == {"lane": "clean"}
    assert [n for n in os.listdir(p.dir) if n.endswith(".tmp")] == []


def test_corrupt_runtime_records_read_as_absent(tmp_path: Path) -> None:
    bad = tmp_path / "status.json"
    bad.write_bytes(b"\x00{not json")
    assert read_record(bad) is None
    bad.write_text("[1, 2]")
    assert read_record(bad) is None
    assert read_record(tmp_path / "missing.json") is None
