"""A client on a network share asks the share's own host (docs/network-shares.md).

The host where the project's folder is local runs the ordinary daemon; it
also serves requests *through the share* (ctindex/daemon/share_barrier.py).
This module is the client's side of that exchange, files only, in the
format of ctindex/ipc/share_channel.py:

1. read the host's heartbeat, `.ct/okf/barrier/host.json` (absent, or older
   than STALE_S by this host's clock: no request at all, the caller walks
   or writes itself);
2. write a request (`<host>-<pid>-<random>.new`, O_CREAT|O_EXCL, then
   renamed to `.req`: the host is told of the name only once its content is
   complete) holding the op, the plan digest and a token, padded to its slot;
3. re-open and read that file (close-to-open consistency: every open asks
   the server) until the host has renamed its answer over it;
4. delete it, answered or not (Ctrl-C included).

`ask` is a query's barrier: answered within `share_barrier_ms` plus four
round trips (the heartbeat read measures one), or not at all. Its answer
is turned into the daemon's own BarrierResult, so ctindex/query/freshness.py
judges it like a local barrier and opens the generation it names only
through Vouched (plan digest and manifest identity).

`ask_write` is an `update` or `rebuild` run by the host's daemon: the host
takes the request within ACK_S, then rewrites the request's file with a
progress record (`working`, a beat counter) every second while the run
waits or works; the client waits while the counter moves, at most
WRITE_LIMIT_S (plus STALE_S) from when the record first says `running` —
the host's limit runs from the start of the run, which may follow a queued
wait for another — and gives up after STALE_S without a new beat.

Standard library only, imported by every query on a share.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ctindex.base.durable import WriteFailed, atomic_write
from ctindex.base.jsontypes import JSONObject
from ctindex.ipc.build_id import build_id
from ctindex.ipc.protocol import BarrierResult
from ctindex.ipc.share_channel import (
    ACK_S,
    BARRIER,
    CLOCK,
    REQUEST,
    STALE_S,
    WORKING,
    WRITE_LIMIT_S,
    WRITE_OPS,
    WRITING,
    folder,
    heartbeat,
    hostname,
    pad,
    parse,
    read_slot,
    request_name,
    slot_for,
)

DEFAULT_BUDGET_MS = 200  # share_barrier_ms's default (ctindex/policy/config.py)
ROUND_TRIPS = 4  # added to share_barrier_ms: the answer's own trip back
POLL_FIRST_S = 0.001
POLL_MAX_S = 0.02
WRITE_POLL_MAX_S = 0.1

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

NO_ANSWER = "share host did not answer"


class Answered(NamedTuple):
    """The host's answer, as the daemon's barrier result, and who gave it:
    the plan digest it vouches under and the build it runs."""

    host: str
    result: BarrierResult
    plan: str
    build: str
    clock: str | None = None  # this host's clock differs from the share's: how much


class NotAnswered(NamedTuple):
    reason: str  # begins with NO_HOST, STALE, NO_ANSWER or "share host"
    # The host whose heartbeat was fresh: its daemon serves the share and is
    # the index's one writer, so the caller must not write it (it answers from
    # the files, or says why not). None: no host serves; the caller may write.
    serving: str | None = None
    other_plan: bool = False  # the host runs another plan than the one asked under


class WriteAnswered(NamedTuple):
    """An update or rebuild the host's daemon ran: its report as `ctindex
    --json update` prints it, and the generation it vouches for."""

    host: str
    report: JSONObject
    plan: str
    identity: str
    elapsed_ms: float


def _budget(beat: JSONObject, budget_ms: int | None) -> int:
    if budget_ms is not None:
        return budget_ms
    told = beat.get("share_barrier_ms")
    if isinstance(told, int) and not isinstance(told, bool) and 10 <= told <= 10_000:
        return told
    return DEFAULT_BUDGET_MS


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
    bound = _budget(beat, budget_ms) / 1000 + ROUND_TRIPS * trip
    token = os.urandom(8).hex()
    doc = _request(BARRIER, token, plan_digest)
    doc["timeout_ms"] = int(bound * 1000)
    writing, req = _names(index_dir, token)
    sent = False
    try:  # from its first byte: an interrupt anywhere leaves no request behind
        failed = _send(writing, req, BARRIER, doc)
        if failed is not None:
            return failed._replace(serving=host)
        sent = True
        answer = _poll(req, token, started + bound)
    finally:
        # Answered or not (the host also collects old ones); the name being
        # written only when the rename may not have happened (a round trip).
        _remove(req, *(() if sent else (writing,)))
    elapsed_ms = round((time.monotonic() - started) * 1000, 3)
    if answer is None:
        return NotAnswered(f"{NO_ANSWER} in {elapsed_ms:.0f} ms ({host})", host)
    answered = _result(host, answer, plan_digest, elapsed_ms)
    clock = beat.get(CLOCK)
    if isinstance(answered, Answered) and isinstance(clock, str):
        return answered._replace(clock=clock)
    return answered


def host_status(index_dir: Path | str) -> JSONObject:
    """What a client's `status` says of the share's host: whether one serves
    (its heartbeat fresh), who, since when, its barrier median; or why none."""
    now = time.time()
    beat, why = heartbeat(index_dir, now)
    if beat is None:
        return {"serving": False, "reason": why}
    wall = beat.get("wall")
    clock = beat.get(CLOCK)
    out: JSONObject = {
        "serving": True,
        "host": str(beat.get("host", "?")),
        "pid": beat.get("pid") if isinstance(beat.get("pid"), int) else None,
        "build": beat.get("build") if isinstance(beat.get("build"), str) else None,
        # By this host's clock, unless it differs from the share's (then `clock`).
        "heartbeat_age_s": round(now - wall, 3)
        if isinstance(wall, (int, float)) and clock is None
        else None,
        "barrier_p50_ms": beat.get("barrier_p50_ms")
        if isinstance(beat.get("barrier_p50_ms"), (int, float))
        else None,
        "clock": clock if isinstance(clock, str) else None,
    }
    return out


def ask_write(index_dir: Path | str, op: str, plan_digest: str) -> WriteAnswered | NotAnswered:
    """`op` ("update" or "rebuild") run by the share host's daemon under its
    local lock. Never raises for I/O; bounded as the module docstring says.
    Ctrl-C removes the request: a run not started yet never starts, one
    under way finishes on the host (its publish is atomic either way)."""
    assert op in WRITE_OPS
    started = time.monotonic()
    beat, why = heartbeat(index_dir, time.time())
    if beat is None:
        assert why is not None
        return NotAnswered(why)
    trip = time.monotonic() - started
    host = str(beat.get("host", "?"))
    token = os.urandom(8).hex()
    writing, req = _names(index_dir, token)
    sent = False
    try:  # Ctrl-C anywhere from here removes the request
        failed = _send(writing, req, op, _request(op, token, plan_digest))
        if failed is not None:
            return failed._replace(serving=host)
        sent = True
        answer, why = _wait_write(req, token, started, started + ACK_S + ROUND_TRIPS * trip)
    finally:
        _remove(req, *(() if sent else (writing,)))
    elapsed_ms = round((time.monotonic() - started) * 1000, 3)
    if answer is None:
        # A host that stopped beating (killed mid-run) no longer serves: its
        # heartbeat has aged by now. One still beating does, however silent.
        alive, _why = heartbeat(index_dir, time.time())
        return NotAnswered(
            f"{NO_ANSWER} {why} after {elapsed_ms:.0f} ms ({host})",
            host if alive is not None else None,
        )
    named = answer.get("host")
    host = named if isinstance(named, str) else host
    if answer.get("ok") is not True:
        error = answer.get("error")
        return NotAnswered(
            f"share host: {error if isinstance(error, str) else 'error'} ({host})", host
        )
    report, plan, identity = answer.get("report"), answer.get("plan"), answer.get("identity")
    if not isinstance(report, dict) or not isinstance(plan, str) or not isinstance(identity, str):
        return NotAnswered(f"share host: malformed answer ({host})", host)
    return WriteAnswered(host, report, plan, identity, elapsed_ms)


def _request(op: str, token: str, plan_digest: str | None) -> dict[str, object]:
    return {
        "op": op,
        "plan": plan_digest,
        "token": token,
        "client": hostname(),
        "build": build_id(),
    }


def _names(index_dir: Path | str, token: str) -> tuple[Path, Path]:
    """The request's name while written, and once complete."""
    base = folder(index_dir) / request_name(token)
    return base.with_name(base.name + WRITING), base.with_name(base.name + REQUEST)


def _send(writing: Path, req: Path, op: str, doc: Mapping[str, object]) -> NotAnswered | None:
    try:
        _write_request(writing, req, pad(doc, slot_for(op)))
    except OSError as exc:
        return NotAnswered(f"share host: cannot write a request: {exc.strerror or exc}")
    return None


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _write_request(writing: Path, req: Path, data: bytes) -> None:
    """The request under its `writing` name (the host skips those), then
    renamed to `req`. Not synced: a request outlives no crash of ours."""
    try:
        atomic_write(req, data, sync=False, mode=0o666, tmp_name=writing.name)
    except WriteFailed as exc:
        raise exc.as_os_error() from exc


def _read(req: Path, limit: int) -> JSONObject | bool | None:
    """The file's object; None when it holds none yet; False when it is gone
    (the host collected it: a flood, an old request) or not a file."""
    try:
        return parse(read_slot(req, limit))
    except OSError as exc:
        return None if exc.errno == errno.EINTR else False


def _poll(req: Path, token: str, deadline: float) -> JSONObject | None:
    """Re-open and read `req` until it holds the host's answer to `token`."""
    wait = POLL_FIRST_S
    while True:
        doc = _read(req, slot_for(BARRIER))
        if doc is False:
            return None
        if isinstance(doc, dict) and "ok" in doc and doc.get("token") == token:
            return doc
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(wait, left))
        wait = min(wait * 2, POLL_MAX_S)


def _wait_write(
    req: Path, token: str, started: float, ack_by: float
) -> tuple[JSONObject | None, str]:
    """Poll an update's request: its answer, or None and why the wait ended.
    The run's bound restarts once, when its record first says `running`."""
    wait = POLL_FIRST_S
    last_beat: object = None
    seen_running = False
    alive_until = ack_by  # before the first progress record: the ack bound
    while True:
        doc = _read(req, slot_for(WRITE_OPS[0]))
        now = time.monotonic()
        if doc is False:
            return None, "(its request was removed)"
        if isinstance(doc, dict) and doc.get("token") == token:
            if "ok" in doc:
                return doc, ""
            if WORKING in doc and doc.get("beat") != last_beat:
                last_beat = doc.get("beat")
                alive_until = now + STALE_S
            if doc.get(WORKING) == "running" and not seen_running:
                seen_running, started = True, now  # the host's limit starts about now
        if now - started > WRITE_LIMIT_S + STALE_S:  # the host stops its run first
            return None, f"within {WRITE_LIMIT_S:.0f} s"
        if now > alive_until:
            return None, "(no sign of life)" if last_beat is not None else "(not taken)"
        time.sleep(min(wait, max(0.0, alive_until - now)))
        wait = min(wait * 2, WRITE_POLL_MAX_S)


def _result(
    host: str, answer: JSONObject, plan_digest: str | None, elapsed_ms: float
) -> Answered | NotAnswered:
    named = answer.get("host")
    host = named if isinstance(named, str) else host
    if answer.get("ok") is not True:
        error = answer.get("error")
        return NotAnswered(
            f"share host: {error if isinstance(error, str) else 'error'} ({host})", host
        )
    plan = answer.get("plan")
    if not isinstance(plan, str) or (plan_digest is not None and plan != plan_digest):
        return NotAnswered(f"share host has a different plan ({host})", host, other_plan=True)
    reply: dict[str, object] = dict(answer)  # the protocol's message type
    try:
        result = BarrierResult.from_reply(reply, elapsed_ms)
    except (KeyError, TypeError, ValueError):
        return NotAnswered(f"share host: malformed answer ({host})", host)
    if not result.identity:
        return NotAnswered(f"share host: answer names no manifest identity ({host})", host)
    build = answer.get("build")
    return Answered(str(host), result, plan, build if isinstance(build, str) else "")
