"""The reconcile driver (ctindex/daemon/reconcile.py): a held index lock is a
build in progress, never an error; the work waits for the next trigger."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.backends.base import Watcher
from ctindex.client.control import watcher_status
from ctindex.client.daemon_requests import BarrierFailed, barrier, request
from ctindex.daemon.dirtyset import DirtySet
from ctindex.daemon.filewatch import FileWatches
from ctindex.daemon.layers import PlanView, RealEngine
from ctindex.daemon.links import LinkTracker
from ctindex.daemon.reconcile import BUSY_RETRY_S, Outcome, ReconcileDriver
from ctindex.daemon.schedule import Schedule
from ctindex.daemon.status import Stats
from ctindex.errors import IndexBusy
from ctindex.indexing.transaction import UpdateReport
from ctindex.ipc.runtime_dir import RuntimePaths
from ctindex.policy.project import Project
from ctindex.store.lock import update_lock
from tests.conftest import write_config
from tests.daemon_support import FakeEngine, forked_daemon, runtime_paths, wait_for


def live_status(paths: RuntimePaths) -> dict[str, Any] | None:
    with contextlib.suppress(BarrierFailed):
        status: dict[str, Any] = request(paths, {"op": "status"}, 1.0)["status"]
        return status
    return None


def test_startup_during_a_clients_build_reports_no_error(
    make_project: Callable[..., Path],
) -> None:
    """The client spawned the daemon and is building the index: the daemon's
    start-up pass meets the held index lock. That is a build in progress (no
    IndexBusy in last_error, which `ctindex status` would show), and the pass
    runs once the build is done."""
    root = make_project("acme_retail")
    write_config(root, idle_seconds=60, debounce_ms=50)
    project = Project.at(root)
    paths = runtime_paths(root)
    with contextlib.ExitStack() as build:
        build.enter_context(update_lock(project.index_dir))  # the client's build
        with forked_daemon(root, lambda: RealEngine(Project.at(root))):

            def tried() -> dict[str, Any] | None:
                status = live_status(paths)
                if status and (status.get("build_in_progress") or status["last_error"]):
                    return status
                return None

            during = wait_for(tried, timeout=30)
            assert during["last_error"] is None
            assert during["build_in_progress"] and during["reconciles"] == 0
            assert during["lane"] == "reconcile"  # the startup pass is still owed
            # ... and what `status` / `watch status` show says so.
            from ctindex.service.watcher_report import watcher_lines

            shown = watcher_status(project)
            assert shown["build_in_progress"] is True
            assert any(
                line.startswith("index build: another writer") for line in watcher_lines(shown)
            )
            # A barrier meanwhile fails over to the client's own path, naming why.
            with pytest.raises(BarrierFailed, match="index busy"):
                barrier(paths, during["plan"], 500)
            assert live_status(paths)["last_error"] is None  # type: ignore[index]

            build.close()  # the client's build is done

            def reconciled() -> dict[str, Any] | None:
                status = live_status(paths)
                return status if status and status["reconciles"] else None

            after = wait_for(reconciled, timeout=30)
            assert after["last_error"] is None and not after["build_in_progress"]
            assert after["last_reconcile"]["reason"] == "startup"
            assert barrier(paths, after["plan"], 5000).lane == "clean"


class BusyOnce(FakeEngine):
    """A fake whose first full pass meets another writer's lock."""

    busy: bool = True

    def reconcile(self, view: PlanView, *, lock_timeout: float = 0.0) -> UpdateReport:
        if self.busy:
            self.busy = False
            raise IndexBusy("update.lock: another writer held the update lock for more than 0 s")
        return super().reconcile(view, lock_timeout=lock_timeout)


def make_driver(tmp_path: Path, engine: FakeEngine, now: list[float]) -> ReconcileDriver:
    def clock() -> float:
        return now[0]

    return ReconcileDriver(
        engine,
        DirtySet(0.0),
        LinkTracker(str(tmp_path)),
        FileWatches(str(tmp_path)),
        Stats(),
        Schedule(clock, clock),
        clock,
        clock,
    )


def test_held_lock_keeps_the_work_and_retries_at_the_next_trigger(tmp_path: Path) -> None:
    engine = BusyOnce(tmp_path, tmp_path / "journal")
    now = [100.0]
    driver = make_driver(tmp_path, engine, now)
    view = engine.load_plan()
    watcher: Watcher = engine.open_watcher(view, "cookies")
    try:
        driver.dirty.request_rescan("startup", now[0])
        assert driver.apply(driver.dirty.take(), view, watcher) is Outcome.BUSY
        assert driver.stats.build_in_progress and driver.stats.last_error is None
        assert driver.dirty.rescan_reason == "startup"  # kept, reason and all
        assert not driver.due(now[0])  # no busy loop on the held lock
        now[0] += BUSY_RETRY_S
        assert driver.due(now[0])
        assert driver.apply(driver.dirty.take(), view, watcher) is Outcome.DONE
        assert not driver.stats.build_in_progress and driver.stats.reconciles == 1
        assert driver.stats.last_reconcile is not None
        assert driver.stats.last_reconcile["reason"] == "startup"
    finally:
        watcher.close()


def test_other_failures_are_errors_and_wait_longer(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path, tmp_path / "journal", fail_paths=True)
    now = [100.0]
    driver = make_driver(tmp_path, engine, now)
    view = engine.load_plan()
    watcher: Watcher = engine.open_watcher(view, "cookies")
    try:
        driver.dirty.add(["docs/a.md"], now[0])
        assert driver.apply(driver.dirty.take(), view, watcher) is Outcome.FAILED
        assert driver.stats.last_error == "OSError: [Errno 5] injected failure"
        assert not driver.stats.build_in_progress
        assert driver.dirty.paths() == ["docs/a.md"]
        now[0] += BUSY_RETRY_S
        assert not driver.due(now[0])
    finally:
        watcher.close()
