"""The daemon's status record (`runtime/status.json` and the `status` op).

The record is what `ctindex status` and `watch status` read
(ctindex/client/control.py STATUS_FIELDS, docs/daemon.md "Lanes and
`watcher_status`"); its keys are a stable interface, so they are spelled out
once here as TypedDicts instead of being built ad hoc where they are used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict

from ctindex.backends.base import Watcher
from ctindex.backends.mounts import MountTable
from ctindex.daemon import sysinfo
from ctindex.daemon.dirtyset import DirtySet
from ctindex.daemon.filewatch import FileWatches, FileWatchStatus
from ctindex.daemon.layers import PlanView
from ctindex.daemon.links import LinkStatus, LinkTracker
from ctindex.errors import IndexWriteError
from ctindex.ipc.records import write_record


class ReconcileRecord(TypedDict):
    """The last full pass: why, how long, how much it read, when (wall)."""

    reason: str | None
    duration_ms: float
    entries_visited: int
    at: float


class BatchRecord(TypedDict):
    """The last narrowed pass."""

    duration_ms: float
    paths: int
    added: int
    changed: int
    removed: int
    latency_ms: float | None  # first event to indexed; None without an event
    at: float


class Unannounced(TypedDict):
    """Checks for changes no event announces (docs/daemon.md)."""

    hard_links: LinkStatus
    file_watches: FileWatchStatus
    mount_checks: int
    mount_changes: int


class Heartbeat(TypedDict):
    wall: float
    monotonic: float


class StatusRecord(TypedDict):
    version: int
    pid: int
    instance: str
    started: float
    lane: str
    backend: str | None
    backend_reason: str | None
    degraded: str | None
    generation: int
    plan: str | None
    heartbeat: Heartbeat
    dirty_paths: int
    rescan_reason: str | None
    pending: dict[str, int] | None
    reconciles: int
    entries_visited_total: int
    last_reconcile: ReconcileRecord | None
    batches: int
    last_batch: BatchRecord | None
    barriers: int
    barrier_failures: int
    refused_peers: int
    last_error: str | None
    # A writer outside the daemon (a client's build, `rebuild`) held the index
    # lock at the last attempt: the work waits for it, and that is no error.
    build_in_progress: bool
    unannounced: Unannounced
    rss_bytes: int | None
    physical_memory_bytes: int | None
    memory_ceiling_bytes: int | None
    idle_seconds: int | None
    socket: str
    stop_reason: str | None
    stopped: float | None
    build: str
    queries: Mapping[str, object] | None


@dataclass
class Stats:
    """Counters the loop keeps for the status record and barrier answers."""

    generation: int = 0
    reconciles: int = 0
    entries_visited_total: int = 0
    last_reconcile: ReconcileRecord | None = None
    batches: int = 0
    last_batch: BatchRecord | None = None
    barriers: int = 0
    barrier_failures: int = 0
    last_error: str | None = None
    build_in_progress: bool = False


@dataclass(frozen=True)
class Identity:
    """What names this daemon process in its record (fixed at start)."""

    pid: int
    instance: str  # a PID alone is not an identity
    started: float  # wall clock
    build: str  # the code this process runs (ctindex/ipc/build_id.py)
    socket: str


class IndexedAmong(Protocol):
    def __call__(self, keys: list[str]) -> Container[str] | None: ...


class StatusWriter:
    """Builds the record from the loop's parts and writes status.json.

    The parts that live as long as the daemon are given once; the ones the
    loop replaces (watcher, plan, mount table) are passed on each call."""

    def __init__(
        self,
        identity: Identity,
        path: Path,
        root: Path,
        stats: Stats,
        dirty: DirtySet,
        links: LinkTracker,
        files: FileWatches,
        indexed_among: IndexedAmong,
        clock: Callable[[], float],
        wall: Callable[[], float],
    ) -> None:
        self.identity = identity
        self.path = path
        self.root = root
        self.stats = stats
        self.dirty = dirty
        self.links = links
        self.files = files
        self.indexed_among = indexed_among
        self.clock = clock
        self.wall = wall
        self.owner = True  # False once a successor owns status.json

    def record(
        self,
        lane: str,
        *,
        watcher: Watcher | None,
        view: PlanView | None,
        mounts: MountTable | None,
        refused_peers: int,
        rss: int | None,
        stop_reason: str | None,
        queries: Mapping[str, object] | None,
    ) -> StatusRecord:
        mono, wall = self.clock(), self.wall()
        keys = self.dirty.paths()
        pending = sysinfo.classify(keys, self.root, self.indexed_among(keys) if keys else None)
        stats, me = self.stats, self.identity
        return {
            "version": 1,
            "pid": me.pid,
            "instance": me.instance,
            "started": me.started,
            "lane": lane,
            "backend": watcher.name if watcher else None,
            "backend_reason": watcher.reason if watcher else None,
            "degraded": watcher.degraded if watcher else None,
            "generation": stats.generation,
            "plan": view.digest if view else None,
            "heartbeat": {"wall": wall, "monotonic": mono},
            "dirty_paths": len(self.dirty),
            "rescan_reason": self.dirty.rescan_reason,
            "pending": pending,
            "reconciles": stats.reconciles,
            "entries_visited_total": stats.entries_visited_total,
            "last_reconcile": stats.last_reconcile,
            "batches": stats.batches,
            "last_batch": stats.last_batch,
            "barriers": stats.barriers,
            "barrier_failures": stats.barrier_failures,
            "refused_peers": refused_peers,
            "last_error": stats.last_error,
            "build_in_progress": stats.build_in_progress,
            "unannounced": {
                "hard_links": self.links.status(),
                "file_watches": self.files.status(watcher),
                "mount_checks": mounts.checks if mounts else 0,
                "mount_changes": mounts.changes if mounts else 0,
            },
            "rss_bytes": rss,
            "physical_memory_bytes": sysinfo.physical_memory(),
            "memory_ceiling_bytes": view.memory_ceiling if view else None,
            "idle_seconds": view.idle_seconds if view else None,
            "socket": me.socket,
            "stop_reason": stop_reason,
            "stopped": wall if stop_reason else None,
            "build": me.build,
            "queries": queries,
        }

    def write(self, record: StatusRecord) -> None:
        """Best effort: a status file that cannot be written must not stop
        the daemon (the `status` op answers the same record)."""
        if not self.owner:
            return
        with contextlib.suppress(OSError, IndexWriteError):
            write_record(self.path, dict(record))
