"""Controlling the project's daemon: is it alive, what does it report, stop it
(`ctindex status`, `ctindex watch status|stop`)."""

from __future__ import annotations

import os
import time

from ctindex.base.statefile import open_regular, read_bounded
from ctindex.client.daemon_requests import BarrierFailed, request
from ctindex.ipc.records import read_record
from ctindex.ipc.runtime_dir import RuntimePaths
from ctindex.ipc.spawn_failure import spawn_failure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ctindex.ipc.protocol import Message
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project

LOCK_RECORD_LIMIT = 4096  # the lock file holds "pid instance"


def lock_held(paths: RuntimePaths) -> bool:
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


def watcher_status(project: Project, plan: Plan | None = None, timeout: float = 0.5) -> Message:
    """Watcher facts for `status` and `watch status` (stable keys).

    Live from the daemon when it answers; else the last record on disk with
    lane `unavailable` (or the recorded lane with `responsive: false` while a
    process still holds the lock). `plan`, when given, supplies the memory
    ceiling and watch setting if no daemon runs.
    """
    paths = RuntimePaths.for_project(project)
    record: Message = {}
    responsive = False
    try:
        reply = request(paths, {"op": "status"}, timeout)
        status = reply.get("status")
        if reply.get("ok") is True and isinstance(status, dict):
            record, responsive = status, True
    except BarrierFailed:
        pass
    running = responsive or lock_held(paths)
    if not responsive:
        record = read_record(paths.status) or {}
    doc: Message = {key: record.get(key) for key in STATUS_FIELDS}
    lane = record.get("lane") if running else "unavailable"
    doc["lane"] = lane if isinstance(lane, str) else "unavailable"
    doc["running"] = running
    doc["responsive"] = responsive
    heartbeat = record.get("heartbeat")
    doc["last_heartbeat"] = heartbeat.get("wall") if isinstance(heartbeat, dict) else None
    doc["spawn_failure"] = spawn_failure(paths)
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


def stop(project: Project, wait: float = 5.0) -> Message:
    """Ask the daemon to stop over the socket; if it does not answer but the
    lock is held, SIGTERM the holder after proving its identity (pid, start
    time and instance token of the status record, see _verified_pid).

    A daemon that is still starting (the first search of a project spawns
    one, detached) has not taken its lock yet, or holds it before it
    answers or records who it is: it is asked again until it can be told,
    within the same `wait`."""
    from ctindex.client.spawn import starting

    paths = RuntimePaths.for_project(project)
    deadline = time.monotonic() + wait
    how = _ask_to_stop(paths, 1.0)
    while (how == UNIDENTIFIED or (how == "not running" and starting(paths))) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
        how = _ask_to_stop(paths, min(1.0, max(0.05, deadline - time.monotonic())))
    while lock_held(paths) and time.monotonic() < deadline:
        time.sleep(0.02)
    stopped = not lock_held(paths)
    return {"stopped": stopped, "how": how}


UNIDENTIFIED = "unidentified lock holder"


def _ask_to_stop(paths: RuntimePaths, timeout: float) -> str:
    """One attempt: a stop request, else a SIGTERM to a proven holder."""
    try:
        reply = request(paths, {"op": "stop"}, timeout)
        if reply.get("ok") is True:
            return "stop request"
    except BarrierFailed:
        pass
    if not lock_held(paths):
        return "not running"
    pid = _verified_pid(paths)
    if pid is None:
        return UNIDENTIFIED
    import signal  # only `stop` needs it

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "not running"
    return "SIGTERM"


def _verified_pid(paths: RuntimePaths) -> int | None:
    """The pid from status.json, only if that process started when the record
    says and its lock file names the same instance token."""
    import psutil

    status = read_record(paths.status) or {}
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
