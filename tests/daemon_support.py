"""Helpers for the daemon tests: a fake engine (real watcher, recorded
reconciliations, no index) and a forked daemon runner that always cleans up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ctindex.backends import open_watcher
from ctindex.client.control import watcher_status
from ctindex.daemon.layers import ConfigStamp, PlanView
from ctindex.indexing.transaction import UpdateReport
from ctindex.ipc import protocol
from ctindex.ipc.peer import no_peer_check
from ctindex.ipc.runtime_dir import RuntimePaths
from ctindex.ipc.spawn_failure import clear_spawn_failure
from ctindex.policy.project import Project
from ctindex.reconciler.fingerprint import fingerprint_of


@dataclass
class FakeEngine:
    """Records every reconciliation as a JSON line in `journal`."""

    root: Path
    journal: Path
    _: KW_ONLY
    digest: str = "plan-1"
    idle_seconds: int = 60
    ceiling: int = 1 << 40
    debounce_ms: int = 30
    roots: tuple[str, ...] = ("docs",)
    fail_paths: bool = False
    audit_seconds: int = 300
    poll: bool = False
    plan_file: Path | None = None  # "<digest> <watch 0|1>" read on every load
    gen: int = field(default=0, init=False)

    def load_plan(self) -> PlanView:
        digest, watch = self.digest, True
        if self.plan_file is not None:
            text, flag = self.plan_file.read_text().split()
            digest, watch = text, flag == "1"
        return PlanView(
            None,
            digest,
            self.debounce_ms,
            self.audit_seconds,
            self.idle_seconds,
            self.ceiling,
            500,
            watch,
        )

    def open_watcher(self, view: PlanView, cookie_key: str) -> Any:
        return open_watcher(
            self.root,
            list(self.roots),
            lambda key: True,
            cookie_key,
            force_poll="test: poll lane" if self.poll else None,
        )

    def _note(self, record: dict[str, Any]) -> None:
        with open(self.journal, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def reconcile(self, view: PlanView, *, lock_timeout: float = 0.0) -> UpdateReport:
        self.gen += 1
        self._note({"full": True, "generation": self.gen})
        return UpdateReport(self.gen, entries_visited=7)

    def reconcile_paths(
        self, view: PlanView, keys: list[str], *, lock_timeout: float = 0.0
    ) -> UpdateReport:
        if self.fail_paths:
            raise OSError(5, "injected failure")
        self.gen += 1
        self._note({"full": False, "keys": keys, "generation": self.gen})
        return UpdateReport(self.gen, changed=len(keys))

    def config_stamp(self) -> ConfigStamp | None:
        if self.plan_file is None:
            return None
        return ConfigStamp(list(fingerprint_of(self.plan_file.stat())), None)

    def detection_changed(self, view: PlanView) -> bool:
        return False  # the fake's roots are fixed

    def indexed_among(self, keys: list[str]) -> None:
        return None


def journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def runtime_paths(root: Path) -> RuntimePaths:
    return RuntimePaths.for_project(Project.at(root))


def require_daemon() -> None:
    """Skip the calling test where the daemon is disabled by design: no peer
    credential check (CTINDEX_SIMULATE=no-peercred, or a platform without
    SO_PEERCRED and getpeereid; docs/decisions/portability.md). Called by
    every helper here that starts or waits for a daemon, so a test that needs
    one is skipped there without having to carry a marker."""
    reason = no_peer_check()
    if reason is not None:
        pytest.skip(f"needs peercred: {reason}")


def fork_daemon(root: Path, make_engine: Callable[[], Any], **daemon_kwargs: Any) -> int:
    """Run a Daemon with a fake engine in a forked child; returns its pid."""
    require_daemon()  # clients would refuse to talk to it
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 0
        try:
            from ctindex.daemon.lifecycle import Daemon

            project = Project.at(root)
            Daemon(project, RuntimePaths.for_project(project), make_engine(), **daemon_kwargs).run()
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return pid


@contextlib.contextmanager
def forked_daemon(
    root: Path, make_engine: Callable[[], Any], **daemon_kwargs: Any
) -> Iterator[int]:
    """fork_daemon for the length of a block: SIGTERM and reaped when it ends."""
    pid = fork_daemon(root, make_engine, **daemon_kwargs)
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        reap(pid)


PATIENT_ACK_S = 60.0  # only a hang guard: a live daemon acknowledges long before


def be_patient_for_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients of this test, in its process and every one it starts, wait
    for a live daemon's ACK up to the request's own bound instead of the
    usual 0.4 s (protocol.ACK_WAIT_ENV): on a loaded machine a daemon may
    read a request later, and the answer would be a fallback. For tests
    that assert a live daemon's answer, never for those that stop one to
    see it told apart."""
    monkeypatch.setenv(protocol.ACK_WAIT_ENV, str(PATIENT_ACK_S))


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, step: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(step)


def reap(pid: int, timeout: float = 10.0) -> int | None:
    """Wait for a forked child; SIGKILL it if it does not exit in time.
    Returns its wait status, or None when it had to be killed (or was gone)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return None


# -- real CLI projects (acceptance tests) ---------------------------------------

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "fixtures" / "okf-bundles"
# Short lifecycle settings for tests; the fixture teardown kills leftovers anyway.
# A generous barrier budget: on a loaded 2-core machine a 500 ms barrier can
# time out, which is correct behaviour (fallback) but not what most tests probe.
TEST_CONFIG = {"version": 1, "idle_seconds": 60, "debounce_ms": 50, "barrier_timeout_ms": 5000}


class CliProject:
    """A temporary project with copied bundles, driven through `python -m ctindex`."""

    def __init__(
        self,
        root: Path,
        bundles: tuple[str, ...] = ("acme_retail", "ga4"),
        config: dict[str, Any] | None = None,
    ) -> None:
        import shutil

        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / ".git").mkdir(exist_ok=True)
        for name in bundles:
            shutil.copytree(CORPUS / name, root / name)
        self.write_config({**TEST_CONFIG, **(config or {})})
        self.paths = RuntimePaths.for_project(Project.at(root))

    def write_config(self, config: dict[str, Any]) -> None:
        (self.root / ".ct").mkdir(exist_ok=True)
        (self.root / ".ct" / "index.jsonc").write_text(json.dumps(config))

    def cli(self, *args: str, env: dict[str, str] | None = None) -> Any:
        import subprocess
        import sys

        done = subprocess.run(
            [sys.executable, "-m", "ctindex", "-C", str(self.root), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        # `watch status` says "not running" with 3, as systemctl does (docs/cli.md).
        allowed = (0, 1, 3) if args[:2] == ("watch", "status") else (0, 1)
        assert done.returncode in allowed, done.stderr
        return done

    def search(self, query: str, *, direct: bool = False) -> dict[str, Any]:
        args = ["--json", "search", query, "--limit", "1000"]
        doc: dict[str, Any] = json.loads(self.cli(*args, *(["--direct"] if direct else [])).stdout)
        return doc

    def hits(self, doc: dict[str, Any]) -> list[str]:
        return sorted(r["path"] for r in doc["results"])

    def check(self, query: str) -> dict[str, Any]:
        """Indexed search whose results equal --direct's; returns its freshness."""
        indexed = self.search(query)
        assert self.hits(indexed) == self.hits(self.search(query, direct=True)), query
        fresh: dict[str, Any] = indexed["freshness"]
        return fresh

    def status(self) -> dict[str, Any]:

        return watcher_status(Project.at(self.root))

    def daemon_pids(self) -> list[int]:
        """Live daemon processes for this project (zombies excluded)."""
        import psutil

        found = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            cmd = proc.info["cmdline"] or []
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if "ctindex.daemon" in cmd and str(self.root) in cmd:
                found.append(proc.pid)
        return found

    def wait_daemon(self, timeout: float = 20.0) -> dict[str, Any]:
        """Wait until a daemon answers and has finished its startup pass."""
        require_daemon()  # none is ever spawned: it would time out

        def ready() -> dict[str, Any] | None:
            doc = self.status()
            return doc if doc["responsive"] and doc["reconciles"] else None

        found: dict[str, Any] = wait_for(ready, timeout)
        return found

    def wait_plan_record(self, query: str = "margin", timeout: float = 20.0) -> Path:
        """Search until the fast path's plan record exists, and return it.
        Each slow-path search writes it only when what the plan depends on
        was stable when read (ctindex/policy/plan_record.py `remember`): on
        a loaded machine the first one may not, so this waits for the
        record by searching again, not for a time."""
        from ctindex.policy.plan_record import RECORD_NAME

        record = self.paths.dir / RECORD_NAME

        def written() -> bool:
            if not record.exists():
                self.search(query)
            return record.exists()

        wait_for(written, timeout, 0.2)
        return record

    def wait_gone(self, timeout: float = 20.0) -> None:
        wait_for(lambda: not self.daemon_pids(), timeout)

    def log_lines(self) -> list[str]:
        return self.paths.log.read_text().splitlines() if self.paths.log.exists() else []

    def kill_daemons(self) -> None:
        for pid in self.daemon_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        clear_spawn_failure(self.paths)
