"""The daemon's messages, as a client sends them: IPC, spawn and control.

What an answer means for a query (watcher-clean, reconcile, fallback) is
not decided here: ctindex/query/freshness.py owns that. This module carries the
exchanges and reports their outcome as facts (BarrierResult) or as a
failure with its reason (BarrierFailed).

It is on every indexed query, so it imports only the standard library at
module level (no portalocker, no psutil). The contract:

* A barrier is a bounded exchange over the daemon's Unix socket: connect
  (CONNECT_TIMEOUT_S) and the whole exchange (plan.settings.barrier_timeout_ms)
  are both capped. Any failure is a BarrierFailed; the caller reconciles.
* A spawn happens only after the runtime folder and the claim proved
  writable, and never while a cached spawn failure is in its back-off
  window (the caller asks only when no daemon answers at all, at most once
  per command). The query never waits for the daemon it started.
* Control: `stop`, `watcher_status`, `ping`.
"""

from __future__ import annotations

# The C socket type itself: the `socket` module wraps it in enums and imports
# selectors, ~3 ms a search would pay for nothing (the type, its methods and
# exceptions are the same).
import _socket
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ctindex import runtime as rt
from ctindex import unanswered
from ctindex.base.statefile import open_regular, read_bounded

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project

CONNECT_TIMEOUT_S = 0.1
CLAIM_STALE_S = 10.0
MAX_REPLY = 1 << 20
LOCK_RECORD_LIMIT = 4096  # the lock file holds "pid instance"

# Failure reasons (shown in freshness.reason and `watch status`).
NO_DAEMON = "no daemon"
BARRIER_TIMEOUT = "barrier timeout"
DAEMON_BUSY = "daemon busy"
SPAWN_CACHED = "spawn failure cached"
WRONG_OWNER = "daemon socket owned by another user"
PLAN_MISMATCH = "daemon has a different plan"
# The daemon runs other code than this client (an upgrade, an edited editable
# install): it exits after saying so, and this command starts its successor.
BUILD_MISMATCH = "daemon was a different build"
RETIRE_TIMEOUT_S = 0.2  # asking a daemon of an older build (no build check) to stop
STARTING = "daemon starting"  # spawn() outcome: another launcher holds the claim
NOTHING_TO_INDEX = "no scopes: nothing to index, no daemon started"


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


def _token() -> str:
    return os.urandom(8).hex()  # identity, not a secret: `secrets` would cost imports


class BarrierResult(NamedTuple):
    generation: int
    instance: str
    lane: str
    backend: str
    backend_reason: str | None
    degraded: str | None
    reconciled: bool  # the daemon ran a full pass to answer (overflow, audit, ...)
    reconcile_reason: str | None
    reconcile_ms: float | None
    barrier_ms: float
    # The manifest identity of the generation vouched for: the reader opens
    # exactly that generation or one published on top of it (Vouched).
    identity: str = ""
    # Why the daemon rebuilt a store changed outside ctindex (reported once).
    outside: str | None = None

    @classmethod
    def from_reply(cls, reply: dict[str, Any], barrier_ms: float) -> BarrierResult:
        """A barrier's answer as the daemon sends it, over its socket or
        through a share (ctindex/share_client.py); raises KeyError,
        TypeError or ValueError when it is malformed."""
        return cls(
            generation=int(reply["generation"]),
            instance=str(reply["instance"]),
            lane=str(reply["lane"]),
            backend=str(reply["backend"]),
            backend_reason=_opt_str(reply.get("backend_reason")),
            degraded=_opt_str(reply.get("degraded")),
            reconciled=bool(reply.get("reconciled")),
            reconcile_reason=_opt_str(reply.get("reconcile_reason")),
            reconcile_ms=_opt_float(reply.get("reconcile_ms")),
            barrier_ms=barrier_ms,
            identity=_opt_str(reply.get("identity")) or "",
            outside=_opt_str(reply.get("outside")),
        )


# -- IPC -------------------------------------------------------------------------


def request(
    paths: rt.RuntimePaths, payload: dict[str, Any], timeout: float, *, ack: bool = False
) -> dict[str, Any]:
    """One request/answer exchange; raises BarrierFailed with a reason.
    Every request carries this process's build id (the daemon serves queries
    of its own build only). With `ack`, the daemon's ACK line must come
    within unanswered.ACK_WAIT_S: a daemon that sends none is stopped or
    wedged, remembered as such (ctindex/unanswered.py), and skipped by the
    next requests with `ack` until it shows life again."""
    disabled = rt.no_peer_check()
    if disabled is not None:  # no daemon may be trusted here: never started, never asked
        raise BarrierFailed(disabled)
    if ack:
        skipped = unanswered.skipped(paths)
        if skipped is not None:
            raise BarrierFailed(skipped)
    payload = {**payload, "build": rt.build_id(), **({"ack": True} if ack else {})}
    started = time.monotonic()
    deadline = started + timeout
    # Until the ACK (or an answer) arrives, wait no longer than ACK_WAIT_S.
    first_by = started + min(unanswered.ACK_WAIT_S, timeout) if ack else deadline
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(min(CONNECT_TIMEOUT_S, timeout))
        try:
            sock.connect(os.fspath(paths.socket))
        except (FileNotFoundError, NotADirectoryError, ConnectionRefusedError) as exc:
            raise BarrierFailed(NO_DAEMON, spawnable=True) from exc
        except (TimeoutError, BlockingIOError) as exc:  # backlog full: a daemon exists, stuck
            if ack:
                raise BarrierFailed(unanswered.strike(paths)) from exc
            raise BarrierFailed(DAEMON_BUSY) from exc
        except OSError as exc:
            raise BarrierFailed(f"cannot connect: {exc.strerror or exc}") from exc
        if not rt.peer_is_owner(sock):
            raise BarrierFailed(WRONG_OWNER)
        data = (json.dumps(payload, separators=(",", ":")) + "\n").encode()
        buf = bytearray()
        heard = False  # an ACK or an answer came: the daemon's loop is alive
        try:
            sock.settimeout(max(first_by - time.monotonic(), 0.001))
            sock.sendall(data)
            while True:
                line, newline, rest = buf.partition(b"\n")
                if newline and not (ack and line == unanswered.ACK_LINE):
                    break
                if newline:
                    heard, buf = True, bytearray(rest)
                    continue
                left = (deadline if heard else first_by) - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    raise BarrierFailed("daemon closed the connection")
                buf += chunk
                if len(buf) > MAX_REPLY:
                    raise BarrierFailed("daemon error: reply too large")
        except TimeoutError as exc:
            if ack and not heard:
                raise BarrierFailed(unanswered.strike(paths)) from exc
            raise BarrierFailed(BARRIER_TIMEOUT) from exc
        except OSError as exc:
            raise BarrierFailed(f"daemon connection failed: {exc.strerror or exc}") from exc
    finally:
        sock.close()
    if ack:
        unanswered.clear(paths)
    try:
        reply = json.loads(buf.partition(b"\n")[0])
    except ValueError as exc:
        raise BarrierFailed("daemon error: malformed reply") from exc
    if not isinstance(reply, dict):
        raise BarrierFailed("daemon error: malformed reply")
    return reply


def ping(paths: rt.RuntimePaths, timeout: float = 0.5) -> bool:
    """True when a daemon of this build answers on the project's socket (no
    barrier, no spawn). A daemon of another build is told to leave: False."""
    try:
        reply = request(paths, {"op": "ping"}, timeout)
        _check_build(paths, reply)
    except BarrierFailed:
        return False
    return reply.get("ok") is True


def _check_build(paths: rt.RuntimePaths, reply: dict[str, Any]) -> None:
    """Raise BarrierFailed(BUILD_MISMATCH) when `reply` came from another build.
    A daemon that checks builds has already begun to exit (`retiring`); one
    that predates the check answers with no build, and is asked to stop."""
    if reply.get("build") == rt.build_id():
        return
    if reply.get("retiring") is not True:
        with contextlib.suppress(BarrierFailed):
            request(paths, {"op": "stop"}, RETIRE_TIMEOUT_S)
    raise BarrierFailed(BUILD_MISMATCH, spawnable=True)


def barrier(
    paths: rt.RuntimePaths, plan_digest: str, timeout_ms: int, config: list[int] | str | None = None
) -> BarrierResult:
    """Ask the daemon to prove it has applied every event queued before now.
    `config`: the config file's stat as the client saw it (the daemon reloads
    its plan first when its own differs)."""
    started = time.monotonic()
    token = _token()
    payload: dict[str, Any] = {
        "op": "barrier",
        "token": token,
        "plan": plan_digest,
        "timeout_ms": timeout_ms,
    }
    if config is not None:
        payload["config"] = config
    reply = request(paths, payload, timeout_ms / 1000, ack=True)
    _check_build(paths, reply)
    if reply.get("ok") is not True:
        error = reply.get("error")
        raise BarrierFailed(f"daemon: {error}" if isinstance(error, str) else "daemon error")
    if reply.get("plan") != plan_digest:
        raise BarrierFailed(PLAN_MISMATCH)
    try:
        return BarrierResult.from_reply(reply, round((time.monotonic() - started) * 1000, 3))
    except (KeyError, TypeError, ValueError) as exc:
        raise BarrierFailed("daemon error: malformed reply") from exc


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# -- spawn ------------------------------------------------------------------------


def spawn(
    project_root: Path,
    paths: rt.RuntimePaths,
    *,
    ignore_cache: bool = False,
    successor: bool = False,
) -> str | None:
    """Start a daemon unless that is known to fail or already under way.

    `successor`: a daemon of another build is leaving; the new one waits
    briefly for its lock instead of giving up at once (docs/daemon.md).

    Returns None when a daemon was launched, else why not (a freshness
    reason). Every failure to persist the runtime folder or the claim is
    cached so the next commands do not try again within the back-off window.
    """
    if _nothing_to_index(project_root):
        return NOTHING_TO_INDEX  # checked before the runtime folder is made: nothing written
    disabled = rt.no_peer_check()
    if disabled is not None:
        return disabled
    failure = None if ignore_cache else rt.spawn_failure(paths)
    if failure is not None:
        error = failure.get("error")
        if isinstance(error, str) and error.startswith(rt.STOPPED_PREFIX):
            return error  # e.g. "daemon stopped: memory-limit", backed off like a failure
        return SPAWN_CACHED
    try:
        rt.ensure_runtime_dir(paths)
    except OSError as exc:
        return _failed(paths, f"runtime folder {paths.dir}: {exc.strerror or exc}")
    token = _token()
    claimed = _claim(paths, token)
    if claimed is not None:
        return claimed
    import subprocess  # only a launching client pays this import

    from ctindex.detach import detach_options

    detach = detach_options()  # a new session, or Windows' no-window process group
    try:
        subprocess.Popen(  # fixed argv, no shell
            [
                sys.executable,
                "-m",
                "ctindex.daemon",
                "--project",
                os.fspath(project_root),
                "--claim",
                token,
                *(["--successor"] if successor else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=detach.start_new_session,
            creationflags=detach.creationflags,
            close_fds=True,
            cwd="/",
        )
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(paths.claim)
        return _failed(paths, f"spawn: {exc.strerror or exc}")
    return None


def _nothing_to_index(project_root: Path) -> bool:
    """True when the project's plan has no scope: a daemon would watch
    nothing for `idle_seconds` (docs/cli.md, "No scopes"). Loaded again
    here, on the rare spawn path only, so every caller gets the rule."""
    from ctindex.errors import PolicyError
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    try:
        return not load_plan(Project.at(project_root)).scopes
    except PolicyError:
        return False  # the caller already met (or will meet) the error itself


def _claim(paths: rt.RuntimePaths, token: str) -> str | None:
    """Create the startup claim atomically (O_EXCL); None when we hold it."""
    record = json.dumps({"token": token, "time": time.time(), "pid": os.getpid()}).encode()
    for _attempt in range(2):
        try:
            fd = os.open(paths.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            if not _claim_stale(paths.claim):
                return STARTING
            with contextlib.suppress(FileNotFoundError):
                os.unlink(paths.claim)  # launcher died before its daemon took the lock
            continue
        except OSError as exc:
            return _failed(paths, f"claim {paths.claim}: {exc.strerror or exc}")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(record)
        except OSError as exc:  # ENOSPC, EIO: the claim is not persisted
            with contextlib.suppress(OSError):
                os.unlink(paths.claim)
            return _failed(paths, f"claim {paths.claim}: {exc.strerror or exc}")
        return None
    return STARTING


def _claim_stale(path: Path) -> bool:
    try:
        age = time.time() - os.lstat(path).st_mtime
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return age > CLAIM_STALE_S or age < -CLAIM_STALE_S  # future mtime: clock moved back


def _failed(paths: rt.RuntimePaths, error: str) -> str:
    rt.record_spawn_failure(paths, error)
    return f"spawn failed: {error}"


# -- status (for `status` and `watch status`) --------------------------------------


def lock_held(paths: rt.RuntimePaths) -> bool:
    """True while some process holds the daemon lock (the only proof of life)."""
    import portalocker

    try:
        # Not a plain open(): a FIFO in the lock's place would block it forever.
        fh = os.fdopen(open_regular(paths.lock), encoding="utf-8")
    except OSError:
        return False
    try:
        portalocker.lock(fh, portalocker.LOCK_SH | portalocker.LOCK_NB)
    except portalocker.exceptions.LockException:
        return True
    finally:
        fh.close()  # closing drops our probe lock, if we got it
    return False


# Fields of the daemon's status record that `status` / `watch status` expose.
STATUS_FIELDS = (
    "pid",
    "instance",
    "started",
    "generation",
    "backend",
    "backend_reason",
    "degraded",
    "dirty_paths",
    "rescan_reason",
    "pending",
    "last_batch",
    "last_reconcile",
    "reconciles",
    "entries_visited_total",
    "batches",
    "barriers",
    "barrier_failures",
    "build_in_progress",
    "refused_peers",
    "last_error",
    "rss_bytes",
    "physical_memory_bytes",
    "memory_ceiling_bytes",
    "stop_reason",
    "stopped",
    "unannounced",
    "build",
)


def watcher_status(
    project: Project, plan: Plan | None = None, timeout: float = 0.5
) -> dict[str, Any]:
    """Watcher facts of spec §10 for `status` and `watch status` (stable keys).

    Live from the daemon when it answers; else the last record on disk with
    lane `unavailable` (or the recorded lane with `responsive: false` while a
    process still holds the lock). `plan`, when given, supplies the memory
    ceiling and watch setting if no daemon runs.
    """
    paths = rt.RuntimePaths.for_project(project)
    record: dict[str, Any] = {}
    responsive = False
    try:
        reply = request(paths, {"op": "status"}, timeout)
        if reply.get("ok") is True and isinstance(reply.get("status"), dict):
            record, responsive = reply["status"], True
    except BarrierFailed:
        pass
    running = responsive or lock_held(paths)
    if not responsive:
        record = rt.read_json(paths.status) or {}
    doc: dict[str, Any] = {key: record.get(key) for key in STATUS_FIELDS}
    lane = record.get("lane") if running else "unavailable"
    doc["lane"] = lane if isinstance(lane, str) else "unavailable"
    doc["running"] = running
    doc["responsive"] = responsive
    heartbeat = record.get("heartbeat")
    doc["last_heartbeat"] = heartbeat.get("wall") if isinstance(heartbeat, dict) else None
    doc["spawn_failure"] = rt.spawn_failure(paths)
    doc["socket"] = os.fspath(paths.socket)
    doc["runtime_dir"] = os.fspath(paths.dir)
    if plan is not None:
        doc["watch"] = bool(plan.settings.watch)
        if doc["memory_ceiling_bytes"] is None or not running:
            doc["memory_ceiling_bytes"] = plan.settings.max_daemon_memory_bytes
    if doc["physical_memory_bytes"] is None:
        import psutil

        doc["physical_memory_bytes"] = int(psutil.virtual_memory().total)
    if not running:
        doc["rss_bytes"] = None
    return doc


def stop(project: Project, wait: float = 5.0) -> dict[str, Any]:
    """Ask the daemon to stop over the socket; if it does not answer but the
    lock is held, SIGTERM the holder after proving its identity (pid, start
    time and instance token of the status record, see _verified_pid)."""
    paths = rt.RuntimePaths.for_project(project)
    how = "not running"
    try:
        reply = request(paths, {"op": "stop"}, 1.0)
        if reply.get("ok") is True:
            how = "stop request"
    except BarrierFailed:
        pass
    if how == "not running" and lock_held(paths):
        pid = _verified_pid(paths)
        if pid is not None:
            import signal  # only `stop` needs it

            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                how = "SIGTERM"
        else:
            how = "unidentified lock holder"
    deadline = time.monotonic() + wait
    while lock_held(paths) and time.monotonic() < deadline:
        time.sleep(0.02)
    stopped = not lock_held(paths)
    return {"stopped": stopped, "how": how}


def _verified_pid(paths: rt.RuntimePaths) -> int | None:
    """The pid from status.json, only if that process started when the record
    says and its lock file names the same instance token."""
    import psutil

    status = rt.read_json(paths.status) or {}
    pid, started, instance = status.get("pid"), status.get("started"), status.get("instance")
    if not isinstance(pid, int) or not isinstance(started, (int, float)):
        return None
    try:
        created = psutil.Process(pid).create_time()
        holder = read_bounded(paths.lock, LOCK_RECORD_LIMIT).decode("utf-8", "replace").split()
    except (psutil.Error, OSError):
        return None
    if abs(created - started) > 2.0 or holder[1:2] != [instance]:
        return None
    return pid


__all__ = [
    "BarrierFailed",
    "BarrierResult",
    "barrier",
    "ping",
    "request",
    "spawn",
    "stop",
    "watcher_status",
]
