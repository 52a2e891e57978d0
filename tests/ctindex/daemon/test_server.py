"""IPC and barrier against a real daemon loop (forked) with a fake engine."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctindex.client.control import stop, watcher_status
from ctindex.client.daemon_requests import BarrierFailed, barrier, request
from ctindex.daemon.server import MAX_REQUEST
from ctindex.ipc.build_id import build_id
from ctindex.ipc.runtime_dir import RuntimePaths
from ctindex.policy.project import Project
from tests.daemon_support import FakeEngine, fork_daemon, journal, reap, wait_for


class Running:
    def __init__(self, root: Path, pid: int) -> None:
        self.root = root
        self.pid = pid
        self.paths = RuntimePaths.for_project(Project.at(root))
        self.journal = root / "journal"

    def ping(self) -> dict | None:
        try:
            return request(self.paths, {"op": "ping"}, 0.5)
        except BarrierFailed:
            return None

    def raw(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        sock.connect(os.fspath(self.paths.socket))
        return sock


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Running]:
    (tmp_path / "docs").mkdir()
    pid = fork_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal"))
    running = Running(tmp_path, pid)
    try:
        wait_for(running.ping)
        yield running
    finally:
        reap(pid, timeout=0)


def read_reply(sock: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return json.loads(data)


def test_barrier_applies_every_event_queued_before_it(daemon: Running) -> None:
    first = barrier(daemon.paths, "plan-1", 2000)
    assert first.lane == "clean" and first.backend == "inotify"
    (daemon.root / "docs" / "a.md").write_text("alpha")
    (daemon.root / "docs" / "sub").mkdir()
    (daemon.root / "docs" / "sub" / "b.md").write_text("beta")
    second = barrier(daemon.paths, "plan-1", 2000)
    assert second.generation == first.generation + 1
    applied = journal(daemon.journal)[-1]
    assert not applied["full"]
    assert "docs/a.md" in applied["keys"] and any(k.startswith("docs/sub") for k in applied["keys"])
    third = barrier(daemon.paths, "plan-1", 2000)  # nothing new: no work
    assert third.generation == second.generation
    assert len(journal(daemon.journal)) == 2  # startup reconcile + one narrowed batch


def test_cookies_are_cleaned_up(daemon: Running) -> None:
    for _ in range(3):
        barrier(daemon.paths, "plan-1", 2000)
    wait_for(lambda: os.listdir(daemon.paths.cookies) == [])


def test_bad_requests_only_cost_their_own_connection(daemon: Running) -> None:
    half = daemon.raw()
    half.sendall(b'{"op": "barr')  # never finished
    garbage = daemon.raw()
    garbage.sendall(b"not json\n")
    assert read_reply(garbage) == {
        "ok": False,
        "error": "malformed request",
        "build": build_id(),
    }  # every answer names its build
    no_op = daemon.raw()
    no_op.sendall(b'{"token": 1}\n')
    assert read_reply(no_op)["error"] == "malformed request"
    huge = daemon.raw()
    huge.sendall(b"x" * (MAX_REQUEST + 10))
    assert read_reply(huge)["error"] == "request too large"
    unknown = daemon.raw()
    unknown.sendall(b'{"op": "dance"}\n')
    assert read_reply(unknown)["error"] == "unknown op"
    # The half-written request is still open, yet barriers are answered.
    assert barrier(daemon.paths, "plan-1", 2000).lane == "clean"
    assert half.recv(10) == b""  # and it is dropped at its deadline
    for s in (half, garbage, no_op, huge, unknown):
        s.close()


def test_client_that_vanishes_mid_barrier_does_not_hurt(daemon: Running) -> None:
    gone = daemon.raw()
    gone.sendall(
        json.dumps(
            {"op": "barrier", "plan": "plan-1", "timeout_ms": 500, "build": build_id()}
        ).encode()
        + b"\n"
    )
    gone.close()
    assert barrier(daemon.paths, "plan-1", 2000).lane == "clean"


def test_a_different_plan_is_never_reported_fresh(daemon: Running) -> None:
    with pytest.raises(BarrierFailed, match="different plan"):
        barrier(daemon.paths, "another-plan", 2000)


def test_status_and_stop_ops(daemon: Running) -> None:
    # What is asserted is the answer, not its speed: a loaded machine may take
    # longer than `status`'s default half second to schedule the daemon.
    live = watcher_status(Project.at(daemon.root), timeout=10)
    assert live["responsive"] and live["lane"] == "clean" and live["pid"] == daemon.pid
    assert live["reconciles"] == 1 and live["backend"] == "inotify"
    result = stop(Project.at(daemon.root))
    assert result == {"stopped": True, "how": "stop request"}
    reap(daemon.pid)
    after = watcher_status(Project.at(daemon.root))
    assert after["lane"] == "unavailable" and after["stop_reason"] == "stop-request"
    assert not after["running"]


def _exchange(daemon: Running, request: dict[str, object]) -> list[dict[str, object]]:
    """Every line the daemon sends for `request` before it closes the connection."""
    data = b""
    with daemon.raw() as sock:
        sock.sendall(json.dumps({**request, "build": build_id()}).encode() + b"\n")
        while chunk := sock.recv(4096):
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


def test_a_request_asking_for_an_ack_gets_it_before_the_answer(daemon: Running) -> None:
    """The ACK comes from the loop on reading the line (ctindex/client/unanswered.py
    relies on it); a request without `ack` gets its one answer line only."""
    ack, answer = _exchange(daemon, {"op": "ping", "ack": True})
    assert ack == {"ack": True} and answer["ok"] is True
    [only] = _exchange(daemon, {"op": "ping"})
    assert only["ok"] is True
    barrier = {"op": "barrier", "token": "t-ack", "plan": "plan-1", "timeout_ms": 2000}
    ack, answer = _exchange(daemon, {**barrier, "ack": True})  # ACK first, answer after
    assert ack == {"ack": True} and answer["ok"] is True, answer


def _barrier_line(keep: bool = True, op: str = "barrier") -> bytes:
    message = {"op": op, "plan": "plan-1", "timeout_ms": 2000, "build": build_id()}
    return json.dumps({**message, "keep": keep}).encode() + b"\n"


def test_a_barrier_that_asks_keeps_its_connection_for_the_next(daemon: Running) -> None:
    """`keep` (a long-lived reader's barriers): the answer says the
    connection is kept, and the next barrier on it is answered like a first;
    anything else closes after its answer, as without `keep`."""
    kept = daemon.raw()
    generations = []
    for _ in range(3):
        kept.sendall(_barrier_line())
        answer = read_reply(kept)
        assert answer["ok"] is True and answer["keep"] is True, answer
        generations.append(answer["generation"])
    (daemon.root / "docs" / "a.md").write_text("alpha")
    kept.sendall(_barrier_line())
    assert read_reply(kept)["generation"] == generations[-1] + 1  # a barrier as any
    # Not asked, or not a barrier: answered, then closed.
    for line in (_barrier_line(keep=False), _barrier_line(op="ping")):
        once = daemon.raw()
        once.sendall(line)
        assert "keep" not in read_reply(once)
        assert once.recv(10) == b""
        once.close()
    # A malformed line on a kept connection closes it.
    kept.sendall(b"not json\n")
    assert read_reply(kept)["error"] == "malformed request"
    assert kept.recv(10) == b""
    kept.close()


def test_kept_connections_are_bounded_in_number(daemon: Running) -> None:
    from ctindex.daemon.server import KEEP_MAX

    socks = [daemon.raw() for _ in range(KEEP_MAX + 2)]
    answers = []
    for s in socks:
        s.sendall(_barrier_line())
        answers.append(read_reply(s))
    assert all(a["ok"] is True for a in answers)
    assert [a.get("keep") is True for a in answers] == [True] * KEEP_MAX + [False] * 2
    for s in socks[KEEP_MAX:]:
        assert s.recv(10) == b""  # the ones beyond the bound were closed
    socks[0].close()  # one kept connection gone: the daemon notices, a new one may be kept
    wait_for(lambda: _kept_answer(daemon))
    for s in socks:
        s.close()


def _kept_answer(daemon: Running) -> bool:
    s = daemon.raw()
    try:
        s.sendall(_barrier_line())
        return read_reply(s).get("keep") is True
    finally:
        s.close()
