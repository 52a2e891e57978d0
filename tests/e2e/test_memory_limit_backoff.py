"""A daemon that stops at its memory ceiling is backed off like a failed
spawn: one daemon start per back-off period, not one per query, and the
freshness reason says `daemon stopped: memory-limit`."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ctindex.ipc.spawn_failure import BACKOFF_FIRST_S, spawn_failure
from tests import oracle
from tests.daemon_support import CliProject, wait_for

MARK = "zqxv7marker"


def _starts(project: CliProject) -> int:
    return sum(1 for line in project.log_lines() if " start " in f"{line} ")


@pytest.mark.needs("peercred")  # counts daemon starts: none without a peer check
def test_a_1_mib_ceiling_starts_one_daemon_per_backoff_period(
    make_cli_project: Callable[..., CliProject],
) -> None:
    project = make_cli_project(config={"max_daemon_memory_bytes": 1 << 20})
    target = next(p for p in (project.root / "ga4").rglob("*.md") if p.name != "index.md")
    target.write_text(f"{MARK}\n" + target.read_text())

    first = project.search(MARK)  # no daemon: reconciles, starts one
    assert first["freshness"]["mode"] == "fallback"
    wait_for(lambda: _starts(project) == 1 and not project.daemon_pids(), 30)
    assert project.status()["stop_reason"] == "memory-limit"
    failure = spawn_failure(project.paths)
    assert failure is not None and failure["error"] == "daemon stopped: memory-limit"

    for _ in range(5):  # within the back-off window: no start, reason says why
        doc = project.search(MARK)
        assert doc["freshness"]["mode"] == "fallback"
        assert doc["freshness"]["reason"] == "daemon stopped: memory-limit"
        assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARK)
        assert not project.daemon_pids()
    assert _starts(project) == 1

    # The back-off period ends (its record says when): the next query starts
    # exactly one fresh daemon, which stops again and doubles the window.
    record = json.loads(project.paths.failed.read_text())
    record["retry_after"] = record["time"]
    project.paths.failed.write_text(json.dumps(record))
    project.search(MARK)
    wait_for(lambda: _starts(project) == 2 and not project.daemon_pids(), 30)
    again = spawn_failure(project.paths)
    assert again is not None and again["count"] == 2
    assert again["retry_after"] - again["time"] == 2 * BACKOFF_FIRST_S
    project.search(MARK)
    assert _starts(project) == 2
