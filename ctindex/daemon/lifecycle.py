"""The watcher daemon: one process per project, one selector loop, no threads.

Everything happens on one thread on purpose: the watcher fd, the listening
socket, client sockets and a signal wake-up socket all go through one
selector, so there is no locking between "events read" and "barrier answered"
(the order of those two is the whole point of the barrier).

Order of startup (spec §8): take the lock (the only authority), open the
watcher *before* the initial full reconciliation (so nothing that changes
during it is missed), bind the socket, then drop the launcher's claim.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import selectors
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from ctindex import runtime as rt
from ctindex.backends.base import key_path
from ctindex.backends.mounts import MountTable
from ctindex.daemon import singleton, sysinfo
from ctindex.daemon.barrier import Cookies, Waiter
from ctindex.daemon.console_events import ConsoleEvents
from ctindex.daemon.dirtyset import DirtySet, Pending
from ctindex.daemon.filewatch import FileWatches
from ctindex.daemon.layers import Applied, ConfigStamp, Engine, PlanView
from ctindex.daemon.links import LinkTracker
from ctindex.daemon.log import LifecycleLog
from ctindex.daemon.query import QUERY_BUDGET_S, Job, QueryService
from ctindex.daemon.server import Connection, IpcServer
from ctindex.daemon.signals import graceful_signals
from ctindex.errors import PolicyError
from ctindex.policy.project import Project, is_index_key

HEARTBEAT_S = 1.0
GAP_SKEW_S = 2.0  # wall clock moved this much more than the monotonic one: suspend/jump
GAP_LATE_S = 10.0  # a heartbeat this late: the process was stopped or starved
ERROR_RETRY_S = 5.0  # after an indexing error, wait before trying again
POLL_WAIT_S = 0.05  # poll-lane watcher has no fd: how often to look for cookies
AUDIT_JITTER = 0.25
MEMORY_LIMIT = "memory-limit"  # stop reason above the memory ceiling (spec §10)
TRIM_DELAY_S = 0.2  # quiet time after indexing work before memory is released
ROUTINE_PASSES = ("startup", "audit")  # full passes not caused by lost events
# Full passes a barrier must finish before it answers: the narrowed pass it
# just ran found that it could not vouch for everything (docs/daemon.md).
RETRY_BEFORE_ANSWER = ("changed-while-read", "new-hard-link")
# Ops that only a client of this very build may use: a query (barrier) or a
# liveness probe (ping, `watch start`) from another build makes the daemon
# answer once and leave, so the two never serve or rebuild against each other
# (docs/daemon.md "Build identity"). `status` and `stop` serve any build.
BUILD_CHECKED_OPS = ("barrier", "ping")


@dataclass
class Stats:
    generation: int = 0
    reconciles: int = 0
    entries_visited_total: int = 0
    last_reconcile: dict[str, Any] | None = None
    batches: int = 0
    last_batch: dict[str, Any] | None = None
    barriers: int = 0
    barrier_failures: int = 0
    last_error: str | None = None


class Daemon:
    def __init__(
        self,
        project: Project,
        paths: rt.RuntimePaths,
        engine: Engine,
        claim_token: str | None = None,
        *,
        successor: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.project = project
        self.paths = paths
        self.engine = engine
        self.claim_token = claim_token
        # Only a successor waits for the lock: a redundant lazy start (two
        # launchers racing) must leave at once, as before.
        self.successor = successor
        self.clock = clock
        self.wall = wall
        self.stop_reason: str | None = None
        self.stats = Stats()
        self.instance = secrets.token_hex(8)  # identity: a PID alone is not
        self.build = rt.build_id()  # the code this process runs (computed at start)
        self.pid = os.getpid()
        self.started_wall = wall()
        self.log: LifecycleLog | None = None
        self.sel = selectors.DefaultSelector()
        self.watcher: Any = None
        self.server: IpcServer | None = None
        self.view: PlanView | None = None
        self.dirty = DirtySet(0.15)
        self.cookies = Cookies(paths.cookies, paths.dir, self.instance)
        self.last_activity = clock()
        self.error_until = 0.0
        self.next_audit = float("inf")
        self.config_stamp: ConfigStamp | None = None  # taken before the plan was read
        self.rss: int | None = None
        self.cookie_key = ""
        self._watch_fd: int | None = None
        # Changes no event announces (docs/daemon.md): files with several
        # names, and mounts made or removed inside (or above) a scope.
        self.links = LinkTracker(os.fspath(project.root))
        # ... and every indexed file watched itself (ctindex/daemon/filewatch.py).
        self.files = FileWatches(os.fspath(project.root))
        self.mounts: MountTable | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self.console = ConsoleEvents(self._on_console_event, self._poke)
        self._last_beat = (clock(), self.started_wall)
        self._lock: IO[str] | None = None
        self.owner = True  # False once our lock file was deleted or replaced
        self.unreported: dict[str, Any] | None = None  # full pass not yet told to a client
        self.trim_due: float | None = None  # when to hand freed memory back (after work)
        self.queries: QueryService | None = None  # the `search` op (ctindex/daemon/query.py)

    @property
    def plan(self) -> PlanView:
        assert self.view is not None, "plan used before load"
        return self.view

    def run(self) -> str | None:
        """Serve until a stop condition; return the stop reason, or None when
        another process holds the lock (then nothing was touched)."""
        os.umask(0o077)
        rt.ensure_private_dir(self.paths.dir)
        lock = singleton.acquire_lock(
            self.paths.lock,
            singleton.SUCCESSOR_ATTEMPTS if self.successor else singleton.LOCK_ATTEMPTS,
        )
        if lock is None:
            self._drop_claim()  # the holder is alive: this claim served its purpose
            return None
        self.log = LifecycleLog(self.paths.log, f"pid={self.pid} instance={self.instance}")
        self._lock = lock
        try:
            lock.write(f"{self.pid} {self.instance}\n")
            lock.flush()
            self._serve()
            if self.stop_reason == MEMORY_LIMIT:
                # The next query would start a daemon that walks everything and
                # crosses the ceiling again: back off like a failed spawn (spec
                # §10 allows a later query to start a fresh one; not every one).
                rt.record_spawn_failure(self.paths, rt.STOPPED_PREFIX + MEMORY_LIMIT)
        except BaseException as exc:  # exceptional exit: log detail, never content
            self.stop_reason = self.stop_reason or "error"
            self._log("exit", error=f"{type(exc).__name__}: {exc}", where=sysinfo.where(exc))
            # Make clients back off: a daemon that crashes on every start (or soon
            # after) must not be relaunched by every query.
            stage = "daemon start" if self.server is None else "daemon crashed"
            rt.record_spawn_failure(self.paths, f"{stage}: {type(exc).__name__}: {exc}")
        finally:
            self._shutdown()
            lock.close()  # releases the OS lock last: status is final by now
            self.console.finished()  # a Windows close/logoff/shutdown may now end us
        return self.stop_reason

    # -- startup and loop ------------------------------------------------------

    def _serve(self) -> None:
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        self._wake = (wake_r, wake_w)
        signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        for signum in graceful_signals():
            signal.signal(signum, self._on_signal)
        self.console.install()  # Windows console control events (console_events.py)
        self.sel.register(wake_r, selectors.EVENT_READ, "wake")

        # Stamp, then read: a config changed in between leaves the stamp older
        # than the plan, so the next check re-plans (never the reverse).
        self.config_stamp = self.engine.config_stamp()
        self.view = self.engine.load_plan()
        if not self.view.watch:  # configured off since the launch: nothing to serve
            self.stop_reason = "watch-disabled"
            self._drop_claim()
            return
        self.dirty.debounce_s = self.view.debounce_ms / 1000
        self.next_audit = self._audit_due(self.clock())
        self.last_activity = self.clock()
        cookies = os.path.relpath(self.paths.cookies, self.project.root)
        self.cookie_key = cookies.replace(os.sep, "/")
        singleton.repair_folder(self.paths.cookies, self.paths.dir)
        singleton.clear_folder(self.paths.cookies)
        self._open_watcher()
        if self.paths.socket_is_fallback:
            rt.ensure_fallback_dir(self.paths)
        server = IpcServer(
            self.paths.socket, self.sel, self._on_request, self.clock, {"build": self.build}
        )
        server.start()
        self.server = server
        self.queries = QueryService(self.project.root, self.project.index_dir, self._poke)
        self._drop_claim()
        self._log("start", backend=self.watcher.name, socket=self.paths.socket)
        self.dirty.request_rescan("startup")
        self._write_status("reconcile")
        self._apply(self.dirty.take())
        self._last_beat = (self.clock(), self.wall())
        self._heartbeat()
        while self.stop_reason is None:
            self._tick()

    def _tick(self) -> None:
        now = self.clock()
        timeout = max(0.0, self._next_wakeup(now) - now)
        for key, mask in self.sel.select(timeout):
            if key.data == "watcher":
                self._drain_watcher()
            elif key.data == "mounts":
                self._check_mounts()
            elif key.data == "wake" and self._wake is not None:
                with contextlib.suppress(OSError):
                    while self._wake[0].recv(256):
                        pass
            elif self.server is not None:
                self.server.on_event(key.data, mask)
        if self.stop_reason is not None:
            return
        now = self.clock()
        if self.cookies and self.watcher.fileno() is None:
            self._drain_watcher()
        self._expire_waiters(now)
        self._answer_barriers()
        self._answer_queries(now)
        if self.server is not None:
            self.server.expire(now)
        if self.dirty.ready(now) and now >= self.error_until:
            self._apply(self.dirty.take())
        if self.trim_due is not None and now >= self.trim_due and not self.cookies:
            self.trim_due = None
            sysinfo.release_memory()
        if now >= self._last_beat[0] + HEARTBEAT_S:
            self._heartbeat()

    def _next_wakeup(self, now: float) -> float:
        times = [self._last_beat[0] + HEARTBEAT_S]
        if self.trim_due is not None:
            times.append(self.trim_due)
        deadline = self.dirty.deadline()
        if deadline is not None:
            times.append(max(deadline, self.error_until))
        if self.server is not None and (server_due := self.server.next_deadline()) is not None:
            times.append(server_due)
        if self.queries is not None and (query_due := self.queries.deadline()) is not None:
            times.append(query_due)
        waiting = self.cookies.deadline()
        if waiting is not None:
            times.append(waiting)
            if self.watcher.fileno() is None:
                times.append(now + POLL_WAIT_S)
        return min(times)

    # -- watcher ---------------------------------------------------------------

    def _open_watcher(self) -> None:
        # The table is read before the watcher classifies and watches, so a
        # mount made while it opens is a change the next check sees.
        table = MountTable()
        self.watcher = self.engine.open_watcher(self.plan, self.cookie_key)
        self.files.reset()  # a new watcher holds no file watches: the next full pass adds them
        self._sync_watcher_fd()
        root = self.project.root
        table.track(
            [key_path(root, r) for r in self.watcher.roots] + [key_path(root, self.cookie_key)]
        )
        old, self.mounts = self.mounts, table
        if old is not None:
            fd = old.fileno()
            if fd is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self.sel.unregister(fd)
            old.close()
        fd = table.fileno()
        if fd is not None:
            self.sel.register(fd, selectors.EVENT_READ, "mounts")

    def _check_mounts(self) -> None:
        """A mount or unmount inside or above a scope: nothing announced it
        to the watches (the folders they hold are now hidden, or the new
        ones have none), and the filesystem type may call for the poll lane.
        So the watcher is opened anew (classification and watches) and every
        scope is reconciled. Waiting barriers are then satisfied by that full
        pass, which starts after their requests; their cookie events were
        in the closed watcher."""
        if self.mounts is None or not self.mounts.changed():
            return
        with contextlib.suppress(Exception):
            self._drain_watcher()  # cookies and events read so far still count
        self._unregister_watcher_fd()
        self.watcher.close()
        self._open_watcher()
        self.dirty.request_rescan("mount-changed", self.clock())
        self.cookies.all_seen()

    def _sync_watcher_fd(self) -> None:
        """The watcher's fd can change (a lane switch): keep the selector current."""
        fd = self.watcher.fileno()
        if fd == self._watch_fd:
            return
        self._unregister_watcher_fd()
        if fd is not None:
            self.sel.register(fd, selectors.EVENT_READ, "watcher")
        self._watch_fd = fd

    def _unregister_watcher_fd(self) -> None:
        if self._watch_fd is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(self._watch_fd)
        self._watch_fd = None

    def _drain_watcher(self) -> None:
        batch = self.watcher.read(0.0)
        self._sync_watcher_fd()
        now = self.clock()
        if batch.rescan:
            self.dirty.request_rescan(batch.reason or "rescan", now)
        if batch.paths:
            # Our own index writes must never feed back as content changes.
            self.dirty.add((k for k in batch.paths if not is_index_key(k)), now)
        if batch.cookies:
            self.cookies.seen(batch.cookies)

    def _replan(self) -> None:
        """Reload the plan; a changed digest means new roots and a full pass."""
        stamp = self.engine.config_stamp()  # before the read, as in _serve
        try:
            view = self.engine.load_plan()
        except PolicyError as exc:  # clients report it themselves (exit 2)
            self.stop_reason = "policy-error"
            self._log("policy-error", detail=str(exc))
            return
        if not view.watch:  # the user turned watching off: nothing to do here
            self.stop_reason = "watch-disabled"
            return
        changed = view.digest != self.plan.digest
        self.view = view
        self.dirty.debounce_s = view.debounce_ms / 1000
        self.config_stamp = stamp
        if changed:
            self._unregister_watcher_fd()
            self.watcher.close()
            self._open_watcher()
            self.dirty.request_rescan("plan-changed", self.clock())
            self.links.learn({}, True, ())  # the new plan's full pass refills it

    # -- requests and barriers -------------------------------------------------

    def _on_request(self, conn: Connection, request: dict[str, Any]) -> None:
        assert self.server is not None
        op = request["op"]
        now = self.clock()
        if op in BUILD_CHECKED_OPS and request.get("build") != self.build:
            self._retire(conn, request.get("build"))
            return
        if op == "barrier":
            self.last_activity = now
            self._start_barrier(conn, request, now)
        elif op == "search":
            self.last_activity = now
            self._start_search(conn, request, now)
        elif op == "status":
            self.server.reply(conn, {"ok": True, "status": self._status_record(self._lane())})
        elif op == "ping":
            self.server.reply(conn, {"ok": True, "instance": self.instance, "pid": self.pid})
        elif op == "stop":
            self.server.reply(conn, {"ok": True, "instance": self.instance})
            self.stop_reason = "stop-request"
        else:
            self.server.reply(conn, {"ok": False, "error": "unknown op"})

    def _retire(self, conn: Connection, theirs: object) -> None:
        """Answer a client of another build once and begin the graceful exit:
        its successor (of the client's build) needs the lock we hold."""
        assert self.server is not None
        client_build = theirs if isinstance(theirs, str) else "none"
        self.server.reply(
            conn,
            {
                "ok": False,
                "retiring": True,
                "instance": self.instance,
                "error": f"build mismatch (daemon {self.build[:12]}, "
                f"client {client_build[:12]}); daemon exiting",
            },
        )
        self.stop_reason = "build-mismatch"

    def _start_barrier(self, conn: Connection, request: dict[str, Any], now: float) -> None:
        assert self.server is not None
        self.stats.barriers += 1
        digest = request.get("plan")
        config = request.get("config")  # the config file's stat as the client saw it
        have = self.config_stamp.stat if self.config_stamp is not None else "absent"
        if (isinstance(digest, str) and digest != self.plan.digest) or (
            config is not None and config != have
        ):
            self._replan()  # the client sees a different plan: ours may be stale
            if self.stop_reason is not None:
                self._fail_barrier(conn, f"daemon stopping: {self.stop_reason}")
                return
        budget_ms = request.get("timeout_ms")
        if not isinstance(budget_ms, int) or isinstance(budget_ms, bool):
            budget_ms = self.plan.barrier_timeout_ms
        budget = min(max(budget_ms, 10), 10_000) / 1000
        # Read first: the backend re-watches a lost cookie folder (or root) on
        # each read, and that must happen before our cookie is created.
        self._drain_watcher()
        try:
            self.cookies.create(conn, now, budget, before_retry=self._drain_watcher)
        except OSError as exc:
            self._fail_barrier(conn, f"cookie: {exc.strerror or exc}")
            return
        self.server.extend(conn, now + budget + 0.5)
        if self.watcher.fileno() is None:
            self._drain_watcher()  # poll lane: it notices the cookie by listing

    # -- the query path (docs/daemon.md "Query path") ------------------------------

    def _is_search(self, conn: Connection) -> bool:
        return conn.request is not None and conn.request.get("op") == "search"

    def _decline(self, conn: Connection, reason: str) -> None:
        """Not answered here: the client runs the in-process path."""
        assert self.server is not None
        if self.queries is not None:
            self.queries.declined += 1
            self.queries.last_declined = reason
        self.server.reply(
            conn, {"ok": False, "declined": True, "error": reason, "instance": self.instance}
        )

    def _untrusted(self) -> str | None:
        """Why this daemon cannot vouch for an answer by itself now (then the
        client's own barrier words it: unreliable filesystem, reconciled)."""
        if self.watcher.name == "poll" or self.watcher.degraded:
            return "events not trusted"
        if self.unreported is not None:
            return "a full pass to report"
        return None

    def _start_search(self, conn: Connection, request: dict[str, Any], now: float) -> None:
        """A `search` from ctindex/quick.py: only for a client of this build
        (another build's is declined without retiring: its own barrier then
        retires this daemon and starts the successor, docs/daemon.md "Build
        identity"), only under a plan still current, then the usual barrier."""
        argv, cwd = request.get("argv"), request.get("cwd")
        if request.get("build") != self.build:
            self._decline(conn, "build mismatch")
            return
        if (
            not isinstance(argv, list)
            or not all(isinstance(a, str) for a in argv)
            or not isinstance(cwd, str)
        ):
            self._decline(conn, "malformed search")
            return
        assert self.queries is not None
        if self.queries.busy:
            self._decline(conn, "daemon busy")
            return
        why = self._untrusted()
        if why is not None:
            self._decline(conn, why)
            return
        # The plan the client would compute (spec §7: never another plan's
        # answer): the config's fingerprint and bytes, the folders root
        # detection listed, as on every heartbeat.
        if self.engine.config_stamp() != self.config_stamp or self.engine.detection_changed(
            self.plan
        ):
            self._replan()
            self._decline(conn, "plan changed")
            return
        self._start_barrier(conn, {"op": "search"}, now)

    def _answer_search(self, waiter: Waiter, ok: bool) -> None:
        """The barrier of a `search` is done: hand the query to the worker."""
        assert self.queries is not None
        why = "daemon error" if not ok else self._untrusted()
        if why is None and self.queries.busy:
            why = "daemon busy"
        if why is not None:
            self._decline(waiter.conn, why)
            return
        now = self.clock()
        assert self.server is not None and isinstance(waiter.conn.request, dict)
        request = waiter.conn.request
        deadline = now + QUERY_BUDGET_S
        self.server.extend(waiter.conn, deadline + 0.5)
        self.queries.submit(
            Job(
                waiter.conn,
                list(request["argv"]),
                str(request["cwd"]),
                self.plan.digest,
                self.stats.generation,
                round((now - waiter.started) * 1000, 3),
                deadline,
            )
        )

    def _answer_queries(self, now: float) -> None:
        if self.queries is None or self.server is None:
            return
        for job in self.queries.finished(now):
            if job.late or job.declined is not None:
                self._decline(job.conn, "slow query" if job.late else str(job.declined))
                continue
            self.queries.answered += 1
            self.server.reply(
                job.conn, {"ok": True, "stdout": job.stdout, "stderr": job.stderr, "code": job.code}
            )

    def _poke(self) -> None:
        """Wake the loop from the worker thread (the signal wake-up socket)."""
        if self._wake is not None:
            with contextlib.suppress(OSError):
                self._wake[1].send(b"q")

    def _expire_waiters(self, now: float) -> None:
        for waiter in self.cookies.expired(now):
            self._fail_barrier(waiter.conn, "cookie not seen in time")
            # The watcher did not deliver our own event: distrust it.
            self.dirty.request_rescan("cookie-timeout", now)

    def _answer_barriers(self) -> None:
        ready: list[Waiter] = self.cookies.ready()
        if not ready:
            return
        searches = [w for w in ready if self._is_search(w.conn)]
        waiters = [w for w in ready if not self._is_search(w.conn)]
        now = self.clock()
        # Never trust a notification alone: a mount change it missed would
        # leave a scope unwatched (or on the wrong lane) behind a clean answer.
        self._check_mounts()
        # Writes through a name no watcher sees: re-check files with several names.
        self.dirty.add(self.links.check(), now)
        if self.links.over_cap:
            self.dirty.request_rescan("hard-links-over-cap", now)
        # Files over the file-watch budget (or racily clean with another name).
        self.dirty.add(self.files.check(), now)
        if self.files.over_cap:
            self.dirty.request_rescan("file-watches-over-budget", now)
        pending = self.dirty.take()  # no debounce wait for a barrier
        if pending.rescan:
            remaining = min(w.deadline for w in ready) - now
            last = self.stats.last_reconcile
            expected = (last or {}).get("duration_ms", 0.0) / 1000
            if expected > remaining:
                # Cannot finish in time: let the clients reconcile themselves now
                # rather than time out, then do the full pass anyway.
                for w in ready:
                    self._fail_barrier(w.conn, "reconcile pending")
                self._apply(pending)
                return
        ok = self._apply(pending)
        if ok and self.dirty.rescan_reason in RETRY_BEFORE_ANSWER:
            ok = self._apply(self.dirty.take())  # one retry; a file still changing is live
        # Searches first: one that finds a full pass to report declines and
        # leaves the report for the client's own barrier (or for the plain
        # barriers below, which then take it).
        for w in searches:
            self._answer_search(w, ok)
        if not waiters:
            return
        lane = self._lane()
        # A full pass forced by lost events since the last answer is reported
        # (once), so a query can say it was reconciled rather than just clean.
        full, self.unreported = self.unreported, None
        for w in waiters:
            if not ok:
                self._fail_barrier(w.conn, "daemon error")
                continue
            assert self.server is not None
            self.server.reply(
                w.conn,
                {
                    "ok": True,
                    "generation": self.stats.generation,
                    "instance": self.instance,
                    "lane": lane,
                    "backend": self.watcher.name,
                    "backend_reason": self.watcher.reason,
                    "degraded": self.watcher.degraded,
                    "plan": self.plan.digest,
                    "reconciled": full is not None,
                    "reconcile_reason": full["reason"] if full else None,
                    "reconcile_ms": full["duration_ms"] if full else None,
                    "barrier_ms": round((self.clock() - w.started) * 1000, 3),
                },
            )

    def _fail_barrier(self, conn: Connection, reason: str) -> None:
        self.stats.barrier_failures += 1
        if self.server is not None:
            self.server.reply(conn, {"ok": False, "error": reason, "instance": self.instance})

    # -- applying changes ------------------------------------------------------

    def _apply(self, pending: Pending) -> bool:
        """Run the narrowed or full reconciliation for `pending`; on failure
        put it back and wait ERROR_RETRY_S (never a busy loop)."""
        if not pending.rescan and not pending.paths:
            return True
        started = self.clock()
        try:
            if pending.rescan:
                applied = self.engine.reconcile(self.plan)
            else:
                self.files.prewatch(self.watcher, pending.paths)
                applied = self.engine.reconcile_paths(self.plan, pending.paths)
        except PolicyError as exc:
            self.stop_reason = "policy-error"
            self._log("policy-error", detail=str(exc))
            return False
        except Exception as exc:
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            self.dirty.restore(pending, self.clock())
            self.error_until = self.clock() + ERROR_RETRY_S
            return False
        done = self.clock()
        self.trim_due = done + TRIM_DELAY_S  # not now: a barrier may be waiting on us
        self._record(pending, applied, started, done)
        if applied.dirty:
            self.dirty.request_rescan("changed-while-read", done)
        if self.links.learn(applied.linked, applied.linked_full or pending.rescan, pending.paths):
            self.dirty.request_rescan("new-hard-link", done)
        moved = self.files.learn(
            self.watcher, applied.seen, applied.linked_full or pending.rescan, pending.paths
        )
        if moved:  # changed between the pass and its watch: no event will say so
            self.dirty.add(moved, self.clock())
        self.stats.last_error = None
        self._write_status(self._lane())
        return True

    def _record(self, pending: Pending, applied: Applied, started: float, done: float) -> None:
        self.stats.generation = applied.generation
        elapsed = round((done - started) * 1000, 3)
        if pending.rescan:
            self.stats.reconciles += 1
            self.stats.entries_visited_total += applied.entries_visited
            self.stats.last_reconcile = {
                "reason": pending.reason,
                "duration_ms": elapsed,
                "entries_visited": applied.entries_visited,
                "at": self.wall(),
            }
            self.next_audit = self._audit_due(done)
            if pending.reason not in ROUTINE_PASSES:
                self.unreported = self.stats.last_reconcile
        else:
            self.stats.batches += 1
            latency = None
            if pending.first_event is not None:
                latency = round((done - pending.first_event) * 1000, 3)
            self.stats.last_batch = {
                "duration_ms": elapsed,
                "paths": len(pending.paths),
                "added": applied.added,
                "changed": applied.changed,
                "removed": applied.removed,
                "latency_ms": latency,
                "at": self.wall(),
            }

    # -- heartbeat -------------------------------------------------------------

    def _check_ownership(self) -> None:
        """Runtime files can be deleted under us. A lock on an unlinked file
        no longer excludes a successor, so stop at once; a lost socket is
        simply bound again (we still hold the lock)."""
        assert self._lock is not None
        if not singleton.lock_intact(self.paths.lock, self._lock):
            self.owner = False
            self.stop_reason = "lock-file-lost"
            return
        if self.server is not None and not self.server.intact():
            self.server.close()
            try:
                if self.paths.socket_is_fallback:
                    rt.ensure_fallback_dir(self.paths)
                else:
                    rt.ensure_private_dir(self.paths.dir)
                self.server.start()
            except OSError as exc:
                self.stop_reason = "socket-lost"
                self._log("socket-lost", error=f"{type(exc).__name__}: {exc}")

    def _heartbeat(self) -> None:
        self._check_ownership()
        if self.stop_reason is not None:
            return
        self._drain_watcher()  # lets the backend retry lost roots / cookie folder
        self._check_mounts()  # a second chance for a missed mount notification
        mono, wall = self.clock(), self.wall()
        last_mono, last_wall = self._last_beat
        self._last_beat = (mono, wall)
        if (
            abs((wall - last_wall) - (mono - last_mono)) > GAP_SKEW_S
            or mono - last_mono > GAP_LATE_S
        ):
            # Suspend/resume or a clock jump: events may have been missed.
            self.dirty.request_rescan("heartbeat-gap", mono)
        if mono >= self.next_audit:
            self.dirty.request_rescan("audit", mono)
            self.next_audit = self._audit_due(mono)
        # The full fingerprint and digest of the config, and the fingerprints
        # of the folders root detection listed (a new OKF root appears beside
        # the watched scope roots, where no event reaches us).
        if self.engine.config_stamp() != self.config_stamp or self.engine.detection_changed(
            self.plan
        ):
            self._replan()
        self.rss = sysinfo.rss()
        if self.rss > self.plan.memory_ceiling:
            self.stop_reason = MEMORY_LIMIT
        elif mono - self.last_activity > self.plan.idle_seconds:
            self.stop_reason = "idle"
        self._write_status(self._lane())

    def _audit_due(self, now: float) -> float:
        audit = self.view.audit_seconds if self.view is not None else 300
        return now + audit * random.uniform(1 - AUDIT_JITTER, 1 + AUDIT_JITTER)

    # -- status ----------------------------------------------------------------

    def _lane(self) -> str:
        if self.stop_reason is not None:
            return "unavailable"
        if self.dirty.rescan_reason is not None or self.watcher.name == "poll":
            return "reconcile"
        if len(self.dirty):
            return "dirty"
        return "clean"

    def _status_record(self, lane: str) -> dict[str, Any]:
        mono, wall = self.clock(), self.wall()
        view = self.view
        keys = self.dirty.paths()
        pending = sysinfo.classify(
            keys, self.project.root, self.engine.indexed_among(keys) if keys else None
        )
        return {
            "version": 1,
            "pid": self.pid,
            "instance": self.instance,
            "started": self.started_wall,
            "lane": lane,
            "backend": self.watcher.name if self.watcher else None,
            "backend_reason": self.watcher.reason if self.watcher else None,
            "degraded": self.watcher.degraded if self.watcher else None,
            "generation": self.stats.generation,
            "plan": view.digest if view else None,
            "heartbeat": {"wall": wall, "monotonic": mono},
            "dirty_paths": len(self.dirty),
            "rescan_reason": self.dirty.rescan_reason,
            "pending": pending,
            "reconciles": self.stats.reconciles,
            "entries_visited_total": self.stats.entries_visited_total,
            "last_reconcile": self.stats.last_reconcile,
            "batches": self.stats.batches,
            "last_batch": self.stats.last_batch,
            "barriers": self.stats.barriers,
            "barrier_failures": self.stats.barrier_failures,
            "refused_peers": self.server.refused if self.server else 0,
            "last_error": self.stats.last_error,
            "unannounced": {
                "hard_links": self.links.status(),
                "file_watches": self.files.status(self.watcher),
                "mount_checks": self.mounts.checks if self.mounts else 0,
                "mount_changes": self.mounts.changes if self.mounts else 0,
            },
            "rss_bytes": self.rss,
            "physical_memory_bytes": sysinfo.physical_memory(),
            "memory_ceiling_bytes": view.memory_ceiling if view else None,
            "idle_seconds": view.idle_seconds if view else None,
            "socket": os.fspath(self.paths.socket),
            "stop_reason": self.stop_reason,
            "stopped": wall if self.stop_reason else None,
            "build": self.build,
            "queries": self.queries.status() if self.queries is not None else None,
        }

    def _write_status(self, lane: str) -> None:
        if not self.owner:  # a successor owns status.json now
            return
        with contextlib.suppress(OSError):
            rt.write_json(self.paths.status, self._status_record(lane))

    # -- shutdown --------------------------------------------------------------

    def _log(self, event: str, **fields: object) -> None:
        if self.log is not None:
            self.log.line(event, **fields)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.stop_reason is None:
            self.stop_reason = f"signal {signal.Signals(signum).name}"

    def _on_console_event(self, why: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = why

    def _drop_claim(self) -> None:
        """Remove the launcher's claim, but only the one naming our token."""
        if self.claim_token is None:
            return
        record = rt.read_json(self.paths.claim)
        if record is not None and record.get("token") == self.claim_token:
            with contextlib.suppress(OSError):
                os.unlink(self.paths.claim)

    def _shutdown(self) -> None:
        reason = self.stop_reason or "error"
        self.stop_reason = reason
        for waiter in self.cookies.drain():
            self._fail_barrier(waiter.conn, "daemon stopping")
        if self.queries is not None:
            self.queries.stop()  # a query under way: its client sees the socket close
        if self.server is not None:
            self.server.close()
        if self.watcher is not None:
            with contextlib.suppress(Exception):
                self.watcher.close()
        if self.mounts is not None:
            self.mounts.close()
        if self.owner:  # after losing the lock file these belong to a successor
            with contextlib.suppress(OSError):
                singleton.clear_folder(self.paths.cookies)
        self._write_status("unavailable")
        self._log("stop", reason=reason)
        if self.log is not None:
            self.log.close()
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)
        for sock in self._wake or ():
            sock.close()
        self.sel.close()
