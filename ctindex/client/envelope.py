"""The one client envelope: every request to the project's daemon goes
out and comes back through here (the query path, ctindex/fast_entry.py;
barriers, pings, `status` and `stop`, ctindex/client/daemon_requests.py).

The envelope adds what every request needs and nothing an op means: no
request to a daemon where no peer can be trusted (ctindex/ipc/peer.py),
a daemon that did not acknowledge lately skipped and a new silence
recorded (ctindex/client/unanswered.py), this process's build id, the
bound, and one failure type, BarrierFailed, carrying the reason a query
reports. ctindex/ipc/protocol.py carries the bytes.

It is on every indexed query, so it imports only the standard library and
what the query path imports anyway.
"""

from __future__ import annotations

import os

from ctindex.client import unanswered
from ctindex.ipc import protocol
from ctindex.ipc.build_id import build_id
from ctindex.ipc.peer import no_peer_check
from ctindex.ipc.protocol import ExchangeFailed

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from ctindex.ipc.protocol import Message
    from ctindex.ipc.runtime_dir import RuntimePaths

# The daemon runs other code than this client (an upgrade, an edited editable
# install): it exits after saying so, and this command starts its successor.
BUILD_MISMATCH = "daemon was a different build"


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


def request(
    paths: RuntimePaths,
    payload: Message,
    timeout: float,
    *,
    ack: bool = False,
    max_reply: int = protocol.MAX_REPLY,
) -> Message:
    """One request/answer exchange; raises BarrierFailed with a reason.
    Every request carries this process's build id (the daemon serves queries
    of its own build only). With `ack`, the daemon's ACK line must come
    within ACK_WAIT_S: a daemon that sends none is stopped or wedged,
    remembered as such (ctindex/client/unanswered.py), and skipped by the
    next requests with `ack` until it shows life again. This is the one
    client envelope: the query path (ctindex/fast_entry.py), barriers,
    `status` and `stop` all go through it."""
    return send_request(paths, payload, timeout, ack=ack, max_reply=max_reply).reply()


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
    max_reply: int = protocol.MAX_REPLY,
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
            paths.socket,
            {**payload, "build": build_id()},
            timeout,
            ack=ack,
            keeper=keeper,
            max_reply=max_reply,
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
