"""The freshness decision table (ctindex/query/freshness.py `decide`), row by
row, and the reuse rule of the fast path's barrier (`Prior.holds_for`):
whoever answered (this machine's daemon or a share's host, ctindex/client/
barrier.py), the same answer means the same thing. The rows that reconcile
are observed through a stand-in for `reconcile`; the end-to-end paths are
tests/ctindex/query/test_freshness.py's and the rig's (tests/e2e/test_netshare_*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctindex.client.barrier import Synced, Unsynced
from ctindex.errors import ShareHostWrites
from ctindex.policy.netfs import Share
from ctindex.query import freshness, reconcile_here, statement
from ctindex.search.execute import Vouched
from tests.ctindex.query.test_freshness import barrier_result

SSHFS = Share("fuse.sshfs", "/mnt/share", "FUSE filesystem")


class Project:
    """What `decide` reads of a project (a stand-in: nothing is walked)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index_dir = root / ".ct" / "okf"


class Seen:
    def __init__(self) -> None:
        self.reconciled: list[tuple[str, str | None]] = []
        self.spawned: list[bool] = []


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Seen:
    seen = Seen()

    def reconcile(project: Any, plan: Any, mode: str, reason: str | None) -> statement.Proof:
        seen.reconciled.append((mode, reason))
        return statement.Proof(statement.Freshness(mode, reason, 3, reconcile_ms=1.0), None)

    def spawn(root: Any, paths: Any, successor: bool = False) -> None:
        seen.spawned.append(successor)

    from ctindex.client import spawn as spawn_module
    from ctindex.ipc.runtime_dir import RuntimePaths
    from ctindex.policy import netfs
    from ctindex.query import cimode

    monkeypatch.setattr(reconcile_here, "reconcile", reconcile)
    monkeypatch.setattr(spawn_module, "spawn", spawn)
    monkeypatch.setattr(cimode, "spawn_blocked", lambda: None)
    monkeypatch.setattr(RuntimePaths, "for_project", staticmethod(lambda project: None))
    monkeypatch.setattr(netfs, "ctime_kept_on", lambda project, share: False)
    monkeypatch.setattr(netfs, "cache_note", lambda share: "the mount caches")
    return seen


def decide(tmp_path: Path, share: Share | None, outcome: Synced | Unsynced) -> statement.Proof:
    project: Any = Project(tmp_path)
    return freshness.decide(project, None, share, outcome, spawn=True)  # type: ignore[arg-type]


def test_answered_and_proven_is_the_answer_and_names_a_share_host(
    tmp_path: Path, seen: Seen
) -> None:
    local = decide(tmp_path, None, Synced(barrier_result(identity="x"), "plan"))
    assert local.fresh.mode == statement.WATCHER_CLEAN and local.fresh.reason is None
    assert local.by_daemon and local.share_host is None
    assert local.expect == Vouched("plan", 7, "x")  # what the read must then find
    hosted = decide(tmp_path, SSHFS, Synced(barrier_result(identity="x"), "plan", "server"))
    assert hosted.fresh.mode == statement.WATCHER_CLEAN
    assert hosted.fresh.reason == "share host server, barrier 2 ms"
    assert hosted.fresh.notes == ["the mount caches"]
    assert hosted.by_daemon and hosted.share_host == "server"
    assert seen.reconciled == [] and seen.spawned == []


def test_answered_but_not_proven_reconciles_here_or_leaves_it_to_the_share_host(
    tmp_path: Path, seen: Seen
) -> None:
    polled = barrier_result(lane="poll", backend="poll")  # no full pass: proves nothing
    local = decide(tmp_path, None, Synced(polled, "plan"))
    assert local.fresh.mode == statement.FALLBACK and not local.by_daemon
    assert seen.reconciled == [(statement.FALLBACK, "unreliable filesystem: poll lane")]
    with pytest.raises(ShareHostWrites, match="share host server: unreliable filesystem"):
        decide(tmp_path, SSHFS, Synced(polled, "plan", "server"))
    assert len(seen.reconciled) == 1  # the share's host writes its index, never this process


def test_unanswered_while_a_host_serves_never_writes(tmp_path: Path, seen: Seen) -> None:
    for share in (SSHFS, None):
        with pytest.raises(ShareHostWrites, match="did not answer"):
            decide(tmp_path, share, Unsynced("share host did not answer", serving="server"))
    assert seen.reconciled == [] and seen.spawned == []


def test_unanswered_through_a_share_reconciles_and_says_what_the_walk_cannot_see(
    tmp_path: Path, seen: Seen
) -> None:
    proof = decide(tmp_path, SSHFS, Unsynced("no share host", spawnable=True, other_build=True))
    assert proof.fresh.mode == statement.FALLBACK
    assert proof.fresh.reason is not None and proof.fresh.reason.startswith("no share host; ")
    assert "no ctime of its own" in proof.fresh.reason
    assert proof.fresh.notes == ["the mount caches"]
    assert seen.spawned == []  # no daemon here can see the server's changes


def test_unanswered_on_this_machine_spawns_or_replaces_then_reconciles(
    tmp_path: Path, seen: Seen
) -> None:
    from ctindex.client.daemon_requests import BUILD_MISMATCH, NO_DAEMON

    nothing = decide(tmp_path, None, Unsynced(NO_DAEMON, spawnable=True))
    assert seen.spawned == [False] and nothing.fresh.reason == NO_DAEMON
    other = decide(tmp_path, None, Unsynced(BUILD_MISMATCH, spawnable=True, other_build=True))
    assert seen.spawned == [False, True]  # the successor, after reconciling
    assert other.fresh.reason == f"{BUILD_MISMATCH}; restarted"
    late = decide(tmp_path, None, Unsynced("barrier timeout"))
    assert seen.spawned == [False, True] and late.fresh.reason == "barrier timeout"
    assert [mode for mode, _ in seen.reconciled] == [statement.FALLBACK] * 3


def test_a_barrier_the_fast_path_asked_is_reused_only_where_it_holds() -> None:
    answered = Synced(barrier_result(), "p1")
    socket = freshness.Prior("p1", answered, through_share=False)
    assert socket.holds_for("p1", through_share=False)
    assert not socket.holds_for("p2", through_share=False)  # another plan: ask again
    assert not socket.holds_for("p1", through_share=True)  # the share's host is asked
    late = freshness.Prior("p1", Unsynced("barrier timeout"), through_share=False)
    assert late.holds_for("p1", through_share=False)
    assert not late.holds_for("p2", through_share=False)
    leaving = freshness.Prior("p1", Unsynced("other", other_build=True), through_share=False)
    assert leaving.holds_for("p2", through_share=False)  # it leaves whatever plan was asked
    # Through a share the fast path asks under no plan: an answer holds for
    # the plan it names, no answer holds for any (asking again waits again).
    hosted = freshness.Prior(None, Synced(barrier_result(), "p1", "server"), through_share=True)
    assert hosted.holds_for("p1", through_share=True)
    assert not hosted.holds_for("p2", through_share=True)
    silent = freshness.Prior(None, Unsynced("no share host"), through_share=True)
    assert silent.holds_for("p2", through_share=True)


def test_the_fast_path_on_a_share_asks_its_host_and_reads_no_plan_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A share client never has a plan record of its own: reading the host's
    through the mount only costs round trips, so it is not read."""
    from ctindex.backends import remote
    from ctindex.client.barrier import ShareBarrier
    from ctindex.policy import plan_record

    asked: list[str | None] = []

    def recall(project: Any) -> None:
        raise AssertionError("the plan record was read on a share")

    def sync(self: ShareBarrier, timeout_ms: int | None) -> Unsynced:
        asked.append(self.digest)
        return Unsynced("share host did not answer", serving="server")

    monkeypatch.setattr(remote, "network_fstype", lambda st_dev, table=None: "fuse.sshfs")
    monkeypatch.setattr(plan_record, "recall", recall)
    monkeypatch.setattr(ShareBarrier, "sync", sync)
    project: Any = Project(tmp_path)
    answered, prior = freshness._hinted(project, lambda snap: 1, lambda read: 1)
    assert answered is None and asked == [None]  # asked under whatever plan the host runs
    assert prior is not None and prior.through_share and isinstance(prior.outcome, Unsynced)
    # On a local disk the record is read first, as before.
    monkeypatch.setattr(remote, "network_fstype", lambda st_dev, table=None: None)
    monkeypatch.setattr(plan_record, "recall", lambda project: None)
    monkeypatch.setattr(freshness, "_on_a_share", lambda project: False)
    assert freshness._hinted(project, lambda snap: 1, lambda read: 1) == (None, None)
