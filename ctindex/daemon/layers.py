"""The daemon's view of the layers below it: plan, watcher, indexer.

Kept in one small adapter so the lifecycle loop can be driven by a fake in
unit tests, and so the calls into teammates' modules live in one place.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
from collections.abc import Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ctindex.backends.base import Watcher

if TYPE_CHECKING:
    from ctindex.indexing.transaction import UpdateReport
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project


class ConfigStamp(NamedTuple):
    """What tells one config file from another (docs/reliability.md, "What
    vouches for unchanged"): its full stat fingerprint, the form clients send
    with a barrier (ctindex.policy.plan_record.config_stamp), and the digest of its
    bytes, which also catches a rewrite inside one timestamp tick. The config
    is tiny and this is read once per heartbeat, so the read is cheap."""

    stat: list[int] | str  # the fingerprint as a JSON list, or "absent"
    digest: str | None  # None: absent, not a regular file, too large or unreadable


# A config larger than this is not hashed (the fingerprint alone decides);
# a real one is a few hundred bytes.
CONFIG_DIGEST_MAX = 1 << 20


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
    share_barrier_ms: int = 200  # told to clients on other hosts (share_barrier.py)


class Engine(Protocol):
    def load_plan(self) -> PlanView: ...

    def open_watcher(self, view: PlanView, cookie_key: str) -> Watcher: ...

    # `lock_timeout`: how long to wait for another writer's index lock;
    # past it the call raises ctindex.errors.IndexBusy (a build in progress).
    def reconcile(self, view: PlanView, *, lock_timeout: float) -> UpdateReport: ...

    def reconcile_paths(
        self, view: PlanView, keys: list[str], *, lock_timeout: float
    ) -> UpdateReport: ...

    # A fresh index from the files, trusting nothing of the store's (it was
    # changed outside ctindex: ctindex/daemon/storeguard.py).
    def rebuild(self, view: PlanView, reason: str, *, lock_timeout: float) -> UpdateReport: ...

    def config_stamp(self) -> ConfigStamp | None: ...

    def detection_changed(self, view: PlanView) -> bool: ...

    def indexed_among(self, keys: list[str]) -> Container[str] | None: ...


class RealEngine:
    """ctindex.policy.plan + backends.open_watcher + ctindex.indexing.transaction."""

    def __init__(self, project: Project) -> None:
        self.project = project
        # indexed_among's answers: (generation, created_ns) they hold for, and
        # key -> "in that generation's file table".
        self._held_in: tuple[int, int] | None = None
        self._held: dict[str, bool] = {}

    def load_plan(self) -> PlanView:
        from ctindex.policy import plan_record
        from ctindex.policy.plan import load_plan

        plan = load_plan(self.project)
        plan_record.remember(self.project, plan)  # lets searches skip loading it
        s = plan.settings
        return PlanView(
            plan,
            plan.digest(),
            s.debounce_ms,
            s.audit_seconds,
            s.idle_seconds,
            s.max_daemon_memory_bytes,
            s.barrier_timeout_ms,
            s.watch,
            s.share_barrier_ms,
        )

    def open_watcher(self, view: PlanView, cookie_key: str) -> Watcher:
        from ctindex.backends import open_watcher

        flt = view.plan.path_filter()
        return open_watcher(self.project.root, list(flt.roots()), flt.descend, cookie_key)

    def reconcile(self, view: PlanView, *, lock_timeout: float) -> UpdateReport:
        from ctindex.indexing import transaction

        return transaction.update(self.project, view.plan, lock_timeout=lock_timeout)

    def reconcile_paths(
        self, view: PlanView, keys: list[str], *, lock_timeout: float
    ) -> UpdateReport:
        from ctindex.indexing import transaction

        return transaction.update_paths(self.project, view.plan, keys, lock_timeout=lock_timeout)

    def rebuild(self, view: PlanView, reason: str, *, lock_timeout: float) -> UpdateReport:
        from ctindex.indexing import transaction

        return transaction.rebuild(
            self.project, view.plan, lock_timeout=lock_timeout, reason=reason
        )

    def config_stamp(self) -> ConfigStamp | None:
        from ctindex.policy import plan_record

        path = self.project.config_path
        stat = plan_record.config_stamp(path)
        if stat is None:
            return None
        return ConfigStamp(stat, None if stat == "absent" else _digest_of(path))

    def detection_changed(self, view: PlanView) -> bool:
        """True when root detection must run again: a folder it listed no
        longer has the fingerprint it had, or detection met a racily clean
        folder (its result was not trusted). The daemon watches only scope
        roots, so a new root beside them (okf/bundles/<new>) is found here,
        on the heartbeat, and by every query's own check (ctindex.policy.plan_record)."""
        from ctindex.reconciler.fingerprint import fingerprint_of

        folders = view.plan.detected_from
        if folders is None:
            return True
        for key, recorded in folders.items():
            try:
                st = os.lstat(self.project.path(key))
            except OSError:
                return True
            if fingerprint_of(st) != recorded or not stat_mod.S_ISDIR(st.st_mode):
                return True
        return False

    def indexed_among(self, keys: list[str]) -> Container[str] | None:
        """Which of `keys` the published file table holds; None when unknown.
        The table is not kept (the daemon's RSS per file stays small) and is
        loaded only when the dirty set gained keys or a new generation was
        published: answers are kept per generation for the keys still asked."""
        from ctindex.store.filetable import load_file_table
        from ctindex.store.generation import read_manifest

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


def _digest_of(path: os.PathLike[str] | str) -> str | None:
    """sha256 of a small regular file; never blocks (O_NONBLOCK: a FIFO put in
    the config's place opens and is refused) and reads a bounded amount."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or st.st_size > CONFIG_DIGEST_MAX:
            return None
        data = os.read(fd, CONFIG_DIGEST_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return hashlib.sha256(data).hexdigest()
