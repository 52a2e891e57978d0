"""The `search` op's decisions (ctindex/daemon/search_op.py) with a fake
loop: what it declines, and why, before any barrier is started."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ctindex.daemon.barrier import Waiter
from ctindex.daemon.query import QueryService
from ctindex.daemon.reconcile import Outcome
from ctindex.daemon.search_op import SearchOp
from ctindex.daemon.server import Connection

if TYPE_CHECKING:
    from ctindex.ipc.protocol import SearchRequest


@dataclass
class FakeWatcher:
    name: str = "inotify"
    degraded: str | None = None


@dataclass
class FakeServer:
    replies: list[dict[str, Any]] = field(default_factory=list)

    def reply(self, conn: Connection, answer: dict[str, Any]) -> None:
        self.replies.append(answer)

    def extend(self, conn: Connection, deadline: float) -> None:
        pass


@dataclass
class FakePlan:
    digest: str = "plan-1"


@dataclass
class FakeLoop:
    server: FakeServer = field(default_factory=FakeServer)
    watcher: FakeWatcher = field(default_factory=FakeWatcher)
    plan: FakePlan = field(default_factory=FakePlan)
    outdated: bool = False
    replans: int = 0
    barriers: list[dict[str, Any]] = field(default_factory=list)

    def plan_outdated(self) -> bool:
        return self.outdated

    def replan(self) -> None:
        self.replans += 1

    def start_barrier(self, conn: Connection, request: dict[str, Any], now: float) -> None:
        self.barriers.append(request)


@dataclass
class FakeDriver:
    unreported: dict[str, Any] | None = None
    outside: str | None = None
    outside_unreported: str | None = None
    to_verify: str | None = None
    guard: None = None


@dataclass
class FakeStats:
    generation: int = 4


@pytest.fixture
def conn() -> Iterator[Connection]:
    a, b = socket.socketpair()
    try:
        yield Connection(a, 0.0, request={"op": "search", "argv": ["q"], "cwd": "/"})
    finally:
        a.close()
        b.close()


def op(tmp_path: Path, loop: FakeLoop, driver: FakeDriver | None = None) -> SearchOp:
    queries = QueryService(tmp_path, tmp_path / "index", lambda: None)
    return SearchOp(
        loop,  # type: ignore[arg-type]
        queries,
        driver or FakeDriver(),  # type: ignore[arg-type]
        FakeStats(),  # type: ignore[arg-type]
        "inst",
        lambda: 0.0,
    )


# A typed `search` request, as ctindex/daemon/ops.py hands it on (the build
# and the shape are checked there: tests/ctindex/daemon/test_ops.py).
GOOD: SearchRequest = {"argv": ["q"], "cwd": "/"}


def test_a_busy_worker_declines(
    tmp_path: Path, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = FakeLoop()
    search = op(tmp_path, loop)
    monkeypatch.setattr(QueryService, "busy", property(lambda self: True))
    search.start(conn, GOOD, 0.0)
    assert loop.server.replies == [
        {"ok": False, "declined": True, "error": "daemon busy", "instance": "inst"}
    ]
    assert search.queries.declined == 1 and search.queries.last_declined == "daemon busy"
    assert loop.barriers == []


def test_untrusted_events_and_unreported_passes_decline(tmp_path: Path, conn: Connection) -> None:
    loop = FakeLoop(watcher=FakeWatcher(name="poll"))
    op(tmp_path, loop).start(conn, GOOD, 0.0)
    loop2 = FakeLoop()
    op(tmp_path, loop2, FakeDriver(unreported={"reason": "overflow"})).start(conn, GOOD, 0.0)
    assert [r["error"] for r in loop.server.replies + loop2.server.replies] == [
        "events not trusted",
        "a full pass to report",
    ]


def test_outdated_plan_replans_and_declines(tmp_path: Path, conn: Connection) -> None:
    loop = FakeLoop(outdated=True)
    op(tmp_path, loop).start(conn, GOOD, 0.0)
    assert loop.replans == 1 and loop.server.replies[0]["error"] == "plan changed"


def test_a_current_plan_starts_the_barrier(tmp_path: Path, conn: Connection) -> None:
    loop = FakeLoop()
    op(tmp_path, loop).start(conn, GOOD, 0.0)
    assert loop.barriers == [{"plan": None, "config": None, "timeout_ms": None}]
    assert loop.server.replies == []


def test_a_barrier_that_met_a_build_declines_naming_it(tmp_path: Path, conn: Connection) -> None:
    loop = FakeLoop()
    op(tmp_path, loop).barrier_done(Waiter(conn, 0.0, 1.0, seen=True), Outcome.BUSY)
    assert loop.server.replies[0]["error"] == "index busy: a build is in progress"
