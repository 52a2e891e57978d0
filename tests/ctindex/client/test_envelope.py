"""The one client envelope (ctindex/client/envelope.py): every request to a
daemon carries this process's build id, a silent daemon is struck once
and an answer clears the strike, and where no peer can be trusted nothing
is sent at all.

Played against a real Unix socket served by a thread, one connection at a
time; whether something was sent is read from what the thread received."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctindex.client import envelope, unanswered
from ctindex.client.envelope import BarrierFailed, request
from ctindex.ipc import protocol
from ctindex.ipc.build_id import build_id
from ctindex.ipc.runtime_dir import RuntimePaths

pytestmark = pytest.mark.needs("peercred")

HANG_GUARD_S = 10.0


@contextmanager
def fake_daemon(
    tmp_path: Path, serve: Callable[[socket.socket, dict[str, object]], None]
) -> Iterator[tuple[RuntimePaths, list[dict[str, object]]]]:
    """A project's runtime folder whose socket `serve` answers, one request
    per connection; yields the paths and the requests received."""
    paths = RuntimePaths(tmp_path, tmp_path / "runtime")
    paths.dir.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths.socket))
    listener.listen(4)
    listener.settimeout(0.05)
    received: list[dict[str, object]] = []
    done = threading.Event()

    def run() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(HANG_GUARD_S)
                line = conn.makefile("rb").readline()
                message = json.loads(line)
                received.append(message)
                with contextlib.suppress(OSError):
                    serve(conn, message)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield paths, received
    finally:
        done.set()
        thread.join(HANG_GUARD_S)
        listener.close()


def answer_ok(conn: socket.socket, message: dict[str, object]) -> None:
    if message.get("ack"):
        conn.sendall(protocol.ACK_LINE + b"\n")
    conn.sendall(b'{"ok": true}\n')


def test_every_request_carries_this_build(tmp_path: Path) -> None:
    with fake_daemon(tmp_path, answer_ok) as (paths, received):
        assert request(paths, {"op": "ping"}, HANG_GUARD_S) == {"ok": True}
        assert request(paths, {"op": "barrier"}, HANG_GUARD_S, ack=True) == {"ok": True}
    assert [m["build"] for m in received] == [build_id(), build_id()]


def test_a_silent_daemon_is_struck_and_an_answer_clears_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(protocol.ACK_WAIT_ENV, raising=False)
    silent = threading.Event()
    silent.set()
    gone_quiet = threading.Event()

    def serve(conn: socket.socket, message: dict[str, object]) -> None:
        if silent.is_set():
            threading.Event().wait(protocol.ACK_WAIT_S * 3)  # reads, never acknowledges in time
            gone_quiet.set()
            return
        answer_ok(conn, message)

    with fake_daemon(tmp_path, serve) as (paths, _):
        with pytest.raises(BarrierFailed) as failed:
            request(paths, {"op": "barrier"}, HANG_GUARD_S, ack=True)
        assert failed.value.reason.startswith(unanswered.REASON)
        assert unanswered.record_path(paths).exists()
        gone_quiet.wait(HANG_GUARD_S)  # served one connection at a time
        silent.clear()
        # No daemon holds this folder's lock, so the record is not in force:
        # the next request asks, is answered, and the strike goes.
        assert request(paths, {"op": "barrier"}, HANG_GUARD_S, ack=True) == {"ok": True}
        assert not unanswered.record_path(paths).exists()


def test_nothing_is_sent_where_no_peer_can_be_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(envelope, "no_peer_check", lambda: "no peer credential check here")
    with (
        fake_daemon(tmp_path, answer_ok) as (paths, received),
        pytest.raises(BarrierFailed, match="no peer credential check here"),
    ):
        request(paths, {"op": "ping"}, HANG_GUARD_S)
    assert received == []


def test_no_daemon_is_spawnable(tmp_path: Path) -> None:
    paths = RuntimePaths(tmp_path, tmp_path / "runtime")
    with pytest.raises(BarrierFailed) as failed:
        request(paths, {"op": "ping"}, 1.0)
    assert failed.value.spawnable and failed.value.reason == protocol.NO_DAEMON
