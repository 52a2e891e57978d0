"""What makes the daemon run a full reconciliation, and the poll
lane, with a fake engine: audit, heartbeat gap (clock jump), plan change,
watch turned off, short socket path fallback, a server of another uid."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from ctindex.client.daemon_requests import BarrierFailed, barrier, ping, request
from ctindex.ipc.records import read_record
from ctindex.ipc.runtime_dir import RuntimePaths
from ctindex.query import freshness, statement
from tests.daemon_support import (
    FakeEngine,
    fork_daemon,
    forked_daemon,
    journal,
    reap,
    runtime_paths,
    wait_for,
)


def full_reasons(paths: RuntimePaths) -> list[str]:
    status = request(paths, {"op": "status"}, 1.0)["status"]
    return [status["last_reconcile"]["reason"]] * status["reconciles"]


def test_audit_runs_full_passes_on_schedule(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    paths = runtime_paths(tmp_path)
    with forked_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "j", audit_seconds=1)):
        wait_for(lambda: ping(paths))
        wait_for(lambda: len(journal(tmp_path / "j")) >= 3, timeout=15)
        assert all(r["full"] for r in journal(tmp_path / "j"))
        assert full_reasons(paths)[-1] == "audit"


def test_wall_clock_jump_triggers_a_full_pass(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    flag = tmp_path / "jumped"
    paths = runtime_paths(tmp_path)

    def wall() -> float:  # the wall clock leaps an hour ahead (resume from suspend)
        return time.time() + (3600 if flag.exists() else 0)

    with forked_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "j"), wall=wall):
        wait_for(lambda: ping(paths))
        flag.touch()
        wait_for(lambda: len(journal(tmp_path / "j")) >= 2, timeout=15)
        assert full_reasons(paths)[-1] == "heartbeat-gap"
        # The jump is noticed once, not on every heartbeat afterwards.
        time.sleep(2.5)
        assert len(journal(tmp_path / "j")) == 2


def test_plan_change_reopens_and_reconciles_and_watch_off_stops(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    plan = tmp_path / "plan"
    plan.write_text("p1 1")
    paths = runtime_paths(tmp_path)
    pid = fork_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "j", plan_file=plan))
    try:
        wait_for(lambda: ping(paths))
        assert barrier(paths, "p1", 2000).lane == "clean"
        plan.write_text("p2 1")
        result = barrier(paths, "p2", 2000)  # the client already sees the new plan
        assert result.reconciled and result.reconcile_reason == "plan-changed"
        assert [r["full"] for r in journal(tmp_path / "j")] == [True, True]
        plan.write_text("p2 0")  # watch turned off in the configuration
        assert reap(pid) is not None
    finally:
        reap(pid, timeout=0)
    assert read_record(paths.status)["stop_reason"] == "watch-disabled"


def test_poll_lane_reconciles_on_every_barrier(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    paths = runtime_paths(tmp_path)
    with forked_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "j", poll=True)):
        wait_for(lambda: ping(paths))
        for _ in range(2):
            result = barrier(paths, "plan-1", 2000)
            assert result.backend == "poll" and result.backend_reason == "test: poll lane"
            # Worded as a fallback by the one trust test (ctindex/query/freshness.py).
            assert freshness.judge(result).proven is not None
            assert freshness.judge(result).proven.mode == statement.FALLBACK
            assert result.lane == "reconcile"
        assert [r["full"] for r in journal(tmp_path / "j")] == [True, True, True]


def test_long_project_path_serves_on_the_short_fallback_socket(tmp_path: Path) -> None:
    root = tmp_path / ("x" * 70) / ("y" * 40)
    (root / "docs").mkdir(parents=True)
    paths = runtime_paths(root)
    assert paths.socket_is_fallback
    with forked_daemon(root, lambda: FakeEngine(root, root / "j")):
        wait_for(lambda: ping(paths))
        (root / "docs" / "a.md").write_text("x")
        assert barrier(paths, "plan-1", 2000).generation == 2
        assert paths.socket.exists() and not (paths.dir / "daemon.sock").exists()
    assert not paths.socket.exists()


@pytest.mark.needs("peercred")  # the uid check is the peer check
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")
def test_client_refuses_a_server_of_another_uid(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    folder.chmod(0o777)
    paths = RuntimePaths(tmp_path, folder)
    ready = folder / "ready"
    pid = os.fork()
    if pid == 0:  # an impostor daemon running as nobody
        try:
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(os.fspath(paths.socket))
            server.listen(1)
            ready.touch()
            conn, _ = server.accept()
            conn.recv(4096)
            conn.sendall(b'{"ok":true,"generation":1}\n')
            time.sleep(1)
        finally:
            os._exit(0)
    try:
        wait_for(ready.exists)
        with pytest.raises(BarrierFailed, match="another user"):
            barrier(paths, "plan-1", 1000)
    finally:
        reap(pid, timeout=5)
        for name in os.listdir(folder):
            os.unlink(folder / name)
        folder.rmdir()


def test_daemon_started_with_watch_off_leaves_at_once(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    plan = tmp_path / "plan"
    plan.write_text("p1 0")
    paths = runtime_paths(tmp_path)
    pid = fork_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "j", plan_file=plan))
    assert reap(pid) is not None
    assert read_record(paths.status)["stop_reason"] == "watch-disabled"
    assert journal(tmp_path / "j") == []  # nothing was indexed
