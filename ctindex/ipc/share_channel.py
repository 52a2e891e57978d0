"""The files a share's host and its clients exchange (docs/network-shares.md).

A client on another host cannot reach the host daemon's socket; it writes
into `.ct/okf/barrier/` instead. This module is what both sides agree on:
the folder and file names, the fixed-size slot every request and answer
fills, the heartbeat record, and which requests the host takes at all. The
host (ctindex/daemon/share_barrier.py) and the client
(ctindex/client/share.py) import it; it imports only the standard library.

A request names an operation and nothing else the host would act on: no
path, no command, no option beyond the documented fields below. The host
refuses anything else (`parse_request`), so whoever can write into the
folder can make the host do only what `ctindex search`, `update` or
`rebuild` run on the host itself would do.

Requests and answers are exactly `slot_for(op)` bytes: a client whose mount
caches attributes may keep the request's size for the answer, and a read of
that cached size still returns the whole answer.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import string
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ctindex.base.jsontypes import JSONObject

FOLDER = "barrier"  # beneath the index folder: .ct/okf/barrier/
HEARTBEAT = "host.json"
REQUEST = ".req"  # a complete request (and, once answered, its answer)
WRITING = ".new"  # a request being written: the host ignores it
SLOT = 1024  # bytes of every barrier request and answer
# Bytes of every update or rebuild request, progress record and answer: the
# answer carries the whole report (counts, notes, missing scope roots).
WRITE_SLOT = 16384
HEARTBEAT_LIMIT = 4096
# The host beats every second: three beats and two seconds of clock
# difference between the hosts (sshfs already needs clocks within 2 s).
STALE_S = 5.0

# An update or rebuild asked through the share: the host takes the request
# within ACK_S (plus a few round trips) and rewrites it with a progress
# record every second (a beat counter that moves) until its answer; a run
# ends within WRITE_LIMIT_S, or the host stops it and answers an error.
ACK_S = STALE_S
BEAT_S = 1.0
WRITE_LIMIT_S = 3600.0
# Set (to any value but "") in a command's environment: `update` and
# `rebuild` on a share write over the share themselves, asking no share
# host (the host's own runs set it, so a run never asks its own daemon).
LOCAL_WRITES_ENV = "CTINDEX_SHARE_WRITE_HERE"

BARRIER = "barrier"
UPDATE = "update"
REBUILD = "rebuild"
WRITE_OPS = (UPDATE, REBUILD)
OPS = (BARRIER, *WRITE_OPS)
# While an update or rebuild asked through the share waits or runs, the host
# rewrites the request's file with this key (and no "ok") at every beat.
WORKING = "working"

# Fallback reasons (a query's freshness reason, an update's note begin with one).
NO_HOST = "no share host daemon"
STALE = "share host heartbeat stale"

TOKEN_MAX = 64
FIELD_MAX = 128
_HEX = frozenset(string.hexdigits)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class Request(NamedTuple):
    """A request as the host takes it: every field checked (`parse_request`)."""

    op: str  # one of OPS
    token: str  # hex, chosen by the client: the answer must repeat it
    plan: str | None  # the client's plan digest (None: the host's, for a barrier)
    timeout_ms: int | None  # a barrier's budget (clamped by the host)
    client: str  # the client's host name (logs only)
    build: str  # the client's ctindex build (an update needs the host's)


def slot_for(op: str) -> int:
    return WRITE_SLOT if op in WRITE_OPS else SLOT


def folder(index_dir: Path | str) -> Path:
    return Path(index_dir) / FOLDER


def read_slot(path: Path | str, limit: int = SLOT) -> bytes:
    """At most `limit` bytes of a regular file, never following a symlink
    and never blocking on a FIFO (a folder or device raises OSError). No
    fstat: through a share that is one more round trip on every poll."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def parse(data: bytes) -> JSONObject | None:
    """A slot's JSON object (padding stripped), or None."""
    try:
        doc: object = json.loads(data.decode("utf-8").strip())
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def pad(doc: Mapping[str, object], size: int = SLOT) -> bytes:
    """`doc` as JSON padded with spaces to `size` bytes; ValueError if larger."""
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=True).encode()
    if len(raw) > size - 1:
        raise ValueError(f"{len(raw)} bytes do not fit a {size}-byte slot")
    return raw + b" " * (size - 1 - len(raw)) + b"\n"


def parse_request(doc: JSONObject) -> Request | str:
    """The request `doc` holds, or why the host refuses it. Only the fields
    of `Request` may appear, each of its type and bounded length."""
    unknown = sorted(set(doc) - set(Request._fields))
    if unknown:
        return f"unknown field {unknown[0][:FIELD_MAX]!r}"
    op = doc.get("op")
    if op not in OPS:
        return f"unknown op {str(op)[:FIELD_MAX]!r}"
    token = doc.get("token")
    if not isinstance(token, str) or not 0 < len(token) <= TOKEN_MAX or not _HEX.issuperset(token):
        return "token missing or not hex"
    plan = doc.get("plan")
    if plan is not None and (not isinstance(plan, str) or len(plan) > FIELD_MAX):
        return "plan is not a digest"
    timeout = doc.get("timeout_ms")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)):
        return "timeout_ms is not an integer"
    client, build = doc.get("client", ""), doc.get("build", "")
    if not isinstance(client, str) or not isinstance(build, str):
        return "client or build is not a short string"
    if len(client) > FIELD_MAX or len(build) > FIELD_MAX:
        return "client or build is not a short string"
    digest = plan if isinstance(plan, str) else None
    budget = timeout if isinstance(timeout, int) else None
    return Request(str(op), token, digest, budget, client, build)


def heartbeat(index_dir: Path | str, now: float) -> tuple[JSONObject | None, str | None]:
    """The host's heartbeat record, or None and why nothing is asked."""
    path = folder(index_dir) / HEARTBEAT
    try:
        doc = parse(read_slot(path, HEARTBEAT_LIMIT))
    except FileNotFoundError:
        return None, f"{NO_HOST} (no heartbeat in {path.parent})"
    except OSError as exc:
        return None, f"{NO_HOST} ({path}: {exc.strerror or exc})"
    wall = _finite_time(doc.get("wall")) if doc is not None else None
    if doc is None or wall is None:
        return None, f"{NO_HOST} ({path}: not a heartbeat record)"
    named = doc.get("host")
    host = named if isinstance(named, str) else "?"
    age = now - wall
    clock = None
    if abs(age) > STALE_S:
        # Stale by this host's clock: by the share's too? A clock that
        # differs is named, and a host that beats on time by the share's
        # clock still serves (and is still the index's one writer).
        shared_now = share_clock(path.parent)
        if shared_now is not None and abs(now - shared_now) > CLOCK_SLACK_S:
            clock = clock_note(now - shared_now)
            age = shared_now - wall
    if age > STALE_S:
        by = f" by the share's clock; {clock}" if clock else ""
        return None, f"{STALE} ({host}, last beat {age:.0f} s ago{by})"
    if age < -STALE_S:  # a beat from the future proves nothing about now
        by = f" by the share's clock; {clock}" if clock else ""
        return None, f"{STALE} ({host}, last beat {-age:.0f} s in the future{by})"
    if clock is not None:
        doc = {**doc, CLOCK: clock}
    return doc, None


# Clocks further apart than this are named (sftp times have whole seconds).
CLOCK_SLACK_S = 2.0
CLOCK = "clock"  # the note a heartbeat read by a client with another clock carries
CLOCK_PROBE = ".clock-"


def clock_note(ahead_s: float) -> str:
    """`ahead_s` seconds of this host's clock over the share's, in words."""
    side = "ahead of" if ahead_s > 0 else "behind"
    return f"this host's clock is {abs(ahead_s):.0f} s {side} the share's"


def share_clock(folder: Path) -> float | None:
    """The share's clock now: the modification time the server gives a file
    created in `folder` (the server stamps a new file with its own clock),
    or None when nothing can be created there (a read-only client)."""
    path = folder / f"{CLOCK_PROBE}{os.getpid()}-{os.urandom(4).hex()}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        return os.fstat(fd).st_mtime
    except OSError:
        return None
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)


def _finite_time(wall: object) -> float | None:
    """A heartbeat's wall time: a finite number, else None (NaN or infinity
    would read as fresh forever; JSON's 1e400 parses as infinity)."""
    if isinstance(wall, bool) or not isinstance(wall, (int, float)):
        return None
    return float(wall) if math.isfinite(wall) else None


def hostname() -> str:
    """This host's name (os.uname: the `socket` module costs a query ~3 ms)."""
    uname = getattr(os, "uname", None)
    name = uname().nodename if uname is not None else os.environ.get("COMPUTERNAME", "")
    return name[:FIELD_MAX] or "host"


def request_name(token: str) -> str:
    """`<client-host>-<pid>-<random>`: unique across hosts sharing the folder."""
    host = "".join(c if c.isalnum() or c in "._" else "_" for c in hostname())
    return f"{host[:64]}-{os.getpid()}-{token}"
