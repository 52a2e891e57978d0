"""The daemon's wire protocol: its messages, the one bounded exchange, and
the rule that says when a barrier's answer vouches for an index by itself.

One request at a time over a connection to the project's Unix socket: a
JSON object on one line, answered by a JSON object on one line
(docs/daemon.md, "Barrier protocol" and "Query path"); the connection is
closed after the answer, unless a long-lived reader keeps it for its next
barrier (`Keeper`). A request with `"ack": true` first gets ACK_LINE
the moment the daemon's loop reads it, so a client tells a stopped or wedged
daemon from one still working on its answer.

Both clients (ctindex/fast_entry.py for a `search`, ctindex/client/ for the
barrier and control) exchange through `exchange`; the daemon
(ctindex/daemon/server.py) reads and answers the same messages. What
arrives is checked before it is used: a malformed message is a
ProtocolError or an ExchangeFailed with its reason, never a KeyError.

Standard library only, and only what a search costs anyway (no `typing`,
no `dataclasses`, no `socket` module: ctindex/fast_entry.py imports this on
every `ctindex` process).
"""

from __future__ import annotations

# The C socket type itself: the `socket` module wraps it in enums and imports
# selectors, ~3 ms a search would pay for nothing (the type, its methods and
# exceptions are the same).
import _socket
import _thread
import json
import os
import time

from ctindex.ipc.peer import peer_is_owner

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import TypedDict, TypeGuard

    # One message as JSON decodes it; each kind is checked by its reader here.
    Message = dict[str, object]

    class SearchHit(TypedDict):
        """One result, as `search --json` prints it (docs/cli.md)."""

        id: str
        scope: str
        path: str
        title: str
        type: str
        tags: list[str]
        score: float
        snippet: str
        match: str
        snippet_text: str
        snippet_matches: list[list[int]]
        ref: str

    class SearchResult(TypedDict):
        """A daemon-answered search as data: the `search --json` document's
        results, total, freshness statement and notes (docs/cli.md)."""

        results: list[SearchHit]
        total: int
        freshness: dict[str, object]
        notes: list[str]

    class SearchAnswer(TypedDict):
        """What a daemon-answered `search` prints and exits with, and beside
        it the answer as data (None where the words asked for no indexed
        answer, or for more results than the daemon sends twice;
        docs/decisions/daemon-answers.md says why both travel)."""

        stdout: str
        stderr: str
        code: int
        result: SearchResult | None

    class SearchRequest(TypedDict):
        """A `search` as the fast entry sends it (argv after colour decided)."""

        argv: list[str]
        cwd: str

    class BarrierRequest(TypedDict):
        """A `barrier` as ctindex/client/daemon_requests.py sends it: the plan
        digest and the config file's stat the client saw (the daemon replans
        when its own differ), and the client's budget."""

        plan: str | None
        config: list[int] | str | None
        timeout_ms: int | None


# The line a daemon's loop sends the moment it reads a request that asks
# for it, before any work.
ACK_LINE = b'{"ack":true}'
ACK_WAIT_S = 0.4  # connect, send and the ACK: what a stuck daemon costs (within 0.5 s in all)
# A longer ACK wait for a machine so loaded that a live daemon may take more
# than ACK_WAIT_S to read a request (docs/daemon.md, "Barrier protocol"):
# seconds, read per exchange; the test suite sets it for the tests that
# assert a daemon's answer, so a busy CI host does not turn one into a
# fallback. Values that are not a positive number are ignored.
ACK_WAIT_ENV = "CTINDEX_ACK_WAIT_S"
CONNECT_TIMEOUT_S = 0.1
MAX_REQUEST = 4096  # the daemon refuses longer request lines
MAX_REPLY = 1 << 20  # a barrier's or status answer; a search allows more (its own cap)


def ack_wait_s() -> float:
    """How long a client waits for the daemon's ACK: ACK_WAIT_S, or
    CTINDEX_ACK_WAIT_S where that is a positive number."""
    raw = os.environ.get(ACK_WAIT_ENV)
    if raw:
        try:
            value = float(raw)
        except ValueError:
            return ACK_WAIT_S
        if value > 0:  # NaN is not; a wait past the request's bound is cut to it
            return value
    return ACK_WAIT_S


# Why an exchange failed (shown in freshness.reason and `watch status`).
NO_DAEMON = "no daemon"
BARRIER_TIMEOUT = "barrier timeout"
DAEMON_BUSY = "daemon busy"
WRONG_OWNER = "daemon socket owned by another user"
CLOSED = "daemon closed the connection"
TOO_LARGE = "daemon error: reply too large"
MALFORMED = "daemon error: malformed reply"
UNACKNOWLEDGED = "daemon sent no ACK"  # the caller words it (ctindex/client/unanswered.py)


class ExchangeFailed(Exception):
    """No usable answer: `spawnable` when nothing listens at all;
    `unacknowledged` when an ACK was asked for and none came within
    ACK_WAIT_S (the daemon is stopped or wedged: the caller remembers it);
    `heard` when a whole answer line came but did not parse (the daemon's
    loop is alive, whatever it said); `closed` when the connection was
    closed or broke (not timed out) under it."""

    def __init__(
        self,
        reason: str,
        *,
        spawnable: bool = False,
        unacknowledged: bool = False,
        heard: bool = False,
        closed: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.spawnable = spawnable
        self.unacknowledged = unacknowledged
        self.heard = heard
        self.closed = closed  # the connection closed or broke under the exchange


class ProtocolError(ValueError):
    """A message that does not have the shape its kind requires."""


def encode(message: Message) -> bytes:
    """One message as its line on the wire."""
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes | bytearray) -> Message:
    """One line as a message; raises ProtocolError unless it is a JSON object."""
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise ProtocolError("not JSON") from exc
    if not isinstance(message, dict):
        raise ProtocolError("not a JSON object")
    return message


def exchange(
    socket_path: Path,
    request: Message,
    timeout: float,
    *,
    ack: bool = False,
    max_reply: int = MAX_REPLY,
) -> Message:
    """Send `request` to the daemon at `socket_path` and read its answer.

    Bounded: the connect by CONNECT_TIMEOUT_S, the whole exchange by
    `timeout`, the answer by `max_reply` bytes. With `ack`, the ACK line
    must come within ACK_WAIT_S. Only a daemon of this user is asked (the
    peer's uid, ctindex/ipc/peer.py). Raises ExchangeFailed with a reason."""
    return send(socket_path, request, timeout, ack=ack, max_reply=max_reply).answer()


class Keeper:
    """One connection to a project's daemon kept between the barriers of a
    long-lived reader (ctindex/api.py `Index`): its socket, connect, peer
    check and close, and the daemon's accept, are paid once rather than on
    every query. The daemon keeps a barrier's connection when asked
    (`"keep": true`; at most KEEP_MAX of them, each idle up to KEEP_IDLE_S:
    ctindex/daemon/server.py) and closes it otherwise; a kept connection
    closed meanwhile (idle too long, a daemon that left) is found out by
    the next request, which is then sent once more on a new connection.
    Used by one request at a time (`take` hands it over), and never across
    a fork: a child process makes its own."""

    def __init__(self) -> None:
        self._sock: _socket.socket | None = None
        self._path = ""
        self._pid = 0
        self._lock = _thread.allocate_lock()

    def take(self, path: str) -> _socket.socket | None:
        """The kept connection to the socket at `path`, if any (now the
        caller's: it gives it back, or closes it)."""
        with self._lock:
            sock, self._sock = self._sock, None
            if sock is None:
                return None
            if self._pid == os.getpid() and self._path == path:
                return sock
        # Another socket path now (not ours to reuse), or a parent's,
        # inherited over a fork: closing this process's copy of the
        # descriptor leaves the parent's connection open.
        sock.close()
        return None

    def give(self, path: str, sock: _socket.socket) -> None:
        """Keep `sock`, connected to `path`, for the next request."""
        with self._lock:
            old, self._sock = self._sock, sock
            self._path, self._pid = path, os.getpid()
        if old is not None:
            old.close()

    def close(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


class Sent:
    """An exchange whose request is on the wire (`send`): `answer()` reads
    the reply, as `exchange` would have right away. The bounds run from
    the send, so work done in between (a query read while the daemon
    answers a barrier) is never waited for twice: a reply that came
    meanwhile is in the socket's buffer."""

    def __init__(
        self,
        sock: _socket.socket,
        first_by: float,
        deadline: float,
        ack: bool,
        max_reply: int,
        keeper: Keeper | None = None,
        path: str = "",
        again: Callable[[], Sent] | None = None,
    ) -> None:
        self._sock = sock
        self._path = path  # what it is connected to: the keeper's key
        self._first_by, self._deadline = first_by, deadline
        self._ack, self._max_reply = ack, max_reply
        self._keeper = keeper
        # A kept connection's request, sent again on a new one (`send`).
        self._again = again

    def answer(self) -> Message:
        """The reply (raises ExchangeFailed); the connection is closed, or
        given to the keeper when the daemon says it keeps it too."""
        kept = False
        try:
            line, more = _read_answer(
                self._sock, self._first_by, self._deadline, self._ack, self._max_reply
            )
            try:
                message = decode(line)
            except ProtocolError as exc:
                raise ExchangeFailed(MALFORMED, heard=True) from exc
            if self._keeper is not None and message.get("keep") is True and not more:
                self._keeper.give(self._path, self._sock)
                kept = True
            return message
        except ExchangeFailed as failed:
            if self._again is not None and failed.closed:
                # The daemon closed the kept connection before answering on
                # it (idle too long, or it left): once more, on a new one.
                self._sock.close()
                return self._again().answer()
            raise
        finally:
            if not kept:
                self._sock.close()

    def close(self) -> None:
        """Give up on the reply."""
        self._sock.close()


def send(
    socket_path: Path,
    request: Message,
    timeout: float,
    *,
    ack: bool = False,
    max_reply: int = MAX_REPLY,
    keeper: Keeper | None = None,
) -> Sent:
    """The first half of `exchange`: connect and send `request` (raises
    ExchangeFailed); read the reply with `Sent.answer()`. With `keeper`,
    the connection it keeps is used (and the daemon asked to keep it);
    the connection is given back to it once answered."""
    if ack:
        request = {**request, "ack": True}
    if keeper is not None:
        request = {**request, "keep": True}
    data = encode(request)
    started = time.monotonic()
    deadline = started + timeout
    # Until the ACK (or an answer) arrives, wait no longer than the ACK wait.
    first_by = started + min(ack_wait_s(), timeout) if ack else deadline
    path = os.fspath(socket_path)
    sock = keeper.take(path) if keeper is not None else None
    if sock is not None:
        try:
            _send(sock, data, first_by, ack)
        except ExchangeFailed:  # closed under us: a new connection, below
            sock.close()
        else:
            return Sent(
                sock,
                first_by,
                deadline,
                ack,
                max_reply,
                keeper,
                path,
                again=lambda: _sent_anew(path, data, timeout, ack, max_reply, keeper),
            )
    return _sent_anew(path, data, timeout, ack, max_reply, keeper)


def _sent_anew(
    path: str, data: bytes, timeout: float, ack: bool, max_reply: int, keeper: Keeper | None
) -> Sent:
    """`data` sent on a new connection to `path`."""
    started = time.monotonic()
    deadline = started + timeout
    first_by = started + min(ack_wait_s(), timeout) if ack else deadline
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        _connect(sock, path, min(CONNECT_TIMEOUT_S, timeout), ack)
        _send(sock, data, first_by, ack)
    except BaseException:
        sock.close()
        raise
    return Sent(sock, first_by, deadline, ack, max_reply, keeper, path)


def _connect(sock: _socket.socket, socket_path: str | Path, timeout: float, ack: bool) -> None:
    sock.settimeout(timeout)
    try:
        sock.connect(os.fspath(socket_path))
    except (FileNotFoundError, NotADirectoryError, ConnectionRefusedError) as exc:
        raise ExchangeFailed(NO_DAEMON, spawnable=True) from exc
    except (TimeoutError, BlockingIOError) as exc:  # backlog full: a daemon exists, stuck
        if ack:
            raise ExchangeFailed(UNACKNOWLEDGED, unacknowledged=True) from exc
        raise ExchangeFailed(DAEMON_BUSY) from exc
    except OSError as exc:
        raise ExchangeFailed(f"cannot connect: {exc.strerror or exc}") from exc
    if not peer_is_owner(sock):
        raise ExchangeFailed(WRONG_OWNER)


def _failed(exc: Exception, ack: bool, heard: bool) -> ExchangeFailed:
    """What a socket error while sending or reading means for the exchange:
    a timeout before any ACK is an unacknowledged request, a later one the
    barrier's timeout; anything else (ValueError: the socket closed under
    us) a failed connection."""
    if isinstance(exc, TimeoutError):
        if ack and not heard:
            return ExchangeFailed(UNACKNOWLEDGED, unacknowledged=True)
        return ExchangeFailed(BARRIER_TIMEOUT)
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return ExchangeFailed(f"daemon connection failed: {detail}", closed=True)


def _send(sock: _socket.socket, data: bytes, first_by: float, ack: bool) -> None:
    try:
        sock.settimeout(max(first_by - time.monotonic(), 0.001))
        sock.sendall(data)
    except (OSError, ValueError) as exc:  # TimeoutError is an OSError
        raise _failed(exc, ack, heard=False) from exc


def _read_answer(
    sock: _socket.socket, first_by: float, deadline: float, ack: bool, max_reply: int
) -> tuple[bytearray, bool]:
    """Read until the answer's line (past an ACK line): (the line, whether
    more bytes came after it)."""
    buf = bytearray()
    heard = False  # an ACK or an answer came: the daemon's loop is alive
    try:
        while True:
            line, newline, rest = buf.partition(b"\n")
            if newline and not (ack and line == ACK_LINE):
                return line, bool(rest)
            if newline:
                heard, buf = True, bytearray(rest)
                continue
            left = (deadline if heard else first_by) - time.monotonic()
            if left <= 0:
                # The time is up, but what already came is read first: an
                # answer read late (after work done meanwhile) still counts.
                sock.setblocking(False)
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    raise TimeoutError from None
            else:
                sock.settimeout(left)
                chunk = sock.recv(65536)
            if not chunk:
                raise ExchangeFailed(CLOSED, closed=True)
            buf += chunk
            if len(buf) > max_reply:
                raise ExchangeFailed(TOO_LARGE)
    except (OSError, ValueError) as exc:  # TimeoutError is an OSError
        raise _failed(exc, ack, heard) from exc


# -- the `search` op (docs/daemon.md "Query path") -----------------------------


def search_request(message: Message) -> SearchRequest | None:
    """A `search` request's words and folder, or None when malformed."""
    argv, cwd = message.get("argv"), message.get("cwd")
    if not isinstance(argv, list) or not isinstance(cwd, str):
        return None
    words = [a for a in argv if isinstance(a, str)]
    return {"argv": words, "cwd": cwd} if len(words) == len(argv) else None


def barrier_request(message: Message) -> BarrierRequest | None:
    """A `barrier` request's fields, or None when one is of the wrong type.
    A missing field is None: the daemon's own plan and its default budget."""
    plan, config, timeout_ms = message.get("plan"), message.get("config"), message.get("timeout_ms")
    if plan is not None and not isinstance(plan, str):
        return None
    if isinstance(config, list):
        if not all(type(n) is int for n in config):
            return None
    elif config is not None and not isinstance(config, str):
        return None
    if timeout_ms is not None and type(timeout_ms) is not int:
        return None
    return {"plan": plan, "config": config, "timeout_ms": timeout_ms}


def search_answer(reply: Message, build: str) -> SearchAnswer | None:
    """What to print for a `search`, or None when the daemon declined, runs
    another build, or answered in another shape (never printed then)."""
    if reply.get("ok") is not True or reply.get("build") != build:
        return None
    out, err, code = reply.get("stdout"), reply.get("stderr"), reply.get("code")
    if not isinstance(out, str) or not isinstance(err, str) or type(code) is not int:
        return None
    result = reply.get("result")
    if result is not None and not _search_result(result):
        return None
    return {"stdout": out, "stderr": err, "code": code, "result": result}


def _search_result(value: object) -> TypeGuard[SearchResult]:
    """The shape of a SearchResult, checked to its first level (the client
    prints the text; whoever reads the data reads it as `--json`'s)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("results"), list)
        and type(value.get("total")) is int
        and isinstance(value.get("freshness"), dict)
        and isinstance(value.get("notes"), list)
        and all(isinstance(hit, dict) for hit in value["results"])
    )


# -- the `barrier` op (docs/daemon.md "Barrier protocol") ----------------------


def events_trusted(backend: str, degraded: str | None) -> bool:
    """The trust rule: only events from a native watcher (not the poll
    lane) that is not degraded keep an index fresh by themselves. The
    client labels an answer by it (ctindex/query/freshness.py `judge`) and
    the daemon declines to answer a query alone without it
    (ctindex/daemon/search_op.py)."""
    return backend != "poll" and not degraded


_BARRIER_FIELDS = (
    "generation",
    "instance",
    "lane",
    "backend",
    "backend_reason",
    "degraded",
    "reconciled",
    "reconcile_reason",
    "reconcile_ms",
    "barrier_ms",
    "identity",
    "outside",
    "plan",
)


class BarrierResult:
    """A barrier's successful answer: what the daemon sends (`to_wire`) and
    what a client reads (`from_reply`), over the socket or through a share
    (ctindex/client/share.py). A plain class, not a dataclass: this module
    is imported by every `ctindex` process."""

    __slots__ = _BARRIER_FIELDS

    def __init__(
        self,
        *,
        generation: int,
        instance: str,
        lane: str,
        backend: str,
        backend_reason: str | None,
        degraded: str | None,
        reconciled: bool,
        reconcile_reason: str | None,
        reconcile_ms: float | None,
        barrier_ms: float,
        identity: str = "",
        outside: str | None = None,
        plan: str = "",
    ) -> None:
        self.generation = generation
        self.instance = instance
        self.lane = lane
        self.backend = backend
        self.backend_reason = backend_reason
        self.degraded = degraded
        self.reconciled = reconciled  # the daemon ran a full pass to answer (overflow, audit, ...)
        self.reconcile_reason = reconcile_reason
        self.reconcile_ms = reconcile_ms
        self.barrier_ms = barrier_ms
        # The manifest identity of the generation vouched for: the reader opens
        # exactly that generation or one published on top of it (Vouched).
        self.identity = identity
        # Why the daemon rebuilt a store changed outside ctindex (reported once).
        self.outside = outside
        self.plan = plan  # the digest of the plan the daemon answered under

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BarrierResult):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _BARRIER_FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable fields: no hash

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in _BARRIER_FIELDS)
        return f"BarrierResult({fields})"

    @classmethod
    def from_reply(cls, reply: Message, barrier_ms: float) -> BarrierResult:
        """The answer as it arrived, with the barrier's time as the client
        measured it; raises ProtocolError (a ValueError) when malformed."""
        generation, instance = reply.get("generation"), reply.get("instance")
        lane, backend = reply.get("lane"), reply.get("backend")
        if type(generation) is not int:
            raise ProtocolError("barrier answer: generation is not a number")
        if not isinstance(instance, str) or not isinstance(lane, str):
            raise ProtocolError("barrier answer: no instance or lane")
        if not isinstance(backend, str):
            raise ProtocolError("barrier answer: no backend")
        return cls(
            generation=generation,
            instance=instance,
            lane=lane,
            backend=backend,
            backend_reason=_opt_str(reply.get("backend_reason")),
            degraded=_degraded(reply.get("degraded")),
            reconciled=bool(reply.get("reconciled")),
            reconcile_reason=_opt_str(reply.get("reconcile_reason")),
            reconcile_ms=_opt_float(reply.get("reconcile_ms")),
            barrier_ms=barrier_ms,
            identity=_opt_str(reply.get("identity")) or "",
            outside=_opt_str(reply.get("outside")),
            plan=_opt_str(reply.get("plan")) or "",
        )

    def to_wire(self) -> Message:
        """The answer line's fields, as the daemon sends them."""
        return {"ok": True, **{f: getattr(self, f) for f in _BARRIER_FIELDS}}


def _degraded(value: object) -> str | None:
    """Why the lane is degraded, or None: only an absent or null field reads as
    trusted; anything else that is not a reason is a malformed answer."""
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError("barrier answer: degraded is not a reason")


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _opt_float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
