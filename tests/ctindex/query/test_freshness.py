"""ctindex/query/freshness.py: the one entry point's decisions.

Real projects and real sockets: a real daemon for the healthy case, and for
the failures small Unix-socket listeners of our own that never answer,
refuse, or answer as another build. `spawn` is replaced by a
recorder where a test asks whether a daemon would be started.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctindex.client import spawn as spawn_module
from ctindex.client import unanswered
from ctindex.client.daemon_requests import BARRIER_TIMEOUT, BUILD_MISMATCH
from ctindex.ipc.build_id import build_id
from ctindex.ipc.protocol import BarrierResult
from ctindex.ipc.runtime_dir import RuntimePaths, ensure_private_dir
from ctindex.policy.plan import Plan, load_plan
from ctindex.policy.project import Project
from ctindex.query import freshness, statement
from ctindex.query.cimode import CI_REASON
from ctindex.search.execute import Vouched
from ctindex.store.generation import StoreManifest, read_manifest
from ctindex.store.snapshot import Snapshot
from tests.daemon_support import CliProject

Make = Callable[..., CliProject]


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI mode is the environment's: only the test that is about it sets it.
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CTINDEX_WATCH", raising=False)


@pytest.fixture
def spawns(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every daemon start the freshness step asks for (successor flag); none happens."""
    asked: list[bool] = []

    def spawn(root: Path, paths: RuntimePaths, *, successor: bool = False, **_: bool) -> None:
        asked.append(successor)

    monkeypatch.setattr(spawn_module, "spawn", spawn)
    return asked


def generation_of(snap: Snapshot) -> int:
    return snap.generation


def answer(
    p: CliProject, options: freshness.Options = freshness.DEFAULT_OPTIONS
) -> freshness.Answered[int]:
    """The entry point as a consumer calls it; the answer is the generation read."""
    project = Project.at(p.root)
    return freshness.fresh_answer(
        project, lambda: load_plan(project), generation_of, options=options
    )


@contextlib.contextmanager
def listener(
    p: CliProject, reply: Callable[[dict[str, object]], dict[str, object] | None] | None
) -> Iterator[None]:
    """A Unix socket where the daemon's would be. `reply` None: connections
    are queued by the kernel and never accepted (a stuck daemon); `reply`
    returning None: the request is acknowledged (as a live daemon's loop
    does at once) and never answered (a daemon still working)."""
    import socket

    ensure_private_dir(p.paths.dir)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(p.paths.socket))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        assert reply is not None
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                if data:
                    request = json.loads(data.partition(b"\n")[0])
                    answer = reply(request)
                    if answer is None:
                        conn.sendall(b'{"ack":true}\n')
                        stop.wait(10)
                        continue
                    conn.sendall((json.dumps(answer) + "\n").encode())

    thread = threading.Thread(target=serve, daemon=True) if reply is not None else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join(5)
        server.close()
        p.paths.socket.unlink(missing_ok=True)


def published(p: CliProject) -> int:
    from ctindex.store.generation import read_manifest

    m = read_manifest(p.root / ".ct" / "okf")
    assert m is not None
    return m.generation


# -- the trust test -------------------------------------------------------------


def barrier_result(**facts: object) -> BarrierResult:
    base: dict[str, object] = {
        "generation": 7,
        "instance": "i",
        "lane": "clean",
        "backend": "inotify",
        "backend_reason": None,
        "degraded": None,
        "reconciled": False,
        "reconcile_reason": None,
        "reconcile_ms": None,
        "barrier_ms": 1.5,
    }
    return BarrierResult(**{**base, **facts})  # type: ignore[arg-type]


def test_judge_native_events_are_watcher_clean() -> None:
    verdict = freshness.judge(barrier_result())
    assert verdict.proven == statement.Freshness("watcher-clean", None, 7, barrier_ms=1.5)
    assert verdict.proven.plain_clean


def test_judge_a_full_pass_the_daemon_reports_is_worded() -> None:
    verdict = freshness.judge(
        barrier_result(reconciled=True, reconcile_reason="overflow", reconcile_ms=9.0)
    )
    assert verdict.proven is not None and not verdict.proven.plain_clean
    assert verdict.proven.mode == "watcher-clean"
    assert verdict.proven.reason == "reconciled by the daemon: overflow"
    assert verdict.proven.reconcile_ms == 9.0


def test_judge_poll_lane_or_degraded_watcher_is_never_watcher_clean() -> None:
    poll = freshness.judge(barrier_result(backend="poll", backend_reason="nfs", reconciled=True))
    assert poll.proven is not None and poll.proven.mode == "fallback"
    assert poll.proven.reason == "unreliable filesystem: nfs"
    degraded = freshness.judge(barrier_result(degraded="queue overflow"))
    assert degraded.proven is None  # no full pass behind it: the query reconciles itself
    assert degraded.reconcile_reason == "unreliable filesystem: queue overflow"


# -- the entry point -------------------------------------------------------------


def test_healthy_daemon_is_watcher_clean_with_the_generation_read(
    cli_project: CliProject, spawns: list[bool]
) -> None:
    p = cli_project
    p.check("margin")  # starts the daemon (a real one: the CLI's own spawn)
    p.wait_daemon()
    got = answer(p)
    assert got.freshness.mode == "watcher-clean" and got.freshness.reason is None
    assert got.freshness.barrier_ms is not None
    assert got.freshness.generation == got.value == published(p)
    assert spawns == []


def test_watch_off_reconciles_on_query(make_cli_project: Make, spawns: list[bool]) -> None:
    p = make_cli_project(config={"watch": False})
    got = answer(p)
    assert (got.freshness.mode, got.freshness.reason) == ("reconcile-on-query", "watch disabled")
    assert got.freshness.generation == got.value == published(p)
    assert got.freshness.reconcile_ms is not None
    assert spawns == []


# needs("peercred"): the reasons asserted are those of a platform where a
# daemon may run; without a peer check every one is "daemon disabled".
@pytest.mark.needs("peercred")
def test_no_daemon_reconciles_and_starts_one_for_the_next_query(
    cli_project: CliProject, spawns: list[bool]
) -> None:
    got = answer(cli_project)
    assert (got.freshness.mode, got.freshness.reason) == ("fallback", "no daemon")
    assert got.freshness.generation == got.value == published(cli_project)
    assert spawns == [False]


@pytest.mark.needs("peercred")
def test_ci_mode_starts_no_daemon(
    cli_project: CliProject, spawns: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    got = answer(cli_project)
    assert (got.freshness.mode, got.freshness.reason) == ("fallback", CI_REASON)
    assert spawns == []


@pytest.mark.needs("peercred")
def test_asked_not_to_spawn(cli_project: CliProject, spawns: list[bool]) -> None:
    got = answer(cli_project, freshness.Options(spawn=False))
    assert (got.freshness.mode, got.freshness.reason) == ("fallback", freshness.NO_SPAWN_REASON)
    assert spawns == []


@pytest.mark.needs("peercred")
def test_barrier_timeout_falls_back_with_its_reason(
    make_cli_project: Make, spawns: list[bool]
) -> None:
    p = make_cli_project(config={"barrier_timeout_ms": 200})
    with listener(p, lambda request: None):  # acknowledges, never answers
        got = answer(p)
    assert (got.freshness.mode, got.freshness.reason) == ("fallback", BARRIER_TIMEOUT)
    assert got.freshness.generation == got.value == published(p)
    assert spawns == []  # something is listening: never a second daemon
    assert unanswered.skipped(p.paths) is None  # a daemon at work is asked again


@pytest.mark.needs("peercred")
def test_a_daemon_that_never_acknowledges_is_backed_off(
    make_cli_project: Make, spawns: list[bool]
) -> None:
    import fcntl

    p = make_cli_project(config={"barrier_timeout_ms": 200})
    ensure_private_dir(p.paths.dir)
    with open(p.paths.lock, "w") as lock, listener(p, None):  # never accepted: stopped
        fcntl.flock(lock, fcntl.LOCK_EX)  # held, as a stopped daemon holds it
        got = answer(p)
        reason = got.freshness.reason
        assert got.freshness.mode == "fallback" and reason is not None
        assert reason.startswith(f"{unanswered.REASON}: backed off until "), reason
        assert unanswered.skipped(p.paths) == reason  # the next query does not ask
    assert got.freshness.generation == got.value == published(p)
    assert spawns == []


@pytest.mark.needs("peercred")
def test_refusing_daemon_falls_back_with_its_reason(
    cli_project: CliProject, spawns: list[bool]
) -> None:
    def refuse(request: dict[str, object]) -> dict[str, object]:
        return {"ok": False, "error": "shutting down", "build": build_id()}

    with listener(cli_project, refuse):
        got = answer(cli_project)
    assert (got.freshness.mode, got.freshness.reason) == ("fallback", "daemon: shutting down")
    assert spawns == []


@pytest.mark.needs("peercred")
def test_daemon_of_another_build_is_replaced_after_reconciling(
    cli_project: CliProject, spawns: list[bool]
) -> None:
    asked: list[object] = []

    def other_build(request: dict[str, object]) -> dict[str, object]:
        asked.append(request.get("op"))
        return {"ok": True, "build": "another-build", "retiring": True}

    with listener(cli_project, other_build):
        got = answer(cli_project)
    assert got.freshness.mode == "fallback"
    assert got.freshness.reason == f"{BUILD_MISMATCH}; restarted"
    assert got.freshness.generation == got.value == published(cli_project)
    assert spawns == [True]  # the successor, once
    assert asked == ["barrier"]  # a retiring daemon is not asked to stop


def test_direct_reads_the_files_and_asks_no_daemon(
    cli_project: CliProject, spawns: list[bool]
) -> None:
    project = Project.at(cli_project.root)
    read: list[Plan] = []

    def from_files(plan: Plan) -> int:
        read.append(plan)
        return -1

    got = freshness.fresh_answer(
        project,
        lambda: load_plan(project),
        generation_of,
        from_files=from_files,
        options=freshness.Options(direct=True),
    )
    assert (got.freshness.mode, got.value, got.freshness.generation) == ("direct", -1, None)
    assert len(read) == 1 and spawns == []
    assert not (cli_project.root / ".ct" / "okf" / "MANIFEST").exists()  # no index was made


def test_a_recorded_plan_lets_a_healthy_daemon_answer_without_loading_it(
    cli_project: CliProject, spawns: list[bool]
) -> None:
    import os
    import time

    p = cli_project
    old = time.time() - 30  # older than the racy window: the record may be written
    for path in (p.root / ".ct" / "index.jsonc", p.root, *p.root.iterdir()):
        os.utime(path, (old, old))
    p.check("margin")
    p.wait_daemon()
    record = p.wait_plan_record()

    def no_plan() -> Plan:
        raise AssertionError("the plan was loaded")

    project = Project.at(p.root)
    got = freshness.fresh_answer(
        project, no_plan, generation_of, options=freshness.Options(plan_hint=True)
    )
    assert got.freshness.plain_clean and got.freshness.generation == got.value == published(p)
    # A record naming another plan: the daemon refuses it, the plan is loaded.
    loaded: list[Plan] = []

    def load() -> Plan:
        loaded.append(load_plan(project))
        return loaded[-1]

    record.write_text(json.dumps({**json.loads(record.read_text()), "digest": "0" * 64}))
    got = freshness.fresh_answer(
        project, load, generation_of, options=freshness.Options(plan_hint=True)
    )
    assert len(loaded) == 1 and got.freshness.mode == "watcher-clean"
    assert spawns == []


def test_a_plan_without_scopes_writes_no_index_and_starts_no_daemon(
    tmp_path: Path, spawns: list[bool]
) -> None:
    root = tmp_path / "plain"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "hello.md").write_text("# Hello\n\nhello\n")
    (root / ".git").mkdir()
    project = Project.at(root)
    got = freshness.fresh_answer(
        project, lambda: load_plan(project), generation_of, from_files=lambda plan: -1
    )
    assert (got.freshness.mode, got.freshness.reason) == ("direct", statement.NO_SCOPES_REASON)
    assert got.value == -1 and not (root / ".ct").exists() and spawns == []


def test_a_generation_another_plan_published_after_this_reconcile_is_not_read(
    make_cli_project: Make, spawns: list[bool]
) -> None:
    """A concurrent writer that loaded an older config publishes between this
    query's reconciliation and its read (the soak's concurrent `update` and
    config swaps): the read finds a generation of another plan, reconciles
    again and answers under its own plan."""
    from ctindex.indexing import transaction
    from ctindex.store.snapshot import with_snapshot

    p = make_cli_project(config={"watch": False})
    project = Project.at(p.root)
    answer(p)
    older = load_plan(project)  # what the concurrent writer read
    p.write_config({"version": 1, "watch": False, "exclude": ["ga4/**"]})
    current = load_plan(project)
    assert older.digest() != current.digest()
    raced: list[int] = []

    def open_generation(work: Callable[[Snapshot], str]) -> str:
        if not raced:  # the other writer publishes right before this read
            raced.append(transaction.rebuild(project, older).generation)
        return with_snapshot(project.index_dir, work)

    def plan_of(snap: Snapshot) -> str:
        return snap.manifest.plan_digest

    got = freshness.fresh_answer(project, lambda: current, plan_of, open_generation=open_generation)
    assert raced and got.value == current.digest()
    assert "another writer published meanwhile" in " ".join(got.freshness.notes)


def test_an_early_read_is_kept_only_for_a_generation_the_daemon_vouches_for(
    make_cli_project: Make,
) -> None:
    """_EarlyRead, both ways, with no race to win: the early read's
    generation is the one a daemon vouched for (kept: one read), or an
    older one the barrier's pass published on top of (dropped: the read
    runs again after the proof). An answer the end-to-end test
    (tests/ctindex/test_api.py) may see either way, by how the daemon's
    publish and the early open interleave."""
    cp = make_cli_project()
    cp.cli("update")
    index_dir = cp.root / ".ct" / "okf"
    early: freshness._EarlyRead[int] = freshness._EarlyRead(
        lambda snap: snap.generation, freshness._opener(Project.at(cp.root))
    )
    early()
    old = read_manifest(index_dir)
    (cp.root / "acme_retail" / "metrics" / "early.md").write_text("# Early\n\nzqxv7early\n")
    assert cp.cli("update").returncode == 0
    new = read_manifest(index_dir)
    assert old is not None and new is not None and new.generation > old.generation

    def proof(m: StoreManifest, by_daemon: bool = True) -> statement.Proof:
        fresh = statement.Freshness.watcher_clean(m.generation, 1.0)
        return statement.Proof(fresh, Vouched(m.plan_digest, m.generation, m.identity), by_daemon)

    assert early.accepted(proof(new)) is None
    assert early.accepted(proof(old, by_daemon=False)) is None
    kept = proof(old)
    assert early.accepted(kept) == (old.generation,) and kept.fresh.generation == old.generation
