"""Acceptance: the daemon's lifecycle with a real daemon: memory ceiling exit, idle exit,
signals, log rotation, and refusal of peers of another uid."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.daemon.log import MAX_BYTES
from ctindex.ipc.records import read_record
from ctindex.ipc.runtime_dir import ensure_private_dir
from tests.daemon_support import CliProject, wait_for

NOBODY = 65534
Make = Callable[..., CliProject]  # the make_cli_project fixture


def stopped_with(project: CliProject, reason: str) -> dict:
    """Wait until the daemon is gone and its last record names `reason`."""
    wait_for(lambda: not project.daemon_pids(), timeout=30)
    record = read_record(project.paths.status)
    assert record is not None and record["stop_reason"] == reason, record
    assert record["lane"] == "unavailable"
    assert project.log_lines()[-1].endswith(f"stop reason={reason}")
    return record


@pytest.mark.needs("peercred")  # a daemon's lifecycle
def test_acceptance_12_9_memory_ceiling(make_cli_project: Make) -> None:
    project = make_cli_project({"max_daemon_memory_bytes": 1 << 20})  # 1 MiB: below any Python RSS
    assert project.check("margin")["mode"] == "fallback"
    record = stopped_with(project, "memory-limit")
    assert record["rss_bytes"] > record["memory_ceiling_bytes"] == 1 << 20
    status = project.status()
    assert status["lane"] == "unavailable" and status["stop_reason"] == "memory-limit"
    # An optimisation shutdown, not a failure: the next search is still right.
    fresh = project.check("gross margin")
    assert fresh["mode"] == "fallback"


@pytest.mark.needs("peercred")  # a daemon's lifecycle
def test_idle_exit(make_cli_project: Make) -> None:
    project = make_cli_project({"idle_seconds": 1})
    project.check("margin")
    stopped_with(project, "idle")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
@pytest.mark.slow
def test_signals_stop_gracefully(make_cli_project: Make, signum: signal.Signals) -> None:
    project = make_cli_project()
    project.check("margin")
    pid = project.wait_daemon()["pid"]
    os.kill(pid, signum)
    stopped_with(project, f"signal {signum.name}")
    assert not project.paths.socket.exists()
    assert project.check("margin")["reason"] == "no daemon"  # the lock was released


@pytest.mark.needs("peercred")  # a daemon's lifecycle
def test_watch_start_stop_and_log_rotation(make_cli_project: Make) -> None:
    project = make_cli_project()
    log = project.paths.log
    ensure_private_dir(project.paths.dir)
    for round_ in range(3):
        # A long history: the next lifecycle line crosses 32 KiB and rotates.
        log.write_text(f"filler-{round_}\n" * (MAX_BYTES // 9))
        assert "daemon started" in project.cli("watch", "start").stdout
        assert "already running" in project.cli("watch", "start").stdout
        assert "daemon stopped (stop request)" in project.cli("watch", "stop").stdout
        assert "not running" in project.cli("watch", "stop").stdout
    names = sorted(p.name for p in project.paths.dir.iterdir() if p.name.startswith("daemon.log"))
    assert names == ["daemon.log", "daemon.log.1", "daemon.log.2"]
    assert all((project.paths.dir / n).stat().st_size <= MAX_BYTES for n in names)
    assert "filler-2" in (project.paths.dir / "daemon.log.1").read_text()
    assert "filler-1" in (project.paths.dir / "daemon.log.2").read_text()
    current = log.read_text().splitlines()
    assert " start " in current[0] and current[-1].endswith("stop reason=stop-request")
    for line in current:  # lifecycle lines only: no query text, no paths of content
        assert "margin" not in line


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")
def test_peer_of_another_uid_is_refused(make_cli_project: Make) -> None:
    # A world-traversable project, with the runtime loosened on purpose (as a
    # careless chmod would): the peer-credential check must still refuse.
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        base.chmod(0o755)
        project = make_cli_project(root=base / "proj")
        project.check("margin")
        project.wait_daemon()
        for folder in (
            project.root,
            project.root / ".ct",
            project.root / ".ct" / "okf",
            project.paths.dir,
        ):
            folder.chmod(0o755)
        project.paths.socket.chmod(0o666)
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(5)
                sock.connect(os.fspath(project.paths.socket))
                try:
                    # The daemon may close the refused connection before the
                    # request is even sent (EPIPE / ECONNRESET): refused too.
                    sock.sendall(b'{"op":"status"}\n')
                    code = 1 if sock.recv(65536) else 0  # 0: closed without an answer
                except (ConnectionResetError, BrokenPipeError):
                    code = 0
            except BaseException:
                code = 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        after = project.status()
        assert after["refused_peers"] == 1 and after["responsive"]
        assert project.check("margin")["mode"] == "watcher-clean"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_watch_start_refuses_when_watching_is_off(make_cli_project: Make) -> None:
    project = make_cli_project({"watch": False})
    done = project.cli("--json", "watch", "start")
    assert done.returncode == 1
    assert "watch: false" in json.loads(done.stdout)["error"]
    assert project.check("margin")["mode"] == "reconcile-on-query"
    assert project.daemon_pids() == []
