"""The daemon's IPC endpoint: a Unix socket served from the selector loop.

One request at a time per connection: a single JSON line of at most
MAX_REQUEST bytes, answered with a single JSON line (the messages:
ctindex/ipc/protocol.py), and the connection closed, except after a barrier
that asked `"keep": true` (a long-lived reader's, ctindex/ipc/protocol.py
`Keeper`): that connection then waits, idle, up to KEEP_IDLE_S for the
next request, at most KEEP_MAX of them at once (beyond, the answer closes
it as any other). A
request with `"ack": true` first gets the line ACK the moment it is read,
before any work: the proof, within a fraction of a second, that the loop
is alive, which lets a client tell a stopped or wedged daemon from one still working on its answer
(ctindex/client/unanswered.py). Sockets are non-blocking with a buffer and
a deadline per connection, so a half-written, oversized or malformed request
or a client that never reads only costs its own connection. Only the owning
user is served: the folder is 0700 and every peer's uid is checked as the
kernel recorded it at connect time (SO_PEERCRED, or getpeereid where that is
the mechanism: ctindex/ipc/peer.py `peer_uid`).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ctindex.ipc.peer import peer_is_owner
from ctindex.ipc.protocol import ACK_LINE, MAX_REQUEST, ProtocolError, decode, encode

if TYPE_CHECKING:
    from ctindex.ipc.protocol import Message

# Connections taken per wakeup of the listener: a client that keeps connecting
# must not keep the one loop (events, barriers, heartbeat) in accept() forever;
# the rest wait in the backlog for the next turn (docs/reliability.md).
ACCEPT_BATCH = 64
READ_DEADLINE_S = 1.0  # to deliver a complete request line
ACK = ACK_LINE + b"\n"
WRITE_DEADLINE_S = 1.0  # to take the reply once it is ready
# Connections kept open between a long-lived reader's barriers: its
# connect, peer check and close, and the loop's accept and registration,
# are paid once rather than on every query. Bounded in number and idle time.
KEEP_MAX = 8
KEEP_IDLE_S = 30.0


def keep_idle_s() -> float:
    """The idle bound of a kept connection, read as each one goes idle.

    A seam, not a setting: a test replaces it before it forks a daemon to
    choose which kept connection is let go (none until it says so, then the
    next at once, tests/ctindex/ipc/test_protocol_keeper.py). A short
    KEEP_IDLE_S instead raced the bound against the scheduler of a loaded
    machine: the client's reuse could come too late or its next request
    before the daemon woke to close the connection."""
    return KEEP_IDLE_S


@dataclass(eq=False)
class Connection:
    sock: socket.socket
    deadline: float
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytes = b""
    request: Message | None = None  # set once a full line parsed (the last one, when idle)
    answered: bool = False  # the answer is queued: close (or idle) once it is sent
    closed: bool = False
    keep: bool = False  # kept open for another request once answered
    idle: bool = False  # answered and kept: the next line is a new request

    def fileno(self) -> int:
        return self.sock.fileno()


Handler = Callable[[Connection, "Message"], None]


class IpcServer:
    """Owns the listening socket and its connections; the lifecycle loop
    dispatches selector events here and answers requests through reply()."""

    def __init__(
        self,
        path: Path,
        selector: selectors.BaseSelector,
        handler: Handler,
        clock: Callable[[], float],
        stamp: dict[str, str] | None = None,
    ) -> None:
        self.path = path
        # Fields every answer carries (the daemon's build id: a client tells
        # an answer of another build from any error by it, docs/daemon.md).
        self._stamp = dict(stamp or {})
        self._sel = selector
        self._handler = handler
        self._clock = clock
        self._conns: set[Connection] = set()
        self._listener: socket.socket | None = None
        self._ident: tuple[int, int] | None = None
        self.refused = 0  # peers turned away by the uid check (status metric)

    # -- listening -----------------------------------------------------------

    def start(self) -> None:
        """Bind, replacing a stale socket file: only the lock holder gets here,
        so whatever is at the path was left by a dead daemon."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(os.fspath(self.path))
            os.chmod(self.path, 0o600)
            sock.listen(64)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        st = os.lstat(self.path)
        self._ident = (st.st_dev, st.st_ino)
        self._listener = sock
        self._sel.register(sock, selectors.EVENT_READ, self)

    def intact(self) -> bool:
        """True while the socket path is still the socket we bound."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._ident

    def close(self) -> None:
        for conn in list(self._conns):
            self._drop(conn)
        if self._listener is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(self._listener)
            self._listener.close()
            self._listener = None
        # Remove the path only if it is still our socket (never a successor's).
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._ident:
                os.unlink(self.path)

    # -- selector callbacks --------------------------------------------------

    def on_event(self, obj: object, mask: int) -> None:
        if obj is self:
            self._accept()
        elif isinstance(obj, Connection):
            if mask & selectors.EVENT_READ:
                self._read(obj)
            if mask & selectors.EVENT_WRITE and not obj.closed:
                self._flush(obj)

    def expire(self, now: float) -> None:
        """Drop connections past their deadline (slow or silent clients)."""
        for conn in [c for c in self._conns if c.deadline <= now]:
            self._drop(conn)

    def next_deadline(self) -> float | None:
        return min((c.deadline for c in self._conns), default=None)

    def reply(self, conn: Connection, answer: Mapping[str, object]) -> None:
        """Queue one answer line; the connection closes once it is sent
        (or, kept, waits for the next request)."""
        if conn.closed:
            return
        # `keep`: this connection waits for the client's next request.
        kept = {"keep": True} if conn.keep else {}
        conn.outbuf += encode({**answer, **self._stamp, **kept})
        conn.answered = True
        conn.deadline = self._clock() + WRITE_DEADLINE_S
        self._flush(conn)

    def extend(self, conn: Connection, deadline: float) -> None:
        """Let a handler keep a connection open until `deadline` (a barrier)."""
        conn.deadline = deadline

    @property
    def connections(self) -> int:
        return len(self._conns)

    @property
    def kept(self) -> int:
        """Connections kept for another request (idle or being answered)."""
        return sum(1 for c in self._conns if c.keep)

    # -- internals -----------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE and friends: try again on the next wakeup
                return
            if not peer_is_owner(sock):
                self.refused += 1
                sock.close()
                continue
            sock.setblocking(False)
            conn = Connection(sock, self._clock() + READ_DEADLINE_S)
            self._conns.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: Connection) -> None:
        try:
            chunk = conn.sock.recv(MAX_REQUEST + 1 - len(conn.inbuf))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if not chunk:  # peer went away (before or after asking)
            self._drop(conn)
            return
        if conn.request is not None and not conn.idle:
            return  # one request at a time; ignore trailing bytes
        if conn.idle and not conn.inbuf:  # a kept connection's next request begins
            conn.deadline = self._clock() + READ_DEADLINE_S
        conn.inbuf += chunk
        # A connection is kept only for a well-formed barrier that asks it.
        was_kept, conn.keep = conn.keep, False
        line, sep, _ = conn.inbuf.partition(b"\n")
        if not sep:
            conn.keep = was_kept  # the rest of the line is still to come
            if len(conn.inbuf) > MAX_REQUEST:
                conn.keep = False
                self.reply(conn, {"ok": False, "error": "request too large"})
            return
        try:
            request = decode(line)
        except ProtocolError:
            request = None
        if request is None or not isinstance(request.get("op"), str):
            self.reply(conn, {"ok": False, "error": "malformed request"})
            return
        conn.request = request
        conn.idle = False
        conn.inbuf.clear()
        # Only a barrier is kept (its answer is all the loop sends on it),
        # and only while few are.
        conn.keep = (
            request.get("keep") is True
            and request.get("op") == "barrier"
            and (was_kept or self.kept < KEEP_MAX)
        )
        if request.get("ack") is True:
            conn.outbuf = ACK
            self._flush(conn)
            if conn.closed:
                return
        self._handler(conn, request)

    def _flush(self, conn: Connection) -> None:
        try:
            sent = conn.sock.send(conn.outbuf)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._drop(conn)
            return
        conn.outbuf = conn.outbuf[sent:]
        if conn.outbuf:
            self._sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        elif conn.answered and conn.keep:  # idle until the next request, or its deadline
            conn.answered, conn.idle = False, True
            conn.deadline = self._clock() + keep_idle_s()
            self._sel.modify(conn.sock, selectors.EVENT_READ, conn)
        elif conn.answered:
            self._drop(conn)
        else:  # the ACK is out; the answer comes later
            self._sel.modify(conn.sock, selectors.EVENT_READ, conn)

    def _drop(self, conn: Connection) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.discard(conn)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        conn.sock.close()
