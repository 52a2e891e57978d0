"""A long-lived reader's kept daemon connection (ctindex/ipc/protocol.py
`Keeper`, ctindex/daemon/server.py `keep`): one connection for many
barriers, a new one when the daemon closed it, never one shared across a
fork, and answers exactly as without it."""

from __future__ import annotations

import os
import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctindex.api import Index
from ctindex.daemon import server
from ctindex.ipc import protocol
from tests import oracle
from tests.daemon_support import (
    CliProject,
    FakeEngine,
    be_patient_for_acks,
    forked_daemon,
    wait_for,
)

Make = Callable[..., CliProject]
MARKER = "kq7zmarker"
HANG_GUARD_S = 60.0


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The new connections the client makes (each one a path)."""
    made: list[str] = []
    real = protocol._sent_anew

    def counted(path: str, *args: object, **kwargs: object) -> protocol.Sent:
        made.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(protocol, "_sent_anew", counted)
    yield made


@pytest.fixture
def patient_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about which connection carries a request, not how
    soon a wedged daemon is told apart."""
    be_patient_for_acks(monkeypatch)


def _running(make: Make) -> CliProject:
    project = make()
    metrics = project.root / "acme_retail" / "metrics"
    (metrics / "kept.md").write_text(f"# Kept\n\n{MARKER} in a metric.\n")
    project.cli("search", "margin")  # starts the daemon
    project.wait_daemon()
    return project


def test_one_connection_serves_a_readers_barriers_and_survives_a_restart(
    make_cli_project: Make, connections: list[str], patient_acks: None
) -> None:
    project = _running(make_cli_project)
    metrics = project.root / "acme_retail" / "metrics"
    with Index(project.root) as index:
        wait_for(lambda: index.search(MARKER).freshness.mode == "watcher-clean", HANG_GUARD_S)
        connections.clear()
        for i in range(5):  # a change between queries is seen through the kept connection
            (metrics / f"more-{i}.md").write_text(f"# More {i}\n\n{MARKER} again.\n")
            got = index.search(MARKER, limit=1000)
            assert got.freshness.mode == "watcher-clean", got.freshness
            assert {h.path for h in got.hits} == oracle.containing(project.root, MARKER)
        assert connections == []  # all five through the one kept since the first
        # The daemon leaves and another starts: the kept connection is closed
        # under the reader, whose next query asks again on a new one.
        project.cli("watch", "stop")
        project.cli("watch", "start")
        project.wait_daemon()
        connections.clear()
        got = index.search(MARKER, limit=1000)
        assert got.freshness.mode == "watcher-clean", got.freshness
        assert {h.path for h in got.hits} == oracle.containing(project.root, MARKER)
        assert len(connections) == 1
        index.search(MARKER)
        assert len(connections) == 1  # and keeps that one


def test_a_kept_connection_the_daemon_let_go_idle_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, connections: list[str], patient_acks: None
) -> None:
    """The daemon closes a kept connection idle past its bound; the
    client's next barrier finds it closed and is sent once more, anew."""
    from ctindex.client.daemon_requests import send_barrier
    from ctindex.ipc.runtime_dir import RuntimePaths
    from ctindex.policy.project import Project

    (tmp_path / "docs").mkdir()
    # The daemon's idle bound (server.keep_idle_s, replaced before the fork:
    # the daemon's), read as each kept connection goes idle: a hang guard
    # until `let_go` exists, then none. The test so chooses the connection
    # let go, where a short bound raced a loaded machine's scheduler.
    let_go = tmp_path / "let-go"
    monkeypatch.setattr(server, "keep_idle_s", lambda: 0.0 if let_go.exists() else HANG_GUARD_S)
    paths = RuntimePaths.for_project(Project.at(tmp_path))
    keeper = protocol.Keeper()
    with forked_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "journal")):
        wait_for(lambda: _answers(paths, keeper), HANG_GUARD_S)
        connections.clear()
        let_go.touch()  # this barrier's connection is let go once answered
        assert send_barrier(paths, "plan-1", 2000, keeper=keeper).result().lane == "clean"
        assert connections == []  # the kept one
        _wait_closed_by_daemon(keeper, os.fspath(paths.socket))
        assert send_barrier(paths, "plan-1", 2000, keeper=keeper).result().lane == "clean"
        assert len(connections) == 1
    keeper.close()


def _wait_closed_by_daemon(keeper: protocol.Keeper, path: str) -> None:
    """Until the daemon's end of the kept connection is closed: its end of
    file is readable (bounded by HANG_GUARD_S), with nothing before it."""
    sock = keeper.take(path)
    assert sock is not None
    try:
        readable, _, _ = select.select([sock], [], [], HANG_GUARD_S)
        assert readable, "the daemon kept the idle connection"
        assert sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    finally:
        keeper.give(path, sock)


def _answers(paths: object, keeper: protocol.Keeper) -> bool:
    from ctindex.client.daemon_requests import BarrierFailed, send_barrier

    try:
        send_barrier(paths, "plan-1", 2000, keeper=keeper).result()  # type: ignore[arg-type]
    except BarrierFailed:
        return False
    return True


def test_a_keeper_hands_its_connection_to_one_request_and_never_to_a_child() -> None:
    a, b = socket.socketpair()
    keeper = protocol.Keeper()
    keeper.give("/run/x.sock", a)
    assert keeper.take("/run/other.sock") is None  # another daemon's path: closed
    assert a.fileno() == -1
    c, d = socket.socketpair()
    keeper.give("/run/x.sock", c)
    pid = os.fork()
    if pid == 0:  # the child must not share the parent's connection
        os._exit(0 if keeper.take("/run/x.sock") is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert c.fileno() != -1  # the child closed only its own copy
    d.sendall(b"x")
    assert c.recv(1) == b"x"  # the parent's connection is still open
    assert keeper.take("/run/x.sock") is c
    assert keeper.take("/run/x.sock") is None  # handed over: one request at a time
    keeper.give("/run/x.sock", c)
    keeper.close()
    assert c.fileno() == -1
    for s in (b, d):
        s.close()


def test_a_request_whose_kept_connection_closes_unanswered_is_sent_again_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The daemon read the request on the kept connection but closed it
    without an answer (it left): the same request bytes go once more on a
    new connection, and that answer is the exchange's."""
    kept, daemon_end = socket.socketpair()
    keeper = protocol.Keeper()
    keeper.give("/run/x.sock", kept)
    resent: list[bytes] = []

    def anew(path: str, data: bytes, timeout: float, ack: bool, *rest: object) -> protocol.Sent:
        resent.append(data)
        mine, theirs = socket.socketpair()
        theirs.sendall(protocol.ACK_LINE + b"\n" + b'{"ok": true, "n": 2, "keep": true}\n')
        theirs.close()
        return protocol.Sent(mine, time.monotonic() + 1, time.monotonic() + 1, ack, 4096)

    monkeypatch.setattr(protocol, "_sent_anew", anew)
    sent = protocol.send(Path("/run/x.sock"), {"op": "barrier"}, 1.0, ack=True, keeper=keeper)
    first = daemon_end.recv(4096)
    daemon_end.close()  # read, never answered
    assert sent.answer() == {"ok": True, "n": 2, "keep": True}
    assert resent == [first]  # the very same request
    assert b'"keep":true' in first and b'"ack":true' in first
    assert kept.fileno() == -1
    keeper.close()
