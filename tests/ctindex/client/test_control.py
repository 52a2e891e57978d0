"""`watch stop` (ctindex/client/control.py stop) of a daemon that is still
starting: it holds its lock before it answers its socket or records who it
is, so the first attempt finds an unidentified holder; stop asks again,
within its bound, until the daemon can be told to go."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctindex.client import control
from ctindex.client.daemon_requests import BarrierFailed
from ctindex.ipc.runtime_dir import RuntimePaths, ensure_runtime_dir
from ctindex.policy.project import Project

Request = dict[str, object]


def _project(tmp_path: Path) -> Project:
    root = tmp_path / "p"
    (root / ".git").mkdir(parents=True)
    return Project.at(root)


def _no_socket_yet(paths: RuntimePaths, msg: Request, timeout: float) -> Request:
    raise BarrierFailed("nothing listening yet")


@pytest.fixture
def holder(monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for the starting daemon: stop's SIGTERM ends it.
    Nothing answers the socket."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(control, "request", _no_socket_yet)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_daemon_that_identifies_itself_late_is_still_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holder: subprocess.Popen[bytes]
) -> None:
    looks: list[bool] = []

    def identified_on_the_third_look(paths: RuntimePaths) -> int | None:
        looks.append(True)
        return holder.pid if len(looks) >= 3 else None

    monkeypatch.setattr(control, "lock_held", lambda paths: holder.poll() is None)
    monkeypatch.setattr(control, "_verified_pid", identified_on_the_third_look)
    got = control.stop(_project(tmp_path), wait=30.0)
    holder.wait(timeout=30)
    assert got == {"stopped": True, "how": "SIGTERM"}
    assert len(looks) == 3


def test_a_holder_that_never_identifies_itself_is_left_alone_within_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(control, "request", _no_socket_yet)
    monkeypatch.setattr(control, "lock_held", lambda paths: True)
    monkeypatch.setattr(control, "_verified_pid", lambda paths: None)
    got = control.stop(_project(tmp_path), wait=0.3)
    assert got == {"stopped": False, "how": control.UNIDENTIFIED}


def test_a_daemon_spawned_a_moment_ago_is_waited_for_and_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holder: subprocess.Popen[bytes]
) -> None:
    """Right after the first search, the detached daemon may not hold its
    lock yet: its launcher's claim says one is on its way. Without waiting
    for it, `watch stop` would answer "not running" and the daemon would
    start after it."""
    project = _project(tmp_path)
    paths = RuntimePaths.for_project(project)
    ensure_runtime_dir(paths)
    paths.claim.write_text('{"token": "t"}')
    looks: list[bool] = []

    def lock_taken_on_the_third_look(paths: RuntimePaths) -> bool:
        looks.append(True)
        if len(looks) >= 3:
            paths.claim.unlink(missing_ok=True)  # as the daemon does once it holds the lock
            return holder.poll() is None
        return False

    monkeypatch.setattr(control, "lock_held", lock_taken_on_the_third_look)
    monkeypatch.setattr(control, "_verified_pid", lambda paths: holder.pid)
    got = control.stop(project, wait=30.0)
    holder.wait(timeout=30)
    assert got == {"stopped": True, "how": "SIGTERM"}
