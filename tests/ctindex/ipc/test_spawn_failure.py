"""The spawn-failure record: back-off doubling, kept outside an unusable runtime folder."""

from __future__ import annotations

from pathlib import Path

from ctindex.ipc.runtime_dir import (
    RuntimePaths,
    ensure_private_dir,
)
from ctindex.ipc.spawn_failure import clear_spawn_failure, record_spawn_failure, spawn_failure
from ctindex.policy.project import Project


def paths_for(root: Path) -> RuntimePaths:
    return RuntimePaths.for_project(Project.at(root))


def test_spawn_failure_backs_off_doubling(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    ensure_private_dir(p.dir)
    assert spawn_failure(p, now=1000.0) is None
    assert record_spawn_failure(p, "boom", now=1000.0)
    assert spawn_failure(p, now=1059.0)["error"] == "boom"
    assert spawn_failure(p, now=1061.0) is None
    record_spawn_failure(p, "boom again", now=1061.0)
    record = spawn_failure(p, now=1061.0 + 119.0)
    assert record is not None and record["count"] == 2
    assert spawn_failure(p, now=1061.0 + 121.0) is None
    clear_spawn_failure(p)
    assert spawn_failure(p, now=1062.0) is None


def test_spawn_failure_is_cached_outside_an_unusable_runtime_folder(tmp_path: Path) -> None:
    p = paths_for(tmp_path)
    p.dir.parent.mkdir(parents=True)
    p.dir.write_text("not a folder")  # mkdir of the runtime folder fails, even for root
    try:
        assert record_spawn_failure(p, "runtime folder unusable", now=50.0)
        assert p.fallback_failed.exists()
        assert spawn_failure(p, now=60.0) is not None
    finally:
        clear_spawn_failure(p)
