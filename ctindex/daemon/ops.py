"""The daemon's ops: one table, each op with its typed request, its typed
reply and its handler (docs/daemon.md "Ops").

A request arrives as one JSON object naming its `op`
(ctindex/daemon/server.py reads the line). `serve` looks the op up here,
applies the op's rule for a client of another build, reads the typed
request (a malformed one is answered, never guessed at) and hands it to
the op's handler, which answers with the op's typed reply. Adding an op is
adding one entry to OPS; nothing else dispatches on op names.

The readers of the request shapes live in ctindex/ipc/protocol.py, beside
the clients that write them; this module is the daemon's half only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Generic, TypedDict, TypeVar

from ctindex.ipc import protocol

if TYPE_CHECKING:
    from ctindex.daemon.lifecycle import Daemon
    from ctindex.daemon.server import Connection
    from ctindex.daemon.status import StatusRecord
    from ctindex.ipc.protocol import BarrierRequest, Message, SearchRequest


class OtherBuild(Enum):
    """What an op does for a client of another build (docs/daemon.md
    "Build identity")."""

    RETIRE = "retire"  # answer once and leave: the client starts our successor
    DECLINE = "decline"  # answer "declined": the client's own barrier retires us
    SERVE = "serve"  # any build may ask (`status`, `stop`)


class PingReply(TypedDict):
    ok: bool
    instance: str
    pid: int


class StopReply(TypedDict):
    ok: bool
    instance: str


class StatusReply(TypedDict):
    ok: bool
    status: StatusRecord


class ErrorReply(TypedDict):
    ok: bool
    error: str


R = TypeVar("R")


@dataclass(frozen=True)
class Op(Generic[R]):
    """One op: how its request is read, who may ask, and its handler."""

    name: str
    read: Callable[[Message], R | None]  # the typed request, or None when malformed
    other_build: OtherBuild
    handle: Callable[[Daemon, Connection, R, float], None]

    def serve(self, daemon: Daemon, conn: Connection, message: Message, now: float) -> None:
        request = self.read(message)
        if request is None:
            daemon.reply(conn, ErrorReply(ok=False, error=f"malformed {self.name} request"))
            return
        self.handle(daemon, conn, request, now)


class NoFields(TypedDict):
    """The request of an op that takes nothing but its name."""


def _no_fields(message: Message) -> NoFields:
    return NoFields()


def _barrier(daemon: Daemon, conn: Connection, request: BarrierRequest, now: float) -> None:
    daemon.last_activity = now
    daemon.start_barrier(conn, request, now)


def _search(daemon: Daemon, conn: Connection, request: SearchRequest, now: float) -> None:
    if daemon.search is None:  # a daemon that answers no queries itself
        daemon.reply(conn, ErrorReply(ok=False, error="unknown op"))
        return
    daemon.last_activity = now
    daemon.search.start(conn, request, now)


def _status(daemon: Daemon, conn: Connection, request: NoFields, now: float) -> None:
    daemon.reply(conn, StatusReply(ok=True, status=daemon.status_record()))


def _ping(daemon: Daemon, conn: Connection, request: NoFields, now: float) -> None:
    daemon.reply(conn, PingReply(ok=True, instance=daemon.instance, pid=daemon.pid))


def _stop(daemon: Daemon, conn: Connection, request: NoFields, now: float) -> None:
    daemon.reply(conn, StopReply(ok=True, instance=daemon.instance))
    daemon.stop_reason = "stop-request"


OPS: dict[str, Op[BarrierRequest] | Op[SearchRequest] | Op[NoFields]] = {
    op.name: op
    for op in (
        Op("barrier", protocol.barrier_request, OtherBuild.RETIRE, _barrier),
        Op("ping", _no_fields, OtherBuild.RETIRE, _ping),
        Op("search", protocol.search_request, OtherBuild.DECLINE, _search),
        Op("status", _no_fields, OtherBuild.SERVE, _status),
        Op("stop", _no_fields, OtherBuild.SERVE, _stop),
    )
}


def serve(daemon: Daemon, conn: Connection, message: Message, now: float) -> None:
    """Answer one request (its `op` a string: ctindex/daemon/server.py)."""
    op = OPS.get(str(message["op"]))
    if op is None:
        daemon.reply(conn, ErrorReply(ok=False, error="unknown op"))
        return
    if op.other_build is not OtherBuild.SERVE and message.get("build") != daemon.build:
        if op.other_build is OtherBuild.RETIRE:
            daemon.retire(conn, message.get("build"))
        else:
            daemon.decline(conn, "build mismatch")
        return
    op.serve(daemon, conn, message, now)
