"""The watcher daemon: one process per project, one selector loop, no threads.

Everything happens on one thread on purpose: the watcher fd, the listening
socket, client sockets and a signal wake-up socket all go through one
selector, so there is no locking between "events read" and "barrier answered"
(the order of those two is the whole point of the barrier).

Order of startup (docs/daemon.md, "Daemon lifecycle"): take the lock (the only authority), open the
watcher *before* the initial full reconciliation (so nothing that changes
during it is missed), bind the socket, then drop the launcher's claim.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ctindex.backends.base import Watcher
from ctindex.daemon import ops, singleton, sysinfo
from ctindex.daemon.barrier import Barrier, Cookies, Waiter
from ctindex.daemon.console_events import ConsoleEvents
from ctindex.daemon.dirtyset import DirtySet, Pending
from ctindex.daemon.filewatch import FileWatches
from ctindex.daemon.layers import ConfigStamp, Engine, PlanView
from ctindex.daemon.links import LinkTracker
from ctindex.daemon.log import LifecycleLog
from ctindex.daemon.query import QueryService, SearchCommand
from ctindex.daemon.reconcile import Outcome, ReconcileDriver
from ctindex.daemon.schedule import Schedule
from ctindex.daemon.search_op import SearchOp
from ctindex.daemon.server import Connection, IpcServer
from ctindex.daemon.share_barrier import (
    SHARE_KEY,
    ShareHost,
    ShareRequest,
    open_folder_watcher,
)
from ctindex.daemon.share_updates import RUN_KEY, ShareUpdates
from ctindex.daemon.signals import SignalWake
from ctindex.daemon.status import Identity, Stats, StatusRecord, StatusWriter
from ctindex.daemon.storeguard import StoreGuard
from ctindex.daemon.watching import MOUNTS_KEY, WATCHER_KEY, WatchSlot
from ctindex.errors import PolicyError
from ctindex.ipc.build_id import build_id
from ctindex.ipc.records import read_record
from ctindex.ipc.runtime_dir import RuntimePaths, ensure_fallback_dir, ensure_runtime_dir
from ctindex.ipc.share_channel import Request
from ctindex.ipc.spawn_failure import STOPPED_PREFIX, record_spawn_failure

if TYPE_CHECKING:
    from ctindex.ipc.protocol import BarrierRequest, Message
from ctindex.policy.project import Project, is_index_key

POLL_WAIT_S = 0.05  # poll-lane watcher has no fd: how often to look for cookies
MEMORY_LIMIT = "memory-limit"  # stop reason above the memory ceiling


class Daemon:
    def __init__(
        self,
        project: Project,
        paths: RuntimePaths,
        engine: Engine,
        claim_token: str | None = None,
        *,
        successor: bool = False,
        stay: bool = False,
        search: SearchCommand | None = None,
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
        # Run by a service manager (`watch start --foreground`): no idle exit.
        self.stay = stay
        # The CLI's `search` the query worker answers with (ctindex/daemon/query.py);
        # None: every search is declined and its client answers it itself.
        self._search_command = search
        self.clock = clock
        self.wall = wall
        self.stop_reason: str | None = None
        self.instance = secrets.token_hex(8)  # identity: a PID alone is not
        self.build = build_id()  # the code this process runs (computed at start)
        self.pid = os.getpid()
        self.log: LifecycleLog | None = None
        self.sel = selectors.DefaultSelector()
        self.server: IpcServer | None = None
        self.view: PlanView | None = None
        self.dirty = DirtySet(0.15)
        self.stats = Stats()
        self.schedule = Schedule(clock, wall)
        self.last_activity = clock()
        self.config_stamp: ConfigStamp | None = None  # taken before the plan was read
        self.rss: int | None = None
        # Changes no event announces (docs/daemon.md): files with several
        # names, and mounts made or removed inside (or above) a scope.
        self.links = LinkTracker(os.fspath(project.root))
        # ... and every indexed file watched itself (ctindex/daemon/filewatch.py).
        self.files = FileWatches(os.fspath(project.root))
        self.watch = WatchSlot(
            self.sel,
            project.root,
            self.files,
            lambda cookie_key: engine.open_watcher(self.plan, cookie_key),
        )
        self.driver = ReconcileDriver(
            engine,
            self.dirty,
            self.links,
            self.files,
            self.stats,
            self.schedule,
            clock,
            wall,
            StoreGuard(Path(project.index_dir)),
            self._log,
        )
        self.barrier = Barrier(
            self,
            Cookies(paths.cookies, paths.dir, self.instance),
            self.driver,
            self.dirty,
            self.stats,
            clock,
        )
        # The barrier through the share, for clients on other hosts
        # (ctindex/daemon/share_barrier.py, docs/network-shares.md).
        self.share = ShareHost(
            project.root,
            Path(project.index_dir),
            self.instance,
            lambda key: open_folder_watcher(project.root, key),
            self._share_request,
            wall,
            self.build,
            start_write=self._share_write,
            log=self._log,
        )
        # ... and updates or rebuilds those clients ask it to run
        # (ctindex/daemon/share_updates.py).
        self.share_runs = ShareUpdates(
            self.share, project.root, self.sel, clock, self._share_published, self._log
        )
        self.status = StatusWriter(
            Identity(self.pid, self.instance, wall(), self.build, os.fspath(paths.socket)),
            paths.status,
            project.root,
            self.stats,
            self.dirty,
            self.links,
            self.files,
            engine.indexed_among,
            clock,
            wall,
        )
        self._wake: SignalWake | None = None
        # Windows console control events (ctindex/daemon/console_events.py)
        self.console = ConsoleEvents(self._on_console_event, self._poke)
        self._lock: IO[str] | None = None
        self.queries: QueryService | None = None  # the query worker (ctindex/daemon/query.py)
        self.search: SearchOp | None = None  # the `search` op (ctindex/daemon/search_op.py)

    @property
    def plan(self) -> PlanView:
        assert self.view is not None, "plan used before load"
        return self.view

    @property
    def watcher(self) -> Watcher:
        return self.watch.watcher

    def run(self) -> str | None:
        """Serve until a stop condition; return the stop reason, or None when
        another process holds the lock (then nothing was touched)."""
        os.umask(0o077)
        ensure_runtime_dir(self.paths)
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
                # crosses the ceiling again: back off like a failed spawn (a
                # later query may start a fresh one; not every one may).
                record_spawn_failure(self.paths, STOPPED_PREFIX + MEMORY_LIMIT)
        except BaseException as exc:  # exceptional exit: log detail, never content
            self.stop_reason = self.stop_reason or "error"
            self._log("exit", error=f"{type(exc).__name__}: {exc}", where=sysinfo.where(exc))
            # Make clients back off: a daemon that crashes on every start (or soon
            # after) must not be relaunched by every query.
            stage = "daemon start" if self.server is None else "daemon crashed"
            record_spawn_failure(self.paths, f"{stage}: {type(exc).__name__}: {exc}")
        finally:
            self._shutdown()
            lock.close()  # releases the OS lock last: status is final by now
            self.console.finished()  # a Windows close/logoff/shutdown may now end us
        return self.stop_reason

    # -- startup and loop ------------------------------------------------------

    def _serve(self) -> None:
        self._wake = SignalWake(self._stop)
        self._wake.install()
        self.sel.register(self._wake.socket, selectors.EVENT_READ, "wake")
        self.console.install()  # Windows console control events (console_events.py)

        # Stamp, then read: a config changed in between leaves the stamp older
        # than the plan, so the next check re-plans (never the reverse).
        self.config_stamp = self.engine.config_stamp()
        self.view = self.engine.load_plan()
        if not self.view.watch:  # configured off since the launch: nothing to serve
            self.stop_reason = "watch-disabled"
            self._drop_claim()
            return
        self._use_plan(self.view)
        self.schedule.audit_after(self.clock())
        self.last_activity = self.clock()
        cookies = os.path.relpath(self.paths.cookies, self.project.root)
        singleton.repair_folder(self.paths.cookies, self.paths.dir)
        singleton.clear_folder(self.paths.cookies)
        self.watch.open(cookies.replace(os.sep, "/"))
        if self.paths.socket_is_fallback:
            ensure_fallback_dir(self.paths)
        server = IpcServer(
            self.paths.socket, self.sel, self._on_request, self.clock, {"build": self.build}
        )
        server.start()
        self.server = server
        self._open_share()
        self.queries = QueryService(
            self.project.root, self.project.index_dir, self._wake.poke, self._search_command
        )
        self.search = SearchOp(
            self, self.queries, self.driver, self.stats, self.instance, self.clock
        )
        self._drop_claim()
        self._log("start", backend=self.watcher.name, socket=self.paths.socket)
        self.dirty.request_rescan("startup")
        self._write_status("reconcile")
        # A client may be building the index right now (it spawned us, then
        # started its own build): then this pass finds the lock held and is
        # tried again at the next heartbeat, without an error (reconcile.py).
        self.apply(self.dirty.take(), lock_wait=0.0)
        self.schedule.restart()
        self._heartbeat()
        while self.stop_reason is None:
            self._tick()

    def _tick(self) -> None:
        now = self.clock()
        timeout = max(0.0, self._next_wakeup(now) - now)
        for key, mask in self.sel.select(timeout):
            if key.data == WATCHER_KEY:
                self.drain_watcher()
            elif key.data == MOUNTS_KEY:
                self.check_mounts()
            elif key.data == SHARE_KEY:
                self.share.read()
            elif key.data == RUN_KEY:
                self.share_runs.read()
            elif key.data == "wake" and self._wake is not None:
                self._wake.drain()
            elif self.server is not None:
                self.server.on_event(key.data, mask)
        if self.stop_reason is not None:
            return
        if self.share.polled:
            self.share.read()
        now = self.clock()
        if self.barrier and self.watch.polled():
            self.drain_watcher()
        self.barrier.expire(now)
        self.barrier.answer()
        if self.search is not None:
            self.search.answer_finished(now)
        if self.server is not None:
            self.server.expire(now)
        if self.driver.due(now):
            self.apply(self.dirty.take(), lock_wait=0.0)
        trim_due = self.driver.trim_due
        if trim_due is not None and now >= trim_due and not self.barrier:
            self.driver.trim_due = None
            sysinfo.release_memory()
        if self.schedule.beat_due(now):
            self._heartbeat()

    def _next_wakeup(self, now: float) -> float:
        times = [self.schedule.next_beat()]
        if self.driver.trim_due is not None:
            times.append(self.driver.trim_due)
        if (work_due := self.driver.deadline()) is not None:
            times.append(work_due)
        if self.server is not None and (server_due := self.server.next_deadline()) is not None:
            times.append(server_due)
        if self.queries is not None and (query_due := self.queries.deadline()) is not None:
            times.append(query_due)
        if self.share.polled:
            times.append(now + POLL_WAIT_S)
        waiting = self.barrier.deadline()
        if waiting is not None:
            times.append(waiting)
            if self.watch.polled():
                times.append(now + POLL_WAIT_S)
        return min(times)

    def _stop(self, reason: str) -> None:
        """A signal: the first stop reason wins."""
        if self.stop_reason is None:
            self.stop_reason = reason

    # -- applying changes ------------------------------------------------------

    def apply(self, pending: Pending, *, lock_wait: float) -> Outcome:
        """The driver's pass, and what the loop does with its outcome."""
        outcome = self.driver.apply(pending, self.plan, self.watcher, lock_wait=lock_wait)
        if outcome is Outcome.POLICY_ERROR:
            self.stop_reason = "policy-error"
            self._log("policy-error", detail=self.driver.policy_error)
        elif outcome is Outcome.DONE and (pending.rescan or pending.paths):
            self._write_status(self.lane())
        elif outcome is Outcome.BUSY:
            self._write_status(self.lane())  # says build_in_progress
        return outcome

    # -- watcher ---------------------------------------------------------------

    def check_mounts(self, reread: bool = False) -> None:
        """A mount or unmount inside or above a scope: nothing announced it
        to the watches (the folders they hold are now hidden, or the new
        ones have none), and the filesystem type may call for the poll lane.
        So the watcher is opened anew (classification and watches) and every
        scope is reconciled. Waiting barriers are then satisfied by that full
        pass, which starts after their requests; their cookie events were
        in the closed watcher. `reread` reads the table even when the
        kernel's change counter says it is unchanged (ctindex/backends/mounts.py)."""
        if not self.watch.mounts_changed(reread):
            return
        with contextlib.suppress(Exception):
            self.drain_watcher()  # cookies and events read so far still count
        self.watch.reopen()
        self.dirty.request_rescan("mount-changed", self.clock())
        self.barrier.cookies.all_seen()

    def drain_watcher(self) -> None:
        batch = self.watch.read()
        now = self.clock()
        if batch.rescan:
            self.dirty.request_rescan(batch.reason or "rescan", now)
        if batch.paths:
            # Our own index writes must never feed back as content changes.
            self.dirty.add((k for k in batch.paths if not is_index_key(k)), now)
        if batch.cookies:
            self.barrier.cookies.seen(batch.cookies)

    def _use_plan(self, view: PlanView) -> None:
        self.view = view
        self.dirty.debounce_s = view.debounce_ms / 1000
        self.schedule.audit_seconds = view.audit_seconds

    def replan(self) -> None:
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
        self._use_plan(view)
        self.config_stamp = stamp
        if changed:
            self.watch.reopen()
            self.dirty.request_rescan("plan-changed", self.clock())
            self.links.learn({}, True, ())  # the new plan's full pass refills it

    def plan_outdated(self) -> bool:
        """The config's fingerprint and bytes, and the folders root detection
        listed, as on every heartbeat (never another plan's answer)."""
        return self.engine.config_stamp() != self.config_stamp or self.engine.detection_changed(
            self.plan
        )

    # -- requests and barriers -------------------------------------------------

    def _on_request(self, conn: Connection, request: Message) -> None:
        ops.serve(self, conn, request, self.clock())

    def reply(self, conn: Connection, answer: Mapping[str, object]) -> None:
        """Answer a request (ctindex/daemon/ops.py's handlers)."""
        assert self.server is not None
        self.server.reply(conn, answer)

    def decline(self, conn: Connection, reason: str) -> None:
        """A query not answered here: its client answers it itself."""
        if self.search is not None:
            self.search.decline(conn, reason)
        else:
            self.reply(conn, {"ok": False, "declined": True, "error": reason})

    def status_record(self) -> StatusRecord:
        """What `status` answers: the record the heartbeat writes, as of now."""
        return self._status_record(self.lane())

    def retire(self, conn: Connection, theirs: object) -> None:
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

    def start_barrier(self, conn: Connection, request: BarrierRequest, now: float) -> None:
        self.stats.barriers += 1
        digest = request["plan"]
        config = request["config"]  # the config file's stat as the client saw it
        have = self.config_stamp.stat if self.config_stamp is not None else "absent"
        if (digest is not None and digest != self.plan.digest) or (
            config is not None and config != have
        ):
            self.replan()  # the client sees a different plan: ours may be stale
            if self.stop_reason is not None:
                self.barrier.fail(conn, f"daemon stopping: {self.stop_reason}")
                return
        self.barrier.start(conn, request["timeout_ms"], now)

    def _open_share(self) -> None:
        """Serve barriers through the share; a store nobody can write into
        (read-only) serves none, and says so in the log."""
        try:
            self.share.open(self.sel)
        except OSError as exc:
            self.share.close(self.sel)
            self._log("share-barrier-off", error=f"{exc.strerror or exc}")

    def _share_request(
        self, req: ShareRequest, request: Mapping[str, object], _seen: float
    ) -> None:
        """A client on another host asked through the share: a barrier like
        any other, answered into its file."""
        now = self.clock()
        self.last_activity = now
        # The plan is checked by its stamps (local stats), not by the digest
        # the client sent: a client may trust the digest this answer names
        # without loading the plan (ctindex/query/freshness.py), so it must be
        # current as of the request; and a digest alone must not make every
        # request cost a plan load (anyone able to write into the share
        # could send one).
        if self.plan_outdated():
            self.replan()
            if self.stop_reason is not None:
                self.barrier.fail(req, f"daemon stopping: {self.stop_reason}")
                return
        self.stats.barriers += 1
        self.barrier.start(req, request.get("timeout_ms"), now)

    def _share_write(self, req: ShareRequest, request: Request, now: float) -> None:
        """A client on another host asks for an `update` or `rebuild`: run
        here, under this host's lock, for a client of this build and plan."""
        self.last_activity = now
        if self.plan_outdated():
            self.replan()
        if self.stop_reason is not None:
            req.respond({"ok": False, "error": f"daemon stopping: {self.stop_reason}"})
        elif request.build != self.build:
            req.respond(
                {"ok": False, "error": f"share host runs another build ({self.build[:12]})"}
            )
        elif request.plan != self.plan.digest:
            req.respond({"ok": False, "error": "share host has a different plan"})
        else:
            self.share_runs.add(req)

    def _share_published(self) -> dict[str, object]:
        """After a run through the share: the generation it published, as
        the daemon vouches for it from now on (its store check learns it)."""
        from ctindex.store.durable import IndexCorrupt
        from ctindex.store.generation import read_manifest

        self.driver.check_store()
        try:
            m = read_manifest(Path(self.project.index_dir))
        except (IndexCorrupt, OSError) as exc:
            return {"error": f"index unreadable after the run: {exc}"}
        if m is None:
            return {"error": "no index after the run"}
        self.stats.generation = m.generation
        return {"generation": m.generation, "identity": m.identity, "plan": m.plan_digest}

    def answer_search(self, waiter: Waiter, outcome: Outcome) -> None:
        assert self.search is not None
        self.search.barrier_done(waiter, outcome)

    # -- heartbeat -------------------------------------------------------------

    def _check_ownership(self) -> None:
        """Runtime files can be deleted under us. A lock on an unlinked file
        no longer excludes a successor, so stop at once; a lost socket is
        simply bound again (we still hold the lock)."""
        assert self._lock is not None
        if not singleton.lock_intact(self.paths.lock, self._lock):
            self.status.owner = False  # a successor owns status.json now
            self.stop_reason = "lock-file-lost"
            return
        if self.server is not None and not self.server.intact():
            self.server.close()
            try:
                if self.paths.socket_is_fallback:
                    ensure_fallback_dir(self.paths)
                else:
                    ensure_runtime_dir(self.paths)
                self.server.start()
            except OSError as exc:
                self.stop_reason = "socket-lost"
                self._log("socket-lost", error=f"{type(exc).__name__}: {exc}")

    def _heartbeat(self) -> None:
        self._check_ownership()
        if self.stop_reason is not None:
            return
        self.drain_watcher()  # lets the backend retry lost roots / cookie folder
        self.check_mounts(reread=True)  # a second chance, trusting no counter
        beat = self.schedule.beat()
        mono = self.clock()
        if beat.gap:  # suspend/resume or a clock jump: events may have been missed
            self.dirty.request_rescan("heartbeat-gap", mono)
        if beat.audit:
            self.dirty.request_rescan("audit", mono)
        # The full fingerprint and digest of the config, and the fingerprints
        # of the folders root detection listed (a new OKF root appears beside
        # the watched scope roots, where no event reaches us).
        if self.plan_outdated():
            self.replan()
        # A store restored or copied in while nobody asks is rebuilt now,
        # not at the next query (ctindex/daemon/storeguard.py).
        self.driver.check_store()
        if self.driver.store_in_doubt:
            self.dirty.request_rescan("store-check", mono)
        self.share.beat(self.plan.share_barrier_ms)  # clients on other hosts read it first
        self.share_runs.beat()
        if self.share_runs.busy:
            self.last_activity = mono  # a run asked through the share is activity
        self.rss = sysinfo.rss()
        if self.rss > self.plan.memory_ceiling:
            self.stop_reason = MEMORY_LIMIT
        elif not self.stay and mono - self.last_activity > self.plan.idle_seconds:
            self.stop_reason = "idle"
        self._write_status(self.lane())

    # -- status ----------------------------------------------------------------

    def lane(self) -> str:
        if self.stop_reason is not None:
            return "unavailable"
        if self.dirty.rescan_reason is not None or self.watcher.name == "poll":
            return "reconcile"
        if len(self.dirty):
            return "dirty"
        return "clean"

    def _status_record(self, lane: str) -> StatusRecord:
        return self.status.record(
            lane,
            watcher=self.watch.current,
            view=self.view,
            mounts=self.watch.mounts,
            refused_peers=self.server.refused if self.server else 0,
            rss=self.rss,
            stop_reason=self.stop_reason,
            queries=self.queries.status() if self.queries is not None else None,
        )

    def _write_status(self, lane: str) -> None:
        self.status.write(self._status_record(lane))

    # -- shutdown --------------------------------------------------------------

    def _log(self, event: str, **fields: object) -> None:
        if self.log is not None:
            self.log.line(event, **fields)

    def _on_console_event(self, why: str) -> None:
        self._stop(why)

    def _poke(self) -> None:
        """Wake the loop from another thread (the signal wake-up socket)."""
        if self._wake is not None:
            self._wake.poke()

    def _drop_claim(self) -> None:
        """Remove the launcher's claim, but only the one naming our token."""
        if self.claim_token is None:
            return
        record = read_record(self.paths.claim)
        if record is not None and record.get("token") == self.claim_token:
            with contextlib.suppress(OSError):
                os.unlink(self.paths.claim)

    def _shutdown(self) -> None:
        reason = self.stop_reason or "error"
        self.stop_reason = reason
        self.barrier.drain("daemon stopping")
        if self.queries is not None:
            self.queries.stop()  # a query under way: its client sees the socket close
        if self.server is not None:
            self.server.close()
        self.watch.close()
        self.share_runs.close(f"daemon stopping: {reason}")
        self.share.close(self.sel)
        if self.status.owner:  # after losing the lock file these belong to a successor
            with contextlib.suppress(OSError):
                singleton.clear_folder(self.paths.cookies)
        self._write_status("unavailable")
        self._log("stop", reason=reason)
        if self.log is not None:
            self.log.close()
        if self._wake is not None:
            self._wake.close()
        self.sel.close()
