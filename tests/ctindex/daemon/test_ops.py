"""The daemon's op table (ctindex/daemon/ops.py): every op a client sends is
in it, each reads a typed request or answers "malformed", and another
build's client is retired, declined or served as the op says."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ctindex.daemon import ops
from ctindex.daemon.server import Connection

BUILD = "build-1"


@dataclass
class FakeSearch:
    started: list[Any] = field(default_factory=list)

    def start(self, conn: Connection, request: Any, now: float) -> None:
        self.started.append(request)


@dataclass
class FakeDaemon:
    """The Daemon's surface the handlers use (ctindex/daemon/lifecycle.py)."""

    build: str = BUILD
    instance: str = "inst"
    pid: int = 42
    search: FakeSearch | None = field(default_factory=FakeSearch)
    stop_reason: str | None = None
    last_activity: float = 0.0
    replies: list[dict[str, Any]] = field(default_factory=list)
    retired: list[object] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)
    barriers: list[Any] = field(default_factory=list)

    def reply(self, conn: Connection, answer: dict[str, Any]) -> None:
        self.replies.append(dict(answer))

    def retire(self, conn: Connection, theirs: object) -> None:
        self.retired.append(theirs)

    def decline(self, conn: Connection, reason: str) -> None:
        self.declined.append(reason)

    def start_barrier(self, conn: Connection, request: Any, now: float) -> None:
        self.barriers.append(request)

    def status_record(self) -> dict[str, Any]:
        return {"state": "idle"}


@pytest.fixture
def conn() -> Iterator[Connection]:
    a, b = socket.socketpair()
    try:
        yield Connection(a, 0.0)
    finally:
        a.close()
        b.close()


def serve(daemon: FakeDaemon, conn: Connection, message: dict[str, object]) -> None:
    ops.serve(daemon, conn, message, 5.0)  # type: ignore[arg-type]


def test_the_table_names_every_op_the_clients_send() -> None:
    # ctindex/client/: barrier and ping (daemon_requests.py), status and stop
    # (control.py); ctindex/fast_entry.py: search.
    assert set(ops.OPS) == {"barrier", "ping", "search", "status", "stop"}


def test_an_unknown_op_is_answered(conn: Connection) -> None:
    daemon = FakeDaemon()
    serve(daemon, conn, {"op": "reindex", "build": BUILD})
    assert daemon.replies == [{"ok": False, "error": "unknown op"}]


def test_each_op_reaches_its_handler_typed(conn: Connection) -> None:
    daemon = FakeDaemon()
    serve(daemon, conn, {"op": "barrier", "build": BUILD, "plan": "p", "timeout_ms": 500})
    serve(daemon, conn, {"op": "search", "build": BUILD, "argv": ["q"], "cwd": "/"})
    serve(daemon, conn, {"op": "ping", "build": BUILD})
    serve(daemon, conn, {"op": "status"})
    assert daemon.barriers == [{"plan": "p", "config": None, "timeout_ms": 500}]
    assert daemon.search is not None and daemon.search.started == [{"argv": ["q"], "cwd": "/"}]
    assert daemon.replies == [
        {"ok": True, "instance": "inst", "pid": 42},
        {"ok": True, "status": {"state": "idle"}},
    ]
    assert daemon.last_activity == 5.0
    serve(daemon, conn, {"op": "stop"})
    assert daemon.stop_reason == "stop-request"


@pytest.mark.parametrize(
    ("op", "rule"),
    [("barrier", "retire"), ("ping", "retire"), ("search", "decline"), ("status", "serve")],
)
def test_another_build_is_retired_declined_or_served(conn: Connection, op: str, rule: str) -> None:
    daemon = FakeDaemon()
    serve(daemon, conn, {"op": op, "build": "other", "argv": ["q"], "cwd": "/"})
    assert daemon.retired == (["other"] if rule == "retire" else [])
    assert daemon.declined == (["build mismatch"] if rule == "decline" else [])
    assert bool(daemon.replies) is (rule == "serve")
    assert daemon.barriers == []


@pytest.mark.parametrize(
    "message",
    [
        {"op": "barrier", "plan": 3},
        {"op": "barrier", "config": {"mtime": 1}},
        {"op": "barrier", "config": [1, "2"]},
        {"op": "barrier", "timeout_ms": "500"},
        {"op": "barrier", "timeout_ms": True},
        {"op": "search", "argv": "q", "cwd": "/"},
        {"op": "search", "argv": ["q", 1], "cwd": "/"},
        {"op": "search", "argv": ["q"], "cwd": None},
    ],
)
def test_a_malformed_request_is_answered_never_guessed_at(
    conn: Connection, message: dict[str, object]
) -> None:
    daemon = FakeDaemon()
    serve(daemon, conn, {**message, "build": BUILD})
    assert daemon.replies == [{"ok": False, "error": f"malformed {message['op']} request"}]
    assert daemon.barriers == []
    assert daemon.search is not None and daemon.search.started == []


def test_a_daemon_that_answers_no_queries_says_so(conn: Connection) -> None:
    daemon = FakeDaemon(search=None)
    serve(daemon, conn, {"op": "search", "build": BUILD, "argv": ["q"], "cwd": "/"})
    assert daemon.replies == [{"ok": False, "error": "unknown op"}]
