"""The status record (ctindex/daemon/status.py) holds every field the
clients expose (ctindex/client/control.py STATUS_FIELDS)."""

from __future__ import annotations

from pathlib import Path

from ctindex.client.control import STATUS_FIELDS
from ctindex.daemon.dirtyset import DirtySet
from ctindex.daemon.filewatch import FileWatches
from ctindex.daemon.links import LinkTracker
from ctindex.daemon.status import Identity, Stats, StatusRecord, StatusWriter
from ctindex.ipc.records import read_record


def writer(tmp_path: Path, stats: Stats) -> StatusWriter:
    return StatusWriter(
        Identity(1, "inst", 5.0, "build-1", str(tmp_path / "sock")),
        tmp_path / "status.json",
        tmp_path,
        stats,
        DirtySet(0.1),
        LinkTracker(str(tmp_path)),
        FileWatches(str(tmp_path)),
        lambda keys: None,
        lambda: 1.0,
        lambda: 2.0,
    )


def record(w: StatusWriter, lane: str = "clean") -> StatusRecord:
    return w.record(
        lane,
        watcher=None,
        view=None,
        mounts=None,
        refused_peers=0,
        rss=None,
        stop_reason=None,
        queries=None,
    )


def test_record_has_every_field_status_shows(tmp_path: Path) -> None:
    stats = Stats(generation=3, build_in_progress=True)
    doc = record(writer(tmp_path, stats))
    assert set(STATUS_FIELDS) <= set(doc)
    assert doc["generation"] == 3 and doc["build_in_progress"]
    assert doc["instance"] == "inst" and doc["heartbeat"] == {"wall": 2.0, "monotonic": 1.0}


def test_write_is_skipped_once_a_successor_owns_the_file(tmp_path: Path) -> None:
    w = writer(tmp_path, Stats())
    w.write(record(w))
    assert read_record(tmp_path / "status.json")["lane"] == "clean"  # type: ignore[index]
    w.owner = False
    w.write(record(w, "dirty"))
    assert read_record(tmp_path / "status.json")["lane"] == "clean"  # type: ignore[index]
