"""The barrier (docs/daemon.md, "Barrier protocol"): one class owns it, from cookie to answer.

A cookie is created in the watched cookie folder; when its name comes back
through the same watcher, every event queued before it has been read
(Watchman's CookieSync, git's fsmonitor). `Barrier` writes the cookie, keeps
the waiters, applies what the watcher delivered up to the cookie (no
debounce) and answers; `Cookies` only keeps the books of cookie files.
docs/daemon.md "Barrier protocol" is the wire format.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ctindex.backends.base import Watcher
from ctindex.daemon.dirtyset import DirtySet, Pending
from ctindex.daemon.layers import PlanView
from ctindex.daemon.reconcile import BARRIER_LOCK_WAIT_S, Outcome, ReconcileDriver
from ctindex.daemon.server import Connection, IpcServer
from ctindex.daemon.share_barrier import ShareRequest
from ctindex.daemon.singleton import repair_folder, touch
from ctindex.daemon.status import Stats
from ctindex.ipc.protocol import BarrierResult

BARRIER_SHARE = 0.8  # answer within this share of the client's budget
BUDGET_MIN_MS, BUDGET_MAX_MS = 10, 10_000  # the client's budget is clamped to this
# Full passes a barrier must finish before it answers: the narrowed pass it
# just ran found that it could not vouch for everything (docs/daemon.md).
RETRY_BEFORE_ANSWER = ("changed-while-read", "new-hard-link")


# Who waits: a client on the socket, or one on another host that asked
# through the share (ctindex/daemon/share_barrier.py); both get the same answer.
Asker = Connection | ShareRequest


@dataclass
class Waiter:
    conn: Asker
    started: float
    deadline: float
    seen: bool = False


class Cookies:
    def __init__(self, folder: Path, runtime_dir: Path, instance: str) -> None:
        self.folder = folder
        self.runtime_dir = runtime_dir
        self.instance = instance
        self.waiters: dict[str, Waiter] = {}
        self._seq = 0

    def __bool__(self) -> bool:
        return bool(self.waiters)

    def create(
        self, conn: Asker, now: float, budget: float, before_retry: Callable[[], object]
    ) -> Waiter:
        """Write a new cookie and register its waiter; raises OSError.

        A removed or replaced cookie folder is repaired once, calling
        `before_retry` (a watcher read, so the folder is watched again before
        the cookie appears in it)."""
        self._seq += 1
        name = f"{self.instance}-{self._seq}"
        try:
            touch(self.folder / name)
        except (FileNotFoundError, NotADirectoryError):
            repair_folder(self.folder, self.runtime_dir)
            before_retry()
            touch(self.folder / name)
        waiter = Waiter(conn, now, now + budget * BARRIER_SHARE)
        self.waiters[name] = waiter
        return waiter

    def seen(self, names: Iterable[str]) -> None:
        """Cookies reported by the watcher: mark their waiters, delete the files
        (ours or a previous instance's)."""
        for name in names:
            waiter = self.waiters.get(name)
            if waiter is not None:
                waiter.seen = True
            self._remove(name)

    def all_seen(self) -> None:
        """Count every waiting cookie as seen (the caller guarantees a full
        pass starts before they are answered, which covers their requests)."""
        for name in list(self.waiters):
            self.seen([name])

    def expired(self, now: float) -> list[Waiter]:
        """Waiters whose cookie did not come back in time (removed here)."""
        late = [n for n, w in self.waiters.items() if not w.seen and w.deadline <= now]
        for name in late:
            self._remove(name)
        return [self.waiters.pop(n) for n in late]

    def ready(self) -> list[Waiter]:
        """Waiters whose cookie was seen (removed here)."""
        names = [n for n, w in self.waiters.items() if w.seen]
        return [self.waiters.pop(n) for n in names]

    def drain(self) -> list[Waiter]:
        """Every waiter (shutdown)."""
        waiters = list(self.waiters.values())
        self.waiters.clear()
        return waiters

    def deadline(self) -> float | None:
        return min((w.deadline for w in self.waiters.values()), default=None)

    def _remove(self, name: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.folder / name)


class BarrierLoop(Protocol):
    """What the barrier needs of the loop (ctindex/daemon/lifecycle.py): its
    current watcher, plan and server, and the steps it runs in its order."""

    server: IpcServer | None

    @property
    def watcher(self) -> Watcher: ...

    @property
    def plan(self) -> PlanView: ...

    def drain_watcher(self) -> None:
        """Read the watcher: events to the dirty set, cookies seen here."""

    def check_mounts(self) -> None:
        """Reopen the watcher when the mount table changed."""

    def apply(self, pending: Pending, *, lock_wait: float) -> Outcome:
        """Run the pass for `pending` (a PolicyError stops the loop)."""

    def lane(self) -> str: ...

    def answer_search(self, waiter: Waiter, outcome: Outcome) -> None:
        """A `search` op's barrier is done: hand its query on."""


def is_search(conn: Asker) -> bool:
    return conn.request is not None and conn.request.get("op") == "search"


def budget_s(timeout_ms: object, default_ms: int) -> float:
    """The client's budget (any JSON value) in seconds, clamped."""
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool):
        timeout_ms = default_ms
    return min(max(timeout_ms, BUDGET_MIN_MS), BUDGET_MAX_MS) / 1000


class Barrier:
    def __init__(
        self,
        loop: BarrierLoop,
        cookies: Cookies,
        driver: ReconcileDriver,
        dirty: DirtySet,
        stats: Stats,
        clock: Callable[[], float],
    ) -> None:
        self.loop = loop
        self.cookies = cookies
        self.driver = driver
        self.dirty = dirty
        self.stats = stats
        self.clock = clock

    def __bool__(self) -> bool:
        """Some barrier is waiting for its cookie or its answer."""
        return bool(self.cookies)

    def start(self, conn: Asker, timeout_ms: object, now: float) -> None:
        """Write the cookie of one request; it is answered once it is seen."""
        loop = self.loop
        assert loop.server is not None
        budget = budget_s(timeout_ms, loop.plan.barrier_timeout_ms)
        # Read first: the backend re-watches a lost cookie folder (or root) on
        # each read, and that must happen before our cookie is created.
        loop.drain_watcher()
        try:
            self.cookies.create(conn, now, budget, before_retry=loop.drain_watcher)
        except OSError as exc:
            self.fail(conn, f"cookie: {exc.strerror or exc}")
            return
        if isinstance(conn, Connection):
            loop.server.extend(conn, now + budget + 0.5)
        if loop.watcher.fileno() is None:
            loop.drain_watcher()  # poll lane: it notices the cookie by listing

    def deadline(self) -> float | None:
        return self.cookies.deadline()

    def expire(self, now: float) -> None:
        for waiter in self.cookies.expired(now):
            self.fail(waiter.conn, "cookie not seen in time")
            # The watcher did not deliver our own event: distrust it.
            self.dirty.request_rescan("cookie-timeout", now)

    def answer(self) -> None:
        """Apply and answer every waiter whose cookie came back."""
        ready = self.cookies.ready()
        if not ready:
            return
        loop = self.loop
        now = self.clock()
        # Never trust a notification alone: a mount change it missed would
        # leave a scope unwatched (or on the wrong lane) behind a clean answer.
        loop.check_mounts()
        self.driver.gather_unannounced(now)
        pending = self.dirty.take()  # no debounce wait for a barrier
        remaining = min(w.deadline for w in ready) - now
        lock_wait = max(0.0, min(BARRIER_LOCK_WAIT_S, remaining))
        if pending.rescan and self.driver.expected_full_s() > remaining:
            # Cannot finish in time: let the clients reconcile themselves now
            # rather than time out, then do the full pass anyway.
            for w in ready:
                self.fail(w.conn, "reconcile pending")
            loop.apply(pending, lock_wait=0.0)  # nobody waits for it now
            return
        outcome = loop.apply(pending, lock_wait=lock_wait)
        if outcome is Outcome.DONE and self.dirty.rescan_reason in RETRY_BEFORE_ANSWER:
            # One retry; a file still changing is live.
            outcome = loop.apply(self.dirty.take(), lock_wait=lock_wait)
        # Searches first: one that finds a full pass to report declines and
        # leaves the report for the client's own barrier (or for the plain
        # barriers below, which then take it).
        for w in ready:
            if is_search(w.conn):
                loop.answer_search(w, outcome)
        waiters = [w for w in ready if not is_search(w.conn)]
        if waiters:
            self._answer(waiters, outcome)

    def _answer(self, waiters: list[Waiter], outcome: Outcome) -> None:
        loop = self.loop
        assert loop.server is not None
        if outcome is not Outcome.DONE:
            why = FAILURE_REASONS[outcome]
            for w in waiters:
                self.fail(w.conn, why)
            return
        lane, watcher = loop.lane(), loop.watcher
        # A full pass forced by lost events since the last answer is reported
        # (once), so a query can say it was reconciled rather than just clean.
        full, self.driver.unreported = self.driver.unreported, None
        outside, self.driver.outside_unreported = self.driver.outside_unreported, None
        guard = self.driver.guard
        identity = (guard.known if guard is not None else None) or ""
        for w in waiters:
            answer = BarrierResult(
                generation=self.stats.generation,
                instance=self.cookies.instance,
                lane=lane,
                backend=watcher.name,
                backend_reason=watcher.reason,
                degraded=watcher.degraded,
                plan=loop.plan.digest,
                reconciled=full is not None,
                reconcile_reason=full["reason"] if full else None,
                reconcile_ms=full["duration_ms"] if full else None,
                barrier_ms=round((self.clock() - w.started) * 1000, 3),
                identity=identity,
                outside=outside,
            )
            self.reply(w.conn, answer.to_wire())

    def fail(self, conn: Asker, reason: str) -> None:
        self.stats.barrier_failures += 1
        self.reply(conn, {"ok": False, "error": reason, "instance": self.cookies.instance})

    def reply(self, conn: Asker, answer: dict[str, object]) -> None:
        """Over the socket, or into the share request's own file."""
        if isinstance(conn, ShareRequest):
            conn.respond(answer)
        elif self.loop.server is not None:
            self.loop.server.reply(conn, answer)

    def drain(self, reason: str) -> None:
        """Shutdown: fail every waiter."""
        for waiter in self.cookies.drain():
            self.fail(waiter.conn, reason)


# Why a barrier fails when its pass did not run; the client then reconciles
# in its own process (docs/daemon.md, the `daemon: <error>` fallback).
FAILURE_REASONS = {
    Outcome.BUSY: "index busy: a build is in progress",
    Outcome.FAILED: "daemon error",
    Outcome.POLICY_ERROR: "daemon error",
}
