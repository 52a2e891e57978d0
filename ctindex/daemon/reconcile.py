"""The reconcile driver: hands the dirty set to the engine, narrowed or full.

A pending batch with a rescan becomes a full pass (`indexer.update`), else a
narrowed one over its keys (`indexer.update_paths`). What a pass reports back
feeds the next one: files that changed while read and new hard links ask for
a full pass, files that moved between the pass and their watch are queued
again (docs/daemon.md, "Changes no event announces").

The index lock is shared with every other writer (a client's build,
`rebuild`, a query's fallback). A held lock is a build in progress, not an
error: the work is kept and tried again at the next trigger, and status says
`build_in_progress` instead of an `IndexBusy` in `last_error`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

from ctindex.backends.base import Watcher
from ctindex.daemon.dirtyset import DirtySet, Pending
from ctindex.daemon.filewatch import FileWatches
from ctindex.daemon.layers import Engine, PlanView
from ctindex.daemon.links import LinkTracker
from ctindex.daemon.schedule import HEARTBEAT_S, Schedule
from ctindex.daemon.status import BatchRecord, ReconcileRecord, Stats
from ctindex.daemon.storeguard import PUBLISHED_THROUGH_A_MOUNT, StoreGuard
from ctindex.errors import IndexBusy, PolicyError
from ctindex.store.generation import OUTSIDE

if TYPE_CHECKING:
    from ctindex.indexing.transaction import UpdateReport

ERROR_RETRY_S = 5.0  # after an indexing error, wait before trying again
# After a held index lock: the other writer's build may end any moment, and
# its end is no event we can wait on, so look again at the next heartbeat.
BUSY_RETRY_S = HEARTBEAT_S
# How long a pass a client waits for (a barrier) waits for another writer's
# lock before the barrier fails over to the client's own path. A pass nobody
# waits for does not wait at all: blocking the one loop would leave `status`
# and `ping` unanswered for as long as the build runs.
BARRIER_LOCK_WAIT_S = 2.0
TRIM_DELAY_S = 0.2  # quiet time after indexing work before memory is released
ROUTINE_PASSES = ("startup", "audit")  # full passes not caused by lost events


class Outcome(enum.Enum):
    DONE = "done"  # nothing to do, or the pass was applied
    BUSY = "busy"  # another writer holds the index lock: the work is kept
    FAILED = "failed"  # the engine raised: the work is kept, retried later
    POLICY_ERROR = "policy-error"  # the plan is invalid: the daemon must stop


class ReconcileDriver:
    def __init__(
        self,
        engine: Engine,
        dirty: DirtySet,
        links: LinkTracker,
        files: FileWatches,
        stats: Stats,
        schedule: Schedule,
        clock: Callable[[], float],
        wall: Callable[[], float],
        guard: StoreGuard | None = None,
        log: Callable[..., None] | None = None,
    ) -> None:
        self.engine = engine
        self.guard = guard
        self.log = log  # the daemon's log (`event`, fields): store doubts go there
        self.dirty = dirty
        self.links = links
        self.files = files
        self.stats = stats
        self.schedule = schedule
        self.clock = clock
        self.wall = wall
        self.retry_at = 0.0  # no pass before this (after an error or a held lock)
        self.trim_due: float | None = None  # when to hand freed memory back (after work)
        self.policy_error: str | None = None  # the PolicyError of the last POLICY_ERROR
        # A full pass forced by lost events, not yet told to a client.
        self.unreported: ReconcileRecord | None = None
        # Why the store is not the one vouched for (ctindex/daemon/storeguard.py):
        # set until a rebuild succeeds; `outside_unreported` until a client is told.
        self.outside: str | None = None
        self.outside_unreported: str | None = None
        # A generation a client published through a network mount: vouched
        # for only after a full pass of ours (set until one succeeds).
        self.to_verify: str | None = None

    def due(self, now: float) -> bool:
        """The debounced batch is ready and no retry wait is running."""
        return self.dirty.ready(now) and now >= self.retry_at

    def deadline(self) -> float | None:
        deadline = self.dirty.deadline()
        return None if deadline is None else max(deadline, self.retry_at)

    def check_store(self) -> None:
        """The published store is still the one vouched for, or the next
        pass rebuilds it (ctindex/daemon/storeguard.py)."""
        if self.guard is None or self.outside is not None or self.to_verify is not None:
            return
        distrust = self.guard.check()
        if distrust is None:
            return
        if self.log is not None:
            self.log(
                "store-doubt", why=distrust.why, then="verify" if distrust.verify else "rebuild"
            )
        if distrust.verify:
            self.to_verify = distrust.why
        else:
            self.outside = distrust.why
            self.stats.last_error = f"{OUTSIDE}: {distrust.why}"

    @property
    def store_in_doubt(self) -> bool:
        """The next pass must rebuild or verify before anything is vouched for."""
        return self.outside is not None or self.to_verify is not None

    def gather_unannounced(self, now: float) -> None:
        """Before a barrier takes the dirty set: writes through a name no
        watcher sees (files with several names), and files beyond the
        file-watch budget (or racily clean), re-checked by their stat while
        they are few (past that, ctindex/daemon/filewatch.py leaves them to
        the audit)."""
        self.dirty.add(self.links.check(), now)
        if self.links.over_cap:
            self.dirty.request_rescan("hard-links-over-cap", now)
        self.dirty.add(self.files.check(), now)

    def expected_full_s(self) -> float:
        """How long a full pass took last time (0 before the first)."""
        last = self.stats.last_reconcile
        return last["duration_ms"] / 1000 if last is not None else 0.0

    def apply(
        self, pending: Pending, view: PlanView, watcher: Watcher, *, lock_wait: float = 0.0
    ) -> Outcome:
        """Run the narrowed or full pass for `pending`; when it cannot run,
        put it back and wait before the next try (never a busy loop).
        A store changed outside ctindex turns any pass into a rebuild."""
        self.check_store()
        rebuild_why = None if self.outside is None else f"{OUTSIDE}: {self.outside}"
        if rebuild_why is not None:  # whatever was pending, the rebuild covers it
            pending = Pending([], True, rebuild_why, pending.first_event)
        elif self.to_verify is not None:  # so does the full pass
            pending = Pending([], True, PUBLISHED_THROUGH_A_MOUNT, pending.first_event)
        if not pending.rescan and not pending.paths:
            return Outcome.DONE
        started = self.clock()
        try:
            if rebuild_why is not None:
                applied = self.engine.rebuild(view, rebuild_why, lock_timeout=lock_wait)
            elif pending.rescan:
                applied = self.engine.reconcile(view, lock_timeout=lock_wait)
            else:
                self.files.prewatch(watcher, pending.paths)
                applied = self.engine.reconcile_paths(view, pending.paths, lock_timeout=lock_wait)
        except PolicyError as exc:
            self.policy_error = str(exc)
            return Outcome.POLICY_ERROR
        except IndexBusy:
            self.stats.build_in_progress = True
            self.dirty.restore(pending, self.clock())
            self.retry_at = self.clock() + BUSY_RETRY_S
            return Outcome.BUSY
        except Exception as exc:
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            self.dirty.restore(pending, self.clock())
            self.retry_at = self.clock() + ERROR_RETRY_S
            return Outcome.FAILED
        done = self.clock()
        self.trim_due = done + TRIM_DELAY_S  # not now: a barrier may be waiting on us
        if self.guard is not None:
            self.guard.learn(applied.identity)
        if self.outside is not None:
            self.outside_unreported, self.outside = self.outside, None
        self.to_verify = None
        self._record(pending, applied, started, done)
        self._learn(pending, applied, watcher, done)
        self.stats.last_error = None
        self.stats.build_in_progress = False
        return Outcome.DONE

    def _learn(
        self, pending: Pending, applied: UpdateReport, watcher: Watcher, done: float
    ) -> None:
        if applied.dirty:
            self.dirty.request_rescan("changed-while-read", done)
        full = applied.linked_full or pending.rescan
        if self.links.learn(applied.linked, full, pending.paths):
            self.dirty.request_rescan("new-hard-link", done)
        moved = self.files.learn(watcher, applied.seen, full, pending.paths)
        if moved:  # changed between the pass and its watch: no event will say so
            self.dirty.add(moved, self.clock())

    def _record(self, pending: Pending, applied: UpdateReport, started: float, done: float) -> None:
        stats = self.stats
        stats.generation = applied.generation
        elapsed = round((done - started) * 1000, 3)
        if pending.rescan:
            stats.reconciles += 1
            stats.entries_visited_total += applied.entries_visited
            stats.last_reconcile = {
                "reason": pending.reason,
                "duration_ms": elapsed,
                "entries_visited": applied.entries_visited,
                "at": self.wall(),
            }
            self.schedule.audit_after(done)
            if pending.reason not in ROUTINE_PASSES:
                self.unreported = stats.last_reconcile
            return
        stats.batches += 1
        latency = None
        if pending.first_event is not None:
            latency = round((done - pending.first_event) * 1000, 3)
        batch: BatchRecord = {
            "duration_ms": elapsed,
            "paths": len(pending.paths),
            "added": applied.added + applied.renamed,
            "changed": applied.changed,
            "removed": applied.removed,
            "latency_ms": latency,
            "at": self.wall(),
        }
        stats.last_batch = batch
