"""The daemon's wire protocol (ctindex/ipc/protocol.py): what arrives is
checked, the one exchange is bounded, a barrier's answer is one type both
ways, and the trust rule is one predicate.

The exchange is run against real Unix sockets served by a thread that
plays a daemon misbehaving in one way each."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctindex.ipc import protocol
from ctindex.ipc.protocol import (
    ACK_LINE,
    BarrierResult,
    ExchangeFailed,
    ProtocolError,
    events_trusted,
    exchange,
    search_answer,
    search_request,
)

pytestmark = pytest.mark.needs("peercred")

HANG_GUARD_S = 10.0

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
BARRIER_KEYS = ["generation", "instance", "lane", "backend", "degraded", "reconciled", "plan"]
replies = st.dictionaries(st.sampled_from(BARRIER_KEYS) | st.text(), json_values, max_size=8)


@contextmanager
def fake_daemon(tmp_path: Path, serve: Callable[[socket.socket], None]) -> Iterator[Path]:
    """A listening socket whose one connection `serve` handles in a thread."""
    path = tmp_path / "d.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.fspath(path))
    listener.listen(1)

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(HANG_GUARD_S)
            conn.recv(protocol.MAX_REQUEST)
            with contextlib.suppress(OSError):  # the client stopped reading (over its cap)
                serve(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        thread.join(HANG_GUARD_S)
        listener.close()


def test_an_answer_after_its_ack_is_the_reply(tmp_path: Path) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(ACK_LINE + b"\n" + b'{"ok":true,"n":1}\n')

    with fake_daemon(tmp_path, serve) as path:
        assert exchange(path, {"op": "ping"}, HANG_GUARD_S, ack=True) == {"ok": True, "n": 1}


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        (b"not json\n", protocol.MALFORMED),
        (b"[1, 2]\n", protocol.MALFORMED),
        (b'{"ok": tr', protocol.CLOSED),  # the daemon died mid-answer
        (b"x" * (protocol.MAX_REPLY + 2), protocol.TOO_LARGE),
    ],
)
def test_a_malformed_or_broken_reply_is_a_reason_never_a_traceback(
    tmp_path: Path, sent: bytes, reason: str
) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(sent)

    with fake_daemon(tmp_path, serve) as path, pytest.raises(ExchangeFailed) as failed:
        exchange(path, {"op": "status"}, HANG_GUARD_S)
    assert failed.value.reason == reason
    assert not failed.value.unacknowledged and not failed.value.spawnable
    assert failed.value.heard is (reason == protocol.MALFORMED)  # a whole line came


def test_a_daemon_that_never_acknowledges_is_told_apart(tmp_path: Path) -> None:
    done = threading.Event()

    def serve(conn: socket.socket) -> None:
        done.wait(HANG_GUARD_S)  # reads the request, never answers

    with fake_daemon(tmp_path, serve) as path:
        try:
            with pytest.raises(ExchangeFailed) as failed:
                exchange(path, {"op": "barrier"}, HANG_GUARD_S, ack=True)
        finally:
            done.set()
    assert failed.value.unacknowledged


def test_a_stretched_ack_wait_reaches_a_new_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CTINDEX_ACK_WAIT_S is read on every path a request takes (a new
    connection here, a kept one in test_protocol_keeper.py): a daemon that
    reads the request later than ACK_WAIT_S is still heard."""
    monkeypatch.setenv(protocol.ACK_WAIT_ENV, str(HANG_GUARD_S))

    def serve(conn: socket.socket) -> None:
        threading.Event().wait(protocol.ACK_WAIT_S * 2)  # a loaded daemon, late
        conn.sendall(ACK_LINE + b"\n" + b'{"ok":true}\n')

    with fake_daemon(tmp_path, serve) as path:
        assert exchange(path, {"op": "barrier"}, HANG_GUARD_S, ack=True) == {"ok": True}


def test_no_socket_is_spawnable(tmp_path: Path) -> None:
    with pytest.raises(ExchangeFailed) as failed:
        exchange(tmp_path / "absent.sock", {"op": "ping"}, 1.0)
    assert failed.value.reason == protocol.NO_DAEMON and failed.value.spawnable


def test_one_client_envelope_sends_every_daemon_request() -> None:
    """Only ctindex/client/envelope.py puts a request on the wire:
    the query path and every other client go through its envelope (peer
    check, strike skipped or recorded, build id), and none keeps a socket
    loop of its own."""
    package = Path(str(protocol.__file__)).parents[1]
    senders = set()
    for path in package.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if "protocol.exchange(" in source or "protocol.send(" in source:
            senders.add(path.relative_to(package).as_posix())
    assert senders == {"client/envelope.py"}
    fast_entry = (package / "fast_entry.py").read_text(encoding="utf-8")
    assert "envelope.request(" in fast_entry
    assert ".recv(" not in fast_entry and "_socket" not in fast_entry


@given(replies, st.floats(min_value=0, max_value=1e6))
def test_any_barrier_reply_is_a_result_or_a_protocol_error(
    reply: dict[str, object], ms: float
) -> None:
    try:
        result = BarrierResult.from_reply(reply, ms)
    except ProtocolError:
        return
    assert result.barrier_ms == ms
    assert type(result.generation) is int and isinstance(result.backend, str)


answers = st.builds(
    BarrierResult,
    generation=st.integers(min_value=0, max_value=2**53),
    instance=st.text(),
    lane=st.sampled_from(["clean", "degraded", "poll"]),
    backend=st.sampled_from(["inotify", "fsevents", "poll"]),
    backend_reason=st.none() | st.text(),
    degraded=st.none() | st.text(),
    reconciled=st.booleans(),
    reconcile_reason=st.none() | st.text(),
    reconcile_ms=st.none() | st.floats(min_value=0, max_value=1e6),
    barrier_ms=st.floats(min_value=0, max_value=1e6),
    identity=st.text(),
    outside=st.none() | st.text(),
    plan=st.text(),
)


@given(answers)
def test_the_daemons_answer_reads_back_as_sent(answer: BarrierResult) -> None:
    """One description of the reply: what the daemon writes is what a client reads."""
    wire = json.loads(json.dumps(answer.to_wire()))
    assert wire["ok"] is True
    assert BarrierResult.from_reply(wire, answer.barrier_ms) == answer


def test_a_search_answer_is_printed_only_when_whole_and_of_this_build() -> None:
    good = {"ok": True, "build": "b1", "stdout": "out", "stderr": "", "code": 0}
    assert search_answer(good, "b1") == {"stdout": "out", "stderr": "", "code": 0, "result": None}
    assert search_answer(good, "b2") is None
    data = {"results": [{"id": "a"}], "total": 1, "freshness": {"mode": "x"}, "notes": []}
    assert search_answer({**good, "result": data}, "b1") == {
        "stdout": "out",
        "stderr": "",
        "code": 0,
        "result": data,
    }
    for broken in (
        {"code": True},
        {"code": "0"},
        {"stdout": None},
        {"ok": False},
        {"result": []},
        {"result": {**data, "total": "1"}},
        {"result": {**data, "results": ["a"]}},
        {"result": {**data, "freshness": None}},
    ):
        assert search_answer({**good, **broken}, "b1") is None


def test_a_search_request_needs_words_and_a_folder() -> None:
    assert search_request({"argv": ["search", "x"], "cwd": "/p"}) == {
        "argv": ["search", "x"],
        "cwd": "/p",
    }
    for broken in ({"argv": "search x", "cwd": "/p"}, {"argv": ["a", 1], "cwd": "/p"}, {}):
        assert search_request(broken) is None


@pytest.mark.parametrize(
    ("backend", "degraded", "trusted"),
    [
        ("inotify", None, True),
        ("poll", None, False),
        ("inotify", "overflow", False),
        ("fsevents", "", True),
    ],
)
def test_events_are_trusted_from_a_native_watcher_that_is_not_degraded(
    backend: str, degraded: str | None, trusted: bool
) -> None:
    assert events_trusted(backend, degraded) is trusted


@pytest.mark.parametrize("degraded", [1, True, False, 0, ["inotify overflow"], {"why": "x"}, 0.5])
def test_a_degraded_field_that_is_not_a_reason_is_a_malformed_answer(degraded: object) -> None:
    # Read as "absent" it would make a degraded lane's answer look trusted.
    reply = {"ok": True, "generation": 3, "instance": "i", "lane": "clean", "backend": "inotify"}
    assert BarrierResult.from_reply({**reply, "degraded": None}, 1.0).degraded is None
    with pytest.raises(ProtocolError, match="degraded"):
        BarrierResult.from_reply({**reply, "degraded": degraded}, 1.0)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, protocol.ACK_WAIT_S),
        ("", protocol.ACK_WAIT_S),
        ("2.5", 2.5),
        ("0", protocol.ACK_WAIT_S),
        ("-1", protocol.ACK_WAIT_S),
        ("nan", protocol.ACK_WAIT_S),
        ("soon", protocol.ACK_WAIT_S),
    ],
)
def test_the_ack_wait_is_stretched_only_by_a_positive_number(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: float
) -> None:
    if raw is None:
        monkeypatch.delenv(protocol.ACK_WAIT_ENV, raising=False)
    else:
        monkeypatch.setenv(protocol.ACK_WAIT_ENV, raw)
    assert protocol.ack_wait_s() == expected
