"""Daemon lifecycle with a fake engine: signals, idle, memory ceiling, the
singleton lock, the startup claim, and indexing errors."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from ctindex.client.control import lock_held, watcher_status
from ctindex.client.daemon_requests import BarrierFailed, barrier, ping
from ctindex.client.spawn import SPAWN_CACHED, spawn
from ctindex.daemon.lifecycle import Daemon
from ctindex.ipc.records import read_record, write_record
from ctindex.ipc.runtime_dir import RuntimePaths, ensure_private_dir
from ctindex.ipc.spawn_failure import spawn_failure
from ctindex.policy.project import Project
from tests.conftest import write_config
from tests.daemon_support import (
    FakeEngine,
    fork_daemon,
    forked_daemon,
    journal,
    reap,
    runtime_paths,
    wait_for,
)


def setup(tmp_path: Path) -> RuntimePaths:
    (tmp_path / "docs").mkdir()
    return runtime_paths(tmp_path)


def log_lines(paths: RuntimePaths) -> list[str]:
    return paths.log.read_text().splitlines() if paths.log.exists() else []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_stop_gracefully(tmp_path: Path, signum: signal.Signals) -> None:
    paths = setup(tmp_path)
    pid = fork_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal"))
    try:
        wait_for(lambda: ping(paths))
        os.kill(pid, signum)
        status = reap(pid)
        assert status is not None and os.waitstatus_to_exitcode(status) == 0
    finally:
        reap(pid, timeout=0)
    record = read_record(paths.status)
    assert record is not None
    assert record["lane"] == "unavailable"
    assert record["stop_reason"] == f"signal {signum.name}"
    assert log_lines(paths)[-1].endswith(f"stop reason=signal {signum.name}")
    assert not paths.socket.exists()
    assert not lock_held(paths)


def test_idle_exit(tmp_path: Path) -> None:
    paths = setup(tmp_path)
    pid = fork_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal", idle_seconds=1))
    try:
        wait_for(lambda: ping(paths))
        assert reap(pid, timeout=10) is not None
    finally:
        reap(pid, timeout=0)
    assert read_record(paths.status)["stop_reason"] == "idle"
    assert "stop reason=idle" in log_lines(paths)[-1]


def test_memory_ceiling_exit(tmp_path: Path) -> None:
    paths = setup(tmp_path)
    pid = fork_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal", ceiling=1 << 20))
    try:
        assert reap(pid, timeout=10) is not None
    finally:
        reap(pid, timeout=0)
    record = read_record(paths.status)
    assert record["stop_reason"] == "memory-limit" and record["lane"] == "unavailable"
    assert record["rss_bytes"] > record["memory_ceiling_bytes"] == 1 << 20
    assert "stop reason=memory-limit" in log_lines(paths)[-1]


def test_second_daemon_leaves_quietly_while_the_lock_is_held(tmp_path: Path) -> None:
    paths = setup(tmp_path)
    with forked_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal")):
        wait_for(lambda: ping(paths))
        assert lock_held(paths)
        project = Project.at(tmp_path)
        write_record(paths.claim, {"token": "abc", "time": time.time()})
        outcome = Daemon(project, paths, FakeEngine(tmp_path, tmp_path / "j2"), "abc").run()
        assert outcome is None
        assert not paths.claim.exists()  # the live holder makes the claim moot
        assert not (tmp_path / "j2").exists()
        assert sum(" start " in line for line in log_lines(paths)) == 1
        assert ping(paths)


def test_claim_of_another_launcher_is_left_alone(tmp_path: Path) -> None:
    paths = setup(tmp_path)
    ensure_private_dir(paths.dir)
    write_record(paths.claim, {"token": "theirs", "time": time.time()})

    def engine() -> FakeEngine:
        return FakeEngine(tmp_path, tmp_path / "journal", idle_seconds=1)

    pid = fork_daemon(tmp_path, engine, claim_token="mine")
    try:
        wait_for(lambda: ping(paths))
        assert json.loads(paths.claim.read_text())["token"] == "theirs"
    finally:
        reap(pid)


def test_indexing_error_fails_the_barrier_and_keeps_the_work(tmp_path: Path) -> None:
    paths = setup(tmp_path)
    with forked_daemon(
        tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal", fail_paths=True)
    ):
        wait_for(lambda: ping(paths))
        (tmp_path / "docs" / "a.md").write_text("x")
        with pytest.raises(BarrierFailed, match="daemon error"):
            barrier(paths, "plan-1", 2000)
        status = watcher_status(Project.at(tmp_path))
        assert status["lane"] == "dirty" and status["dirty_paths"] == 1
        assert status["pending"] == {"add": 0, "change": 1, "remove": 0}
        assert "injected failure" in status["last_error"]
        assert [r["full"] for r in journal(tmp_path / "journal")] == [True]


def test_stale_socket_of_a_killed_daemon_is_replaced(tmp_path: Path) -> None:
    paths = setup(tmp_path)
    pid = fork_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal"))
    wait_for(lambda: ping(paths))
    os.kill(pid, signal.SIGKILL)
    reap(pid)
    assert paths.socket.exists() and not lock_held(paths)
    with pytest.raises(BarrierFailed) as failed:
        barrier(paths, "plan-1", 500)
    assert failed.value.spawnable  # refused: nobody listens, a spawn may follow
    with forked_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal")):
        wait_for(lambda: ping(paths))
        assert barrier(paths, "plan-1", 2000).lane == "clean"


class BrokenEngine(FakeEngine):
    def open_watcher(self, view, cookie_key):  # type: ignore[no-untyped-def]
        raise RuntimeError("no watcher today")


def test_crash_is_logged_and_makes_clients_back_off(tmp_path: Path) -> None:
    paths = setup(tmp_path)
    pid = fork_daemon(tmp_path, lambda: BrokenEngine(tmp_path, tmp_path / "journal"))
    assert reap(pid) is not None
    record = read_record(paths.status)
    assert record["stop_reason"] == "error" and record["lane"] == "unavailable"
    lines = log_lines(paths)
    assert "exit error=RuntimeError: no watcher today" in lines[-2]
    assert lines[-1].endswith("stop reason=error")
    failure = spawn_failure(paths)
    assert failure is not None and "no watcher today" in failure["error"]
    # A plan with a scope: without one, spawn starts nothing before it even
    # looks at the cached failure (ctindex/client/spawn.py, "no scopes").
    write_config(tmp_path, "docs")
    assert spawn(tmp_path, paths) == SPAWN_CACHED
    assert not lock_held(paths)
