"""Ctrl-C anywhere ends a command with exit 130, no traceback, and nothing
half-written: the previous generation stays published, readable and intact
(docs/cli.md "Exit codes", docs/reliability.md).

Each command runs as a real process in its own process group, and SIGINT
goes to the whole group, as a terminal's Ctrl-C does (forked indexing
workers included). The signal lands at a chosen point: the store's test
hook pauses there (CTINDEX_FAULT=pause@POINT, ctindex/store/durable.py) and
says so through a file, or, for the daemon-answered search, the process is
blocked writing its answer into a full pipe. Nothing waits on a clock.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.client.daemon_requests import request
from tests import oracle
from tests.conftest import write_config
from tests.daemon_support import CliProject, wait_for

Make = Callable[..., CliProject]
HANG_GUARD_S = 120.0  # a hang, not a speed limit
MARKER = "zqxv7marker"
DOCS = 4200  # above build.PARALLEL_MIN_DOCS: a rebuild forks its workers


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


def _interrupted(root: Path, point: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `ctindex ARGS` until it reaches `point`, then Ctrl-C its group."""
    ready = root.parent / f"ready-{point}"
    ready.unlink(missing_ok=True)
    env = {**os.environ, "CTINDEX_FAULT": f"pause@{point}", "CTINDEX_FAULT_READY": str(ready)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        wait_for(lambda: ready.exists() or proc.poll() is not None, HANG_GUARD_S, 0.01)
        assert proc.poll() is None, f"{args} ended before {point}: {proc.communicate()}"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _assert_quiet_130(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 1, done.stderr


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    docs = root / "docs"
    for i in range(DOCS):
        folder = docs / f"f{i // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"d{i}.md").write_text(f"# Doc {i}\n\nword{i % 97} common text {i}\n")
    (root / ".git").mkdir()
    write_config(root, "docs", watch=False)
    return root


def _manifest(root: Path) -> bytes:
    return (root / ".ct" / "okf" / "MANIFEST").read_bytes()


def _verify(root: Path) -> dict[str, object]:
    done = _run(root, "--json", "verify")
    doc: dict[str, object] = json.loads(done.stdout)
    assert done.returncode in (0, 1), done.stderr
    return doc


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    root = _corpus(tmp_path)
    assert _run(root, "rebuild").returncode == 0
    return root


UPDATE_POINTS = ["mid-segment", "after-segment", "after-dels", "before-manifest-rename"]


@pytest.mark.parametrize("point", UPDATE_POINTS)
@pytest.mark.slow
def test_ctrl_c_during_update_keeps_the_published_generation(indexed: Path, point: str) -> None:
    before = _manifest(indexed)
    (indexed / "docs" / "f000" / "d1.md").write_text(f"# Doc 1\n\n{MARKER} now\n")
    (indexed / "docs" / "f001" / "d150.md").unlink()
    _assert_quiet_130(_interrupted(indexed, point, "update"))
    assert _manifest(indexed) == before  # nothing published
    found = _verify(indexed)
    assert found["damage"] == [], found  # intact: only the files moved on (drift)
    assert {d["path"] for d in found["drift"]} == {  # type: ignore[attr-defined]
        "docs/f000/d1.md",
        "docs/f001/d150.md",
    }
    got = json.loads(_run(indexed, "--json", "search", MARKER).stdout)
    assert {r["path"] for r in got["results"]} == oracle.containing(indexed, MARKER)
    after = _verify(indexed)  # the search's own reconcile published the change
    assert after["damage"] == [] and after["drift"] == [], after


@pytest.mark.parametrize("point", ["mid-segment", "before-manifest-rename"])
@pytest.mark.slow
def test_ctrl_c_during_rebuild_keeps_the_published_generation(indexed: Path, point: str) -> None:
    before = _manifest(indexed)
    _assert_quiet_130(_interrupted(indexed, point, "rebuild"))
    assert _manifest(indexed) == before
    found = _verify(indexed)
    assert found["damage"] == [] and found["drift"] == [], found
    assert _run(indexed, "rebuild").returncode == 0  # the lock was released with the process


def test_ctrl_c_during_a_searchs_fallback(indexed: Path) -> None:
    """A query's own reconcile (here: watching off) is interrupted while it
    writes the new generation."""
    before = _manifest(indexed)
    (indexed / "docs" / "f000" / "d2.md").write_text(f"# Doc 2\n\n{MARKER}\n")
    _assert_quiet_130(_interrupted(indexed, "after-segment", "search", MARKER))
    assert _manifest(indexed) == before
    assert _verify(indexed)["damage"] == []


def test_ctrl_c_during_the_fallback_of_a_stopped_daemon(make_cli_project: Make) -> None:
    """The daemon is stopped: the search waits for its ACK, backs off, and
    reconciles itself; Ctrl-C lands while that pass writes."""
    project = make_cli_project()
    project.cli("search", "margin")  # starts the daemon
    pid = project.wait_daemon()["pid"]
    before = _manifest(project.root)
    os.kill(pid, signal.SIGSTOP)
    try:
        concept = project.root / "acme_retail" / "metrics" / "marker-one.md"
        concept.write_text(f"# Marker one\n\n{MARKER} in a metric.\n")
        _assert_quiet_130(_interrupted(project.root, "after-segment", "search", MARKER))
        assert _manifest(project.root) == before
    finally:
        os.kill(pid, signal.SIGCONT)
    assert _verify(project.root)["damage"] == []
    got = json.loads(_run(project.root, "--json", "search", MARKER).stdout)
    assert {r["path"] for r in got["results"]} == oracle.containing(project.root, MARKER)


def _pipe_full(fd: int) -> bool:
    """True when the pipe holds a whole pipe buffer: its writer is blocked."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    size = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
    return bool(struct.unpack("i", buf)[0] >= size)


def test_ctrl_c_while_a_daemon_answered_search_prints(make_cli_project: Make) -> None:
    project = make_cli_project()
    metrics = project.root / "acme_retail" / "metrics"
    for i in range(300):  # an answer larger than a pipe buffer
        (metrics / f"marker-{i}.md").write_text(f"# Marker {i}\n\n{MARKER} {'x' * 200}\n")
    project.cli("search", "margin")  # starts the daemon
    project.wait_daemon()

    def answered() -> int:
        got: int = request(project.paths, {"op": "status"}, 2.0)["status"]["queries"]["answered"]
        return got

    def by_daemon() -> bool:  # the query path is live (its plan record settled)
        before = answered()
        _run(project.root, "search", "--limit", "1", MARKER)
        return answered() == before + 1

    wait_for(by_daemon, HANG_GUARD_S, 0.1)
    before = answered()
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctindex", "--json", "search", MARKER, "--limit", "1000"],
        cwd=project.root,
        stdout=write_end,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(write_end)
    try:
        wait_for(lambda: _pipe_full(read_end) or proc.poll() is not None, HANG_GUARD_S, 0.01)
        assert proc.poll() is None, "the answer fit in the pipe"
        assert answered() == before + 1  # the daemon answered it: this is its print
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        os.close(read_end)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and len(err.splitlines()) <= 1, err
