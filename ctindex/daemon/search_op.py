"""The `search` op (docs/daemon.md "Query path"): when the daemon answers a
query itself, and when it declines so the client runs its own path.

A search is a barrier first (ctindex/daemon/barrier.py), then a job for the
query worker (ctindex/daemon/query.py). The daemon answers only what it can
vouch for alone: a client of its own build, a plan still current, events it
trusts and no full pass left to report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ctindex.backends.base import Watcher
from ctindex.daemon.barrier import FAILURE_REASONS, Waiter
from ctindex.daemon.layers import PlanView
from ctindex.daemon.query import QUERY_BUDGET_S, Job, QueryService
from ctindex.daemon.reconcile import Outcome, ReconcileDriver
from ctindex.daemon.server import Connection, IpcServer
from ctindex.daemon.status import Stats
from ctindex.ipc.protocol import events_trusted, search_request

if TYPE_CHECKING:
    from ctindex.ipc.protocol import BarrierRequest, SearchAnswer, SearchRequest


class SearchLoop(Protocol):
    """What the search op needs of the loop (ctindex/daemon/lifecycle.py)."""

    server: IpcServer | None

    @property
    def watcher(self) -> Watcher: ...

    @property
    def plan(self) -> PlanView: ...

    def plan_outdated(self) -> bool:
        """The config or the folders root detection listed changed."""

    def replan(self) -> None: ...

    def start_barrier(self, conn: Connection, request: BarrierRequest, now: float) -> None: ...


class SearchOp:
    def __init__(
        self,
        loop: SearchLoop,
        queries: QueryService,
        driver: ReconcileDriver,
        stats: Stats,
        instance: str,
        clock: Callable[[], float],
    ) -> None:
        self.loop = loop
        self.queries = queries
        self.driver = driver
        self.stats = stats
        self.instance = instance
        self.clock = clock

    def start(self, conn: Connection, request: SearchRequest, now: float) -> None:
        """A `search` from ctindex/fast_entry.py, of a client of this build
        (ctindex/daemon/ops.py declines another build's without retiring: its
        own barrier then retires this daemon and starts the successor,
        docs/daemon.md "Build identity"): only under a plan still current,
        then the usual barrier."""
        if self.queries.busy:
            self.decline(conn, "daemon busy")
            return
        why = self._untrusted()
        if why is not None:
            self.decline(conn, why)
            return
        if self.loop.plan_outdated():
            self.loop.replan()
            self.decline(conn, "plan changed")
            return
        self.loop.start_barrier(conn, {"plan": None, "config": None, "timeout_ms": None}, now)

    def barrier_done(self, waiter: Waiter, outcome: Outcome) -> None:
        """The barrier of a `search` is done: hand the query to the worker."""
        conn = waiter.conn
        assert isinstance(conn, Connection)  # a search comes over the socket only
        why = FAILURE_REASONS[outcome] if outcome is not Outcome.DONE else self._untrusted()
        if why is None and self.queries.busy:
            why = "daemon busy"
        if why is not None:
            self.decline(conn, why)
            return
        server = self.loop.server
        assert server is not None and conn.request is not None
        search = search_request(conn.request)
        assert search is not None  # checked when it arrived (start)
        now = self.clock()
        deadline = now + QUERY_BUDGET_S
        server.extend(conn, deadline + 0.5)
        self.queries.submit(
            Job(
                conn,
                search["argv"],
                search["cwd"],
                self.loop.plan.digest,
                self.stats.generation,
                self._identity(),
                round((now - waiter.started) * 1000, 3),
                deadline,
            )
        )

    def answer_finished(self, now: float) -> None:
        """Reply for every job the worker finished (or that ran out of time)."""
        server = self.loop.server
        if server is None:
            return
        for job in self.queries.finished(now):
            if job.late or job.declined is not None:
                self.decline(job.conn, "slow query" if job.late else str(job.declined))
                continue
            self.queries.answered += 1
            answer: SearchAnswer = {
                "stdout": job.stdout,
                "stderr": job.stderr,
                "code": job.code,
                "result": job.result,
            }
            server.reply(job.conn, {"ok": True, **answer})  # read by protocol.search_answer

    def decline(self, conn: Connection, reason: str) -> None:
        """Not answered here: the client runs the in-process path."""
        assert self.loop.server is not None
        self.queries.declined += 1
        self.queries.last_declined = reason
        self.loop.server.reply(
            conn, {"ok": False, "declined": True, "error": reason, "instance": self.instance}
        )

    def _identity(self) -> str:
        guard = self.driver.guard
        return (guard.known if guard is not None else None) or ""

    def _untrusted(self) -> str | None:
        """Why this daemon cannot vouch for an answer by itself now (then the
        client's own barrier words it: unreliable filesystem, reconciled)."""
        watcher = self.loop.watcher
        if not events_trusted(watcher.name, watcher.degraded):
            return "events not trusted"
        if self.driver.unreported is not None or self.driver.outside_unreported is not None:
            return "a full pass to report"
        if self.driver.outside is not None:
            return "index changed outside ctindex"
        if self.driver.to_verify is not None:
            return "a generation published through a network mount to verify"
        return None
