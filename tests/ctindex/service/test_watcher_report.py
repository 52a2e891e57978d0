"""The watcher's part of `status` and `watch status`
(ctindex/service/watcher_report.py): the daemon's float-second times become
integer `*_unix_ms` in JSON, and the text names what a person needs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctindex.service.watcher_report import watcher_json, watcher_lines

STOPPED = {
    "lane": "unavailable",
    "running": False,
    "started": 1_700_000_000.25,
    "stopped": 1_700_000_100.5,
    "last_heartbeat": None,
    "stop_reason": "idle",
    "spawn_failure": {"error": "boom", "count": 2, "time": 1.5, "retry_after": 3.0},
    "last_reconcile": {"at": 2.0, "entries_visited": 7, "duration_ms": 1.0, "reason": "start"},
    "last_batch": "not a record",
    "rss_bytes": None,
    "memory_ceiling_bytes": 1 << 30,
    "physical_memory_bytes": None,
}


def test_json_times_are_integer_unix_ms() -> None:
    doc = watcher_json(STOPPED)
    started, stopped = doc["started_unix_ms"], doc["stopped_unix_ms"]
    assert (started, stopped) == (1_700_000_000_250, 1_700_000_100_500)
    assert doc["last_heartbeat_unix_ms"] is None
    assert not {"started", "stopped", "last_heartbeat"} & set(doc)
    assert doc["spawn_failure"] == {
        "error": "boom",
        "count": 2,
        "at_unix_ms": 1500,
        "retry_after_unix_ms": 3000,
    }
    assert doc["last_reconcile"]["at_unix_ms"] == 2000 and "at" not in doc["last_reconcile"]
    assert doc["last_batch"] == "not a record"  # only records are converted
    assert STOPPED["started"] == 1_700_000_000.25  # the daemon's document is left as it was


@given(st.one_of(st.booleans(), st.text(max_size=3), st.none(), st.lists(st.integers())))
def test_a_time_that_is_no_number_is_null(value: object) -> None:
    assert watcher_json({"started": value})["started_unix_ms"] is None


def test_text_of_a_stopped_watcher() -> None:
    lines = watcher_lines(STOPPED)
    assert lines[0] == "watcher: unavailable"
    assert lines[1] == "daemon: not running (last stop: idle)"
    assert lines[2] == "memory: rss -, ceiling 1.0 GiB, physical -"
    assert lines[3].startswith("spawn failure cached: boom (no retry for ")
    no_failure = watcher_lines({**STOPPED, "spawn_failure": None, "stop_reason": None})
    assert no_failure[1:] == ["daemon: not running", lines[2], "spawn failure cached: none"]
