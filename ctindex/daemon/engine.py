"""The daemon's view of the layers below it: plan, watcher, indexer.

Kept in one small adapter so the lifecycle loop can be driven by a fake in
unit tests, and so the calls into teammates' modules live in one place.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from backends.base import Watcher

if TYPE_CHECKING:
    from ctindex.indexer import LinkedEntry
    from ctindex.plan import Plan
    from ctindex.project import Project


@dataclass(frozen=True)
class Applied:
    """What one reconciliation (full or narrowed) did."""

    generation: int
    added: int = 0
    changed: int = 0
    removed: int = 0
    entries_visited: int = 0
    duration_ms: float = 0.0
    dirty: int = 0  # files that changed while being read: not indexed yet
    # Files with several names the pass saw (see ctindex/daemon/links.py);
    # None when the engine does not report them.
    linked: Mapping[str, LinkedEntry] | None = None
    linked_full: bool = False  # the pass walked every root


@dataclass(frozen=True)
class PlanView:
    """The parts of the effective plan the daemon acts on."""

    plan: Plan
    digest: str
    debounce_ms: int
    audit_seconds: int
    idle_seconds: int
    memory_ceiling: int
    barrier_timeout_ms: int
    watch: bool = True


class Engine(Protocol):
    def load_plan(self) -> PlanView: ...

    def open_watcher(self, view: PlanView, cookie_key: str) -> Watcher: ...

    def reconcile(self, view: PlanView) -> Applied: ...

    def reconcile_paths(self, view: PlanView, keys: list[str]) -> Applied: ...

    def config_stamp(self) -> tuple[int, int, int] | None: ...

    def indexed_among(self, keys: list[str]) -> Container[str] | None: ...


# A writer (`rebuild`, a fallback) can hold the update lock; the daemon's loop
# must not stall behind it for long: it fails, keeps the work, retries later.
LOCK_TIMEOUT_S = 2.0


class RealEngine:
    """ctindex.plan + backends.open_watcher + ctindex.indexer."""

    def __init__(self, project: Project) -> None:
        self.project = project
        # indexed_among's answers: (generation, created_ns) they hold for, and
        # key -> "in that generation's file table".
        self._held_in: tuple[int, int] | None = None
        self._held: dict[str, bool] = {}

    def load_plan(self) -> PlanView:
        from ctindex import fastpath
        from ctindex.plan import load_plan

        plan = load_plan(self.project)
        fastpath.remember(self.project, plan)  # lets searches skip loading it
        s = plan.settings
        return PlanView(plan, plan.digest(), s.debounce_ms, s.audit_seconds, s.idle_seconds,
                        s.max_daemon_memory_bytes, s.barrier_timeout_ms, s.watch)

    def open_watcher(self, view: PlanView, cookie_key: str) -> Watcher:
        from backends import open_watcher

        flt = view.plan.path_filter()
        return open_watcher(self.project.root, list(flt.roots()), flt.descend, cookie_key)

    def reconcile(self, view: PlanView) -> Applied:
        from ctindex import indexer

        return _applied(indexer.update(self.project, view.plan, lock_timeout=LOCK_TIMEOUT_S))

    def reconcile_paths(self, view: PlanView, keys: list[str]) -> Applied:
        from ctindex import indexer

        return _applied(indexer.update_paths(self.project, view.plan, keys,
                                             lock_timeout=LOCK_TIMEOUT_S))

    def config_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = self.project.config_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def indexed_among(self, keys: list[str]) -> Container[str] | None:
        """Which of `keys` the published file table holds; None when unknown.
        The table is not kept (the daemon's RSS per file stays small) and is
        loaded only when the dirty set gained keys or a new generation was
        published: answers are kept per generation for the keys still asked."""
        from ctindex.indexer import load_file_table
        from ctindex.store.manifest import read_manifest

        try:
            m = read_manifest(self.project.index_dir)
            if m is None:
                return None
            if (m.generation, m.created_ns) != self._held_in:
                self._held_in, self._held = (m.generation, m.created_ns), {}
            missing = [k for k in keys if k not in self._held]
            if missing:
                table = load_file_table(self.project.index_dir, m)
                self._held.update((k, k in table) for k in missing)
        except Exception:  # status detail only: a damaged table just means "unknown"
            return None
        self._held = {k: self._held[k] for k in keys}  # forget keys no longer dirty
        return {k for k, held in self._held.items() if held}


def _applied(report: Any) -> Applied:
    return Applied(
        generation=int(report.generation),
        added=int(report.added) + int(report.renamed),
        changed=int(report.changed),
        removed=int(report.removed),
        entries_visited=int(report.entries_visited),
        duration_ms=float(report.duration_ms),
        dirty=int(report.dirty),
        linked=report.linked,
        linked_full=bool(report.linked_full),
    )
