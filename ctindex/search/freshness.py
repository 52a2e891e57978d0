"""How fresh an answer is, and the step that makes it so before a query.

``ensure_fresh`` is the one call the search command makes before reading the
index; the watcher daemon later puts its barrier in front of it. Without a
daemon it reconciles synchronously (``reconcile-on-query``): a lock-free
comparison first, and only when something changed the locked update.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project

T = TypeVar("T")


# How long a query waits for another writer's update lock before it answers
# from the files instead (a stopped or slow writer must not fail a query).
QUERY_LOCK_WAIT_S = 10.0


class Freshness:
    """How the answer was made fresh (a plain class: importing dataclasses
    cost every search ~8 ms)."""

    def __init__(
        self,
        mode: str,
        reason: str | None,
        generation: int | None,
        barrier_ms: float | None = None,
        reconcile_ms: float | None = None,
        rebuilt: str | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.mode = mode  # watcher-clean | fallback | reconcile-on-query | direct
        self.reason = reason
        self.generation = generation
        self.barrier_ms = barrier_ms
        self.reconcile_ms = reconcile_ms
        self.rebuilt = rebuilt  # why the index was rebuilt before answering
        self.notes = notes if notes is not None else []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Freshness) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"Freshness({vars(self)})"

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "notes": list(self.notes)}


def ensure_fresh(
    project: Project, plan: Plan, *, mode: str = "reconcile-on-query", reason: str | None = None
) -> Freshness:
    """Bring the index up to date with the files, synchronously."""
    from ctindex.errors import CtindexError
    from ctindex.indexer import load_file_table, newly_trusted, rebuild_reason, update
    from ctindex.reconciler import reconcile
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.generation import read_manifest

    if reason is None:
        reason = "watch disabled" if not plan.settings.watch else "no daemon"
    index_dir = Path(project.index_dir)
    t0 = time.perf_counter()
    try:
        m = read_manifest(index_dir)
        if m is not None and rebuild_reason(m, plan) is None:
            table = load_file_table(index_dir, m)
            from ctindex.netfs import walk_threads

            # rebuild_reason None: the table was built under this plan.
            res = reconcile(
                project.root,
                plan.path_filter(),
                table,
                workers=walk_threads(project.root),
                trust_filter=True,
            )
            if not res.has_changes:
                generation = m.generation
                if newly_trusted(table, res):
                    # Record the racily-clean files this pass re-read, so they
                    # are not re-read by every query; best effort (a read-only
                    # or busy index folder answers all the same).
                    with contextlib.suppress(CtindexError):
                        generation = update(project, plan, lock_timeout=0.2).generation
                return Freshness(
                    mode, reason, generation, reconcile_ms=round(res.metrics.duration_ms, 3)
                )
    except (IndexCorrupt, OSError):
        pass  # the locked update below repairs or reports it
    report = update(project, plan, lock_timeout=QUERY_LOCK_WAIT_S)
    return Freshness(
        mode,
        reason,
        report.generation,
        reconcile_ms=round((time.perf_counter() - t0) * 1000, 3),
        rebuilt=report.reason if report.rebuilt else None,
        notes=report.notes,
    )


def answer_repairing(project: Project, plan: Plan, fresh: Freshness, query: Callable[[], T]) -> T:
    """Run `query()` on the index; when it meets a damaged file, rebuild from
    the files (reported in `fresh` as a fallback with reason `index repaired:
    <file>: <what>`) and ask again. A rebuild that cannot write raises
    IndexWriteError (exit 2) and leaves the previous generation in place."""
    from ctindex.indexer import repair
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.generation import read_manifest

    for _ in range(2):  # a second failure: a newer generation, checked and repaired too
        try:
            return query()
        except IndexCorrupt as exc:
            try:
                m = read_manifest(Path(project.index_dir))
                generation = m.generation if m is not None else None
            except IndexCorrupt:
                generation = None
            t0 = time.perf_counter()
            report = repair(project, plan, exc, generation, lock_timeout=QUERY_LOCK_WAIT_S)
            fresh.mode = "fallback"
            if report.rebuilt:
                fresh.reason = fresh.rebuilt = report.reason
            fresh.generation = report.generation
            fresh.reconcile_ms = round((time.perf_counter() - t0) * 1000, 3)
            fresh.notes.extend(report.notes)
    return query()


def answer_from_files(
    project: Project, plan: Plan, node: Any, limit: int, busy: Exception, why: str = "index busy"
) -> tuple[Freshness, Any]:
    """The answer when the index cannot be brought up to date (the update
    lock is held by a stopped or slow writer; `why` "read-only index": it
    cannot be written at all): the `--direct` oracle, reported as a
    fallback. Slower, never stale, never a failure."""
    from ctindex.search.execute import search_direct

    t0 = time.perf_counter()
    outcome = search_direct(str(project.root), plan, node, limit)
    fresh = Freshness(
        "fallback",
        f"{why}: answered from the files",
        None,
        reconcile_ms=round((time.perf_counter() - t0) * 1000, 3),
        notes=[str(busy)],
    )
    return fresh, outcome
