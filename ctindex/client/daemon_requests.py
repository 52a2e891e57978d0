"""Asking the project's daemon: a barrier, a ping, a build check, with the
failure vocabulary a query reports. Every request goes through the one
envelope (ctindex/client/envelope.py); ctindex/query/freshness.py decides
what an answer means.

It is on every indexed query, so it imports only the standard library at
module level. A barrier is a bounded exchange: connect (CONNECT_TIMEOUT_S
of the protocol) and the whole exchange (plan.settings.barrier_timeout_ms)
are both capped. Every failure is a BarrierFailed; the caller reconciles.
"""

from __future__ import annotations

import contextlib
import time

from ctindex.client.envelope import BUILD_MISMATCH as BUILD_MISMATCH
from ctindex.client.envelope import BarrierFailed as BarrierFailed
from ctindex.client.envelope import SentRequest, request, send_request
from ctindex.client.envelope import token as token
from ctindex.ipc import protocol
from ctindex.ipc.build_id import build_id
from ctindex.ipc.protocol import BarrierResult

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
RETIRE_TIMEOUT_S = 0.2  # asking a daemon of an older build (no build check) to stop


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
