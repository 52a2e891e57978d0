"""A query on a network share asks the share's own host (docs/network-shares.md).

The host where the project's folder is local runs the ordinary daemon; it
also serves a barrier *through the share* (ctindex/daemon/share_barrier.py).
This module is the client's side of that exchange, files only:

1. read the host's heartbeat, `.ct/okf/barrier/host.json` (absent, or older
   than STALE_S by this host's clock: no cookie at all, the caller walks);
2. write a request (`<host>-<pid>-<random>.new`, O_CREAT|O_EXCL, then
   renamed to `.req`: the host is told of the name only once its content is
   complete) holding the plan digest and a token, padded to SLOT bytes;
3. re-open and read that file (close-to-open consistency: every open asks
   the server) until the host has renamed its answer over it, at most
   `share_barrier_ms` plus four round trips (the heartbeat read measures
   one);
4. delete it, answered or not.

The answer is turned into the daemon's own BarrierResult, so
ctindex/query/freshness.py judges it like a local barrier and opens the generation
it names only through Vouched (plan digest and manifest identity).

Requests and answers are exactly SLOT bytes: a client whose mount caches
attributes may keep the request's size for the answer, and a read of a
cached size then still returns the whole answer.

Standard library only, imported by every query on a share.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

from ctindex.base.durable import WriteFailed, atomic_write
from ctindex.ipc.build_id import build_id
from ctindex.ipc.protocol import BarrierResult

FOLDER = "barrier"  # beneath the index folder: .ct/okf/barrier/
HEARTBEAT = "host.json"
REQUEST = ".req"  # a complete request (and, once answered, its answer)
WRITING = ".new"  # a request being written: the host ignores it
SLOT = 1024  # bytes of every request and answer
HEARTBEAT_LIMIT = 4096
# The host beats every second: three beats and two seconds of clock
# difference between the hosts (sshfs already needs clocks within 2 s).
STALE_S = 5.0
DEFAULT_BUDGET_MS = 200  # share_barrier_ms's default (ctindex/policy/config.py)
ROUND_TRIPS = 4  # added to share_barrier_ms: the answer's own trip back
POLL_FIRST_S = 0.001
POLL_MAX_S = 0.02

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

# Fallback reasons (the freshness statement's reason begins with one).
NO_HOST = "no share host daemon"
STALE = "share host heartbeat stale"
NO_ANSWER = "share host did not answer"


class Answered(NamedTuple):
    """The host's answer, as the daemon's barrier result, and who gave it:
    the plan digest it vouches under and the build it runs."""

    host: str
    result: BarrierResult
    plan: str
    build: str


class NotAnswered(NamedTuple):
    reason: str  # begins with NO_HOST, STALE, NO_ANSWER or "share host: "


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


def parse(data: bytes) -> dict[str, Any] | None:
    """A slot's JSON object (padding stripped), or None."""
    try:
        doc = json.loads(data.decode("utf-8").strip())
    except (UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def pad(doc: dict[str, Any]) -> bytes:
    """`doc` as JSON padded with spaces to SLOT bytes; ValueError if larger."""
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=True).encode()
    if len(raw) > SLOT - 1:
        raise ValueError(f"{len(raw)} bytes do not fit a {SLOT}-byte slot")
    return raw + b" " * (SLOT - 1 - len(raw)) + b"\n"


def heartbeat(index_dir: Path | str, now: float) -> tuple[dict[str, Any] | None, str | None]:
    """The host's heartbeat record, or None and why the cookie is skipped."""
    path = folder(index_dir) / HEARTBEAT
    try:
        doc = parse(read_slot(path, HEARTBEAT_LIMIT))
    except FileNotFoundError:
        return None, f"{NO_HOST} (no heartbeat in {path.parent})"
    except OSError as exc:
        return None, f"{NO_HOST} ({path}: {exc.strerror or exc})"
    if doc is None or not isinstance(doc.get("wall"), (int, float)):
        return None, f"{NO_HOST} ({path}: not a heartbeat record)"
    host = doc.get("host") if isinstance(doc.get("host"), str) else "?"
    age = now - float(doc["wall"])
    if age > STALE_S:
        return None, f"{STALE} ({host}, last beat {age:.0f} s ago)"
    return doc, None


def hostname() -> str:
    """This host's name (os.uname: the `socket` module costs a query ~3 ms)."""
    uname = getattr(os, "uname", None)
    name = uname().nodename if uname is not None else os.environ.get("COMPUTERNAME", "")
    return name[:128] or "host"


def request_name(token: str) -> str:
    """`<client-host>-<pid>-<random>`: unique across hosts sharing the folder."""
    host = "".join(c if c.isalnum() or c in "._" else "_" for c in hostname())
    return f"{host[:64]}-{os.getpid()}-{token}"


def ask(
    index_dir: Path | str, plan_digest: str | None, budget_ms: int | None = None
) -> Answered | NotAnswered:
    """One barrier through the share (see the module docstring); never raises
    for I/O and never waits past the bound. `plan_digest` None: whatever
    plan the host answers under (the caller checks it); `budget_ms` None:
    the share_barrier_ms the host's heartbeat names."""
    started = time.monotonic()
    beat, why = heartbeat(index_dir, time.time())
    if beat is None:
        assert why is not None
        return NotAnswered(why)
    trip = time.monotonic() - started  # one open and read through the mount
    host = str(beat.get("host", "?"))
    if budget_ms is None:
        told = beat.get("share_barrier_ms")
        ok = isinstance(told, int) and not isinstance(told, bool) and 10 <= told <= 10_000
        budget_ms = told if ok and isinstance(told, int) else DEFAULT_BUDGET_MS
    bound = budget_ms / 1000 + ROUND_TRIPS * trip
    token = os.urandom(8).hex()
    base = folder(index_dir) / request_name(token)
    req = base.with_name(base.name + REQUEST)
    doc = {
        "op": "barrier",
        "plan": plan_digest,
        "token": token,
        "timeout_ms": int(bound * 1000),
        "client": hostname(),
        "build": build_id(),
    }
    try:
        _write_request(base.with_name(base.name + WRITING), req, pad(doc))
    except OSError as exc:
        return NotAnswered(f"share host: cannot write a request: {exc.strerror or exc}")
    try:
        answer = _poll(req, token, started + bound)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(req)  # answered or not: the host also collects old ones
    elapsed_ms = round((time.monotonic() - started) * 1000, 3)
    if answer is None:
        return NotAnswered(f"{NO_ANSWER} in {elapsed_ms:.0f} ms ({host})")
    return _result(host, answer, plan_digest, elapsed_ms)


def _write_request(writing: Path, req: Path, data: bytes) -> None:
    """The request under its `writing` name (the host skips those), then
    renamed to `req`. Not synced: a request outlives no crash of ours."""
    try:
        atomic_write(req, data, sync=False, mode=0o666, tmp_name=writing.name)
    except WriteFailed as exc:
        raise exc.as_os_error() from exc


def _poll(req: Path, token: str, deadline: float) -> dict[str, Any] | None:
    """Re-open and read `req` until it holds the host's answer to `token`."""
    wait = POLL_FIRST_S
    while True:
        try:
            doc = parse(read_slot(req))
        except OSError as exc:
            # Gone: the host collected it (a flood, an old request). Anything
            # else (a folder put in its place): nothing to wait for either.
            if exc.errno != errno.EINTR:
                return None
            doc = None
        if doc is not None and "ok" in doc and doc.get("token") == token:
            return doc
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(wait, left))
        wait = min(wait * 2, POLL_MAX_S)


def _result(
    host: str, answer: dict[str, Any], plan_digest: str | None, elapsed_ms: float
) -> Answered | NotAnswered:
    named = answer.get("host")
    host = named if isinstance(named, str) else host
    if answer.get("ok") is not True:
        error = answer.get("error")
        return NotAnswered(f"share host: {error if isinstance(error, str) else 'error'} ({host})")
    plan = answer.get("plan")
    if not isinstance(plan, str) or (plan_digest is not None and plan != plan_digest):
        return NotAnswered(f"share host has a different plan ({host})")
    try:
        result = BarrierResult.from_reply(answer, elapsed_ms)
    except (KeyError, TypeError, ValueError):
        return NotAnswered(f"share host: malformed answer ({host})")
    if not result.identity:
        return NotAnswered(f"share host: answer names no manifest identity ({host})")
    build = answer.get("build")
    return Answered(str(host), result, plan, build if isinstance(build, str) else "")
