"""Asking the project's daemon: a barrier, a ping, any request, with the
failure vocabulary a query reports (ctindex/ipc/protocol.py carries the
bytes; ctindex/query/freshness.py decides what an answer means).

It is on every indexed query, so it imports only the standard library at
module level. A barrier is a bounded exchange: connect (CONNECT_TIMEOUT_S
of the protocol) and the whole exchange (plan.settings.barrier_timeout_ms)
are both capped. Every failure is a BarrierFailed; the caller reconciles.
"""

from __future__ import annotations

import contextlib
import os
import time

from ctindex.client import unanswered
from ctindex.ipc import protocol
from ctindex.ipc.build_id import build_id
from ctindex.ipc.peer import no_peer_check
from ctindex.ipc.protocol import BarrierResult, ExchangeFailed

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from ctindex.ipc.protocol import Message
    from ctindex.ipc.runtime_dir import RuntimePaths

# Failure reasons (shown in freshness.reason and `watch status`).
NO_DAEMON = protocol.NO_DAEMON
BARRIER_TIMEOUT = protocol.BARRIER_TIMEOUT
DAEMON_BUSY = protocol.DAEMON_BUSY
WRONG_OWNER = protocol.WRONG_OWNER
PLAN_MISMATCH = "daemon has a different plan"
# The daemon runs other code than this client (an upgrade, an edited editable
# install): it exits after saying so, and this command starts its successor.
BUILD_MISMATCH = "daemon was a different build"
RETIRE_TIMEOUT_S = 0.2  # asking a daemon of an older build (no build check) to stop


class BarrierFailed(Exception):
    """No trustworthy answer; `spawnable` when nothing is listening at all
    (or the daemon that answered is leaving because it is another build)."""

    def __init__(self, reason: str, spawnable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.spawnable = spawnable

    @property
    def other_build(self) -> bool:
        return self.reason == BUILD_MISMATCH


def token() -> str:
    """A fresh request or claim token."""
    return os.urandom(8).hex()  # identity, not a secret: `secrets` would cost imports


def request(paths: RuntimePaths, payload: Message, timeout: float, *, ack: bool = False) -> Message:
    """One request/answer exchange; raises BarrierFailed with a reason.
    Every request carries this process's build id (the daemon serves queries
    of its own build only). With `ack`, the daemon's ACK line must come
    within ACK_WAIT_S: a daemon that sends none is stopped or wedged,
    remembered as such (ctindex/client/unanswered.py), and skipped by the
    next requests with `ack` until it shows life again."""
    return send_request(paths, payload, timeout, ack=ack).reply()


class SentRequest:
    """A request on the wire (`send_request`): `reply()` reads its answer,
    with `request`'s failure vocabulary and bookkeeping."""

    def __init__(
        self, paths: RuntimePaths, sent: protocol.Sent, ack: bool, struck: bool = False
    ) -> None:
        self._paths, self._sent, self._ack = paths, sent, ack
        self._struck = struck  # a strike was recorded when it was sent: an answer clears it

    def reply(self) -> Message:
        paths, ack = self._paths, self._ack
        try:
            reply = self._sent.answer()
        except ExchangeFailed as failed:
            raise _failed(paths, failed, ack) from failed
        if ack and self._struck:
            unanswered.clear(paths)
        return reply

    def close(self) -> None:
        """Give up on the answer."""
        self._sent.close()


def send_request(
    paths: RuntimePaths,
    payload: Message,
    timeout: float,
    *,
    ack: bool = False,
    keeper: protocol.Keeper | None = None,
) -> SentRequest:
    """`request`'s first half: checked and sent (raises BarrierFailed), on
    the connection `keeper` keeps, if any."""
    disabled = no_peer_check()
    if disabled is not None:  # no daemon may be trusted here: never started, never asked
        raise BarrierFailed(disabled)
    struck = False
    if ack:
        skipped, struck = unanswered.check(paths)
        if skipped is not None:
            raise BarrierFailed(skipped)
    try:
        sent = protocol.send(
            paths.socket, {**payload, "build": build_id()}, timeout, ack=ack, keeper=keeper
        )
    except ExchangeFailed as failed:
        raise _failed(paths, failed, ack) from failed
    return SentRequest(paths, sent, ack, struck)


def _failed(paths: RuntimePaths, failed: ExchangeFailed, ack: bool) -> BarrierFailed:
    if failed.unacknowledged:
        return BarrierFailed(unanswered.strike(paths))
    if ack and failed.heard:
        unanswered.clear(paths)  # it answered, if not in shape: alive
    return BarrierFailed(failed.reason, spawnable=failed.spawnable)


def ping(paths: RuntimePaths, timeout: float = 0.5) -> bool:
    """True when a daemon of this build answers on the project's socket (no
    barrier, no spawn). A daemon of another build is told to leave: False."""
    try:
        reply = request(paths, {"op": "ping"}, timeout)
        _check_build(paths, reply)
    except BarrierFailed:
        return False
    return reply.get("ok") is True


def _check_build(paths: RuntimePaths, reply: Message) -> None:
    """Raise BarrierFailed(BUILD_MISMATCH) when `reply` came from another build.
    A daemon that checks builds has already begun to exit (`retiring`); one
    that predates the check answers with no build, and is asked to stop."""
    if reply.get("build") == build_id():
        return
    if reply.get("retiring") is not True:
        with contextlib.suppress(BarrierFailed):
            request(paths, {"op": "stop"}, RETIRE_TIMEOUT_S)
    raise BarrierFailed(BUILD_MISMATCH, spawnable=True)


def barrier(
    paths: RuntimePaths, plan_digest: str, timeout_ms: int, config: list[int] | str | None = None
) -> BarrierResult:
    """Ask the daemon to prove it has applied every event queued before now.
    `config`: the config file's stat as the client saw it (the daemon reloads
    its plan first when its own differs)."""
    return send_barrier(paths, plan_digest, timeout_ms, config).result()


class SentBarrier:
    """A barrier on the wire (`send_barrier`): `result()` reads and judges
    the daemon's answer. What the caller does in between (a read of the
    generation it holds, ctindex/query/freshness.py) overlaps the daemon's
    work; the answer proves only what it proves, whenever it is read."""

    def __init__(self, paths: RuntimePaths, sent: SentRequest, digest: str, started: float) -> None:
        self._paths, self._sent, self._digest, self._started = paths, sent, digest, started

    def close(self) -> None:
        """Give up on the answer."""
        self._sent.close()

    def result(self) -> BarrierResult:
        """The daemon's answer (raises BarrierFailed)."""
        paths, plan_digest = self._paths, self._digest
        reply = self._sent.reply()
        _check_build(paths, reply)
        if reply.get("ok") is not True:
            error = reply.get("error")
            raise BarrierFailed(f"daemon: {error}" if isinstance(error, str) else "daemon error")
        if reply.get("plan") != plan_digest:
            raise BarrierFailed(PLAN_MISMATCH)
        try:
            return BarrierResult.from_reply(
                reply, round((time.monotonic() - self._started) * 1000, 3)
            )
        except ValueError as exc:
            raise BarrierFailed(protocol.MALFORMED) from exc


def send_barrier(
    paths: RuntimePaths,
    plan_digest: str,
    timeout_ms: int,
    config: list[int] | str | None = None,
    keeper: protocol.Keeper | None = None,
) -> SentBarrier:
    """`barrier`'s first half: the request sent (raises BarrierFailed), on
    the connection `keeper` keeps for a long-lived reader, if any."""
    started = time.monotonic()
    payload: Message = {
        "op": "barrier",
        "token": token(),
        "plan": plan_digest,
        "timeout_ms": timeout_ms,
    }
    if config is not None:
        payload["config"] = config
    sent = send_request(paths, payload, timeout_ms / 1000, ack=True, keeper=keeper)
    return SentBarrier(paths, sent, plan_digest, started)
