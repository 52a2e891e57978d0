"""A query's own pass: what ctindex/query/freshness.py does when no watcher
vouches for the index (or watching is off): bring the index up to date
here, read the generation proven, repair a damaged one, and answer from
the files when the index cannot be brought up to date.

The pass compares without the lock first and takes the indexer's locked
update only when something changed, building on that same walk
(ctindex/indexing/transaction.py `Walked`). A generation a share's host
vouched for is only read again through the mount, never repaired here:
the host is that index's one writer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ctindex.query.statement import FALLBACK, Freshness, Opener, Proof, Reader

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.search.execute import Vouched
    from ctindex.store.snapshot import Snapshot

T = TypeVar("T")

# How long a query waits for another writer's update lock before it answers
# from the files instead (a stopped or slow writer must not fail a query).
QUERY_LOCK_WAIT_S = 10.0


def reconcile(project: Project, plan: Plan, mode: str, reason: str | None) -> Proof:
    """Bring the index up to date with the files, synchronously: a lock-free
    comparison first, and only when something changed the locked update. The
    proof names the generation found current or published, which the read
    must find (or one published on top of it: another writer's pass under
    another plan in between is not this plan's answer)."""
    from pathlib import Path

    from ctindex.errors import CtindexError
    from ctindex.indexing.transaction import Walked, rebuild_reason, update
    from ctindex.policy.netfs import BLIND_NOTE, ctime_blind, walk_threads
    from ctindex.reconciler import reconcile as compare
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.filetable import load_file_table, newly_trusted
    from ctindex.store.generation import read_manifest

    index_dir = Path(project.index_dir)
    t0 = time.perf_counter()
    walked = None
    try:
        m = read_manifest(index_dir)
        if m is not None and rebuild_reason(m, plan) is None:
            table = load_file_table(index_dir, m)
            flt = plan.path_filter()
            reserved: list[str] = []
            flt.reserved = reserved
            contents: dict[str, bytes] = {}
            # rebuild_reason None: the table was built under this plan.
            res = compare(
                project.root,
                flt,
                table,
                sink=contents.__setitem__,
                workers=walk_threads(project.root),
                trust_filter=True,
                ctime_blind=ctime_blind(project),
            )
            # The update below builds on this walk if nobody published meanwhile.
            walked = Walked(m.generation, m.identity, res, contents, reserved)
            if not res.has_changes:
                generation, identity = m.generation, m.identity
                if newly_trusted(table, res):
                    # Record the racily-clean files this pass re-read, so they
                    # are not re-read by every query; best effort (a read-only
                    # or busy index folder answers all the same).
                    with contextlib.suppress(CtindexError):
                        again = update(project, plan, lock_timeout=0.2)
                        generation, identity = again.generation, again.identity
                fresh = Freshness(
                    mode, reason, generation, reconcile_ms=round(res.metrics.duration_ms, 3)
                )
                return Proof(fresh, own(plan, generation, identity))
    except (IndexCorrupt, OSError):
        pass  # the locked update below repairs or reports it
    report = update(project, plan, lock_timeout=QUERY_LOCK_WAIT_S, walked=walked)
    fresh = Freshness(
        mode,
        reason,
        report.generation,
        reconcile_ms=round((time.perf_counter() - t0) * 1000, 3),
        rebuilt=report.reason if report.rebuilt else None,
        # (what a ctime-blind walk cannot see is in the reason: ctindex/policy/netfs.py)
        notes=[n for n in report.notes if n != BLIND_NOTE],
    )
    return Proof(fresh, own(plan, report.generation, report.identity))


def own(plan: Plan, generation: int, identity: str) -> Vouched | None:
    """What this process's own pass vouches for (None: it cannot say)."""
    from ctindex.search.execute import Vouched

    return Vouched(plan.digest(), generation, identity) if identity else None


def read_repairing(
    project: Project, plan: Plan, read: Reader[T], opener: Opener[T], proof: Proof
) -> T:
    """Step 4: read the published generation; when it meets a damaged file,
    rebuild from the files (reported as a fallback with reason `index
    repaired: <file>: <what>`) and read again. When a daemon vouched for the
    answer (`proof.by_daemon`) and the published generation is not that one
    nor one published on top of it, the store was changed behind the
    daemon's back: rebuilt from the files too, its file table untrusted,
    reported as a fallback with reason `index changed outside ctindex: ...`.
    When this process reconciled and another writer published a generation
    of another plan since (a concurrent `update` that read an older config),
    it reconciles again; an index that keeps changing so is answered from
    the files (IndexBusy). A rebuild that cannot write raises
    IndexWriteError (exit 2) and leaves the previous generation."""
    from pathlib import Path

    from ctindex.errors import IndexBusy
    from ctindex.indexing.transaction import rebuild, repair
    from ctindex.search.execute import PlanMismatch
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.generation import OUTSIDE, read_manifest

    fresh, expect, by_daemon = proof.fresh, proof.expect, proof.by_daemon

    def read_noting(snap: Snapshot) -> T:
        if expect is not None:
            expect.check(snap)
        fresh.generation = snap.generation  # the statement names the generation read
        return read(snap)

    if proof.share_host is not None:
        return read_through_mount(proof.share_host, read_noting, opener)
    for _ in range(2):  # a second failure: a newer generation, checked and repaired too
        try:
            return opener(read_noting)
        except PlanMismatch:
            if not by_daemon:
                again = reconcile(project, plan, fresh.mode, fresh.reason)
                expect = again.expect
                fresh.generation = again.fresh.generation
                fresh.reconcile_ms = again.fresh.reconcile_ms
                fresh.notes.append("another writer published meanwhile: reconciled again")
                continue
            t0 = time.perf_counter()
            why = f"{OUTSIDE}: not the generation the daemon vouched for"
            report = rebuild(project, plan, lock_timeout=QUERY_LOCK_WAIT_S, reason=why)
            expect, by_daemon = own(plan, report.generation, report.identity), False
            fresh.mode = FALLBACK
            fresh.reason = fresh.rebuilt = why
            fresh.generation = report.generation
            fresh.reconcile_ms = round((time.perf_counter() - t0) * 1000, 3)
            fresh.notes.extend(report.notes)
        except IndexCorrupt as exc:
            try:
                m = read_manifest(Path(project.index_dir))
                generation = m.generation if m is not None else None
            except IndexCorrupt:
                generation = None
            t0 = time.perf_counter()
            report = repair(project, plan, exc, generation, lock_timeout=QUERY_LOCK_WAIT_S)
            expect, by_daemon = own(plan, report.generation, report.identity), False
            fresh.mode = FALLBACK
            if report.rebuilt:
                fresh.reason = fresh.rebuilt = report.reason
            fresh.generation = report.generation
            fresh.reconcile_ms = round((time.perf_counter() - t0) * 1000, 3)
            fresh.notes.extend(report.notes)
    try:
        return opener(read_noting)
    except PlanMismatch as exc:
        raise IndexBusy(
            "the index kept changing under this query (other writers): answered from the files"
        ) from exc


MOUNT_REREADS = 3  # a MANIFEST read again through a mount before giving up
MOUNT_REREAD_S = 0.05  # the first pause between them, doubled each time


def read_through_mount(host: str, read: Reader[T], opener: Opener[T]) -> T:
    """Read the generation a share host vouched for, through this mount.

    The host is the index's one writer, so nothing here repairs or rebuilds:
    a MANIFEST that reads torn (a mount that keeps a file's old size in its
    attribute cache cuts the new one short) or names another generation is
    read again, a few times over well under a second; then ShareHostWrites,
    and the caller answers from the files."""
    from ctindex.errors import ShareHostWrites
    from ctindex.search.execute import PlanMismatch
    from ctindex.store.durable import IndexCorrupt

    pause = MOUNT_REREAD_S
    for attempt in range(MOUNT_REREADS + 1):
        try:
            return opener(read)
        except (PlanMismatch, IndexCorrupt, OSError) as exc:
            why = exc
            if attempt < MOUNT_REREADS:
                time.sleep(pause)
                pause *= 2
    raise ShareHostWrites(host, f"the generation share host {host} vouched for: {why}")


def from_files(
    from_files: Callable[[Plan], T], plan: Plan, cause: Exception, why: str
) -> tuple[Freshness, T]:
    """The answer when the index cannot be brought up to date: from the
    files, reported as a fallback. Slower, never stale, never a failure."""
    t0 = time.perf_counter()
    value = from_files(plan)
    fresh = Freshness(
        FALLBACK,
        f"{why}: answered from the files",
        None,
        reconcile_ms=round((time.perf_counter() - t0) * 1000, 3),
        notes=[str(cause)],
    )
    return fresh, value
