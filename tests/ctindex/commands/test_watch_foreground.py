"""`ctindex watch start --foreground` (ctindex/commands/watch.py): the daemon
in the calling process, for a service manager, without the idle exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctindex.client.daemon_requests import ping
from ctindex.ipc.runtime_dir import RuntimePaths
from ctindex.policy.project import Project


def _ctindex(project: Path) -> list[str]:
    return [sys.executable, "-m", "ctindex", "-C", str(project)]


def _wait(predicate: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.needs("peercred")
def test_foreground_daemon_outlives_idle_seconds_and_stops_cleanly(bundles_project: Path) -> None:
    (bundles_project / ".ct").mkdir(exist_ok=True)
    (bundles_project / ".ct" / "index.jsonc").write_text('{"version": 1, "idle_seconds": 1}')
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctindex",
            "-C",
            str(bundles_project),
            "watch",
            "start",
            "--foreground",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    paths = RuntimePaths.for_project(Project.at(bundles_project))
    try:
        assert _wait(lambda: ping(paths)), "the foreground daemon never answered"
        heartbeat = bundles_project / ".ct" / "okf" / "barrier" / "host.json"
        assert heartbeat.exists()  # it serves the barrier through the share too
        time.sleep(3.5)  # past idle_seconds (1) and two heartbeats: an ordinary daemon leaves
        # Still there, and answering (a loaded machine may need more than
        # one ping's 0.5 s for that).
        assert proc.poll() is None and _wait(lambda: ping(paths))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert out.strip() == "daemon stopped (signal SIGTERM)"
    assert not heartbeat.exists()  # clients fall back at once, without waiting for it to age


def test_foreground_goes_with_start_only(bundles_project: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctindex",
            "-C",
            str(bundles_project),
            "watch",
            "stop",
            "--foreground",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ctindex: watch: --foreground goes with `watch start`"
    ]


@pytest.mark.needs("peercred")
def test_foreground_refuses_when_a_daemon_serves(bundles_project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
    cmd = [sys.executable, "-m", "ctindex", "-C", str(bundles_project), "watch", "start"]
    assert subprocess.run(cmd, env=env, capture_output=True, timeout=60).returncode == 0
    try:
        done = subprocess.run(
            [*cmd, "--foreground"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1
        assert done.stderr.strip() == "ctindex: a daemon already serves this project"
    finally:
        subprocess.run([*cmd[:-1], "stop"], env=env, capture_output=True, timeout=60)
