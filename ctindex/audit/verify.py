"""The audit behind `ctindex verify`: deep integrity of the published
generation, and drift between the index and the files, without writing.

Queries and `update` make only the cheap check (headers, term indexes, the
file table) and let every later read verify the checksum of what it reads,
so damage in a part no query touched stays invisible until one does. The
audit reads every byte of every file the manifest names (docs/format.md)
and checks every checksum, then runs a full reconciliation against the
generation's file table and reports what it would change, by path.
It holds the update lock while it looks, so a writer can neither
publish nor collect the files under it mid-audit; it writes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ctindex.policy.store_path import wider_than_files
from ctindex.store.durable import IndexCorrupt

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.reconciler import Manifest
    from ctindex.store.generation import StoreManifest

# Drift kinds, by path (`change` in the JSON of `verify`).
ADDED, CHANGED, REMOVED, RENAMED, DIRTY = "added", "changed", "removed", "renamed", "dirty"
UNINDEXED = "unindexed"  # in the file table, neither indexed nor a provider error
UNRECORDED = "unrecorded"  # indexed, but not in the file table


class Audit:
    """What one audit found. `damage`: index files that fail a check
    (file name relative to the index folder, problem); `drift`: paths whose
    index entry does not match the files; `unseen`: what the walk could not
    look at (counted, never silently skipped)."""

    def __init__(self, index_dir: Path) -> None:
        self.index_dir = index_dir
        self.generation: int | None = None
        self.exists = False
        self.damage: list[dict[str, str]] = []
        self.drift: list[dict[str, str | None]] = []
        self.stale: str | None = None  # the index serves another plan/provider
        # The store is readable by more users than some indexed file (a warning).
        self.store_mode_warning: str | None = None
        self.unseen: list[str] = []
        self.metadata_only = 0
        self.documents = 0
        self.segments = 0
        self.files_checked = 0
        self.bytes_read = 0
        self.entries_visited = 0
        self.reconcile_ms = 0.0
        self.duration_ms = 0.0

    @property
    def clean(self) -> bool:
        return self.exists and not (self.damage or self.drift or self.stale)

    def as_dict(self) -> dict[str, object]:
        return {
            "index": str(self.index_dir),
            "exists": self.exists,
            "clean": self.clean,
            "generation": self.generation,
            "documents": self.documents,
            "segments": self.segments,
            "files_checked": self.files_checked,
            "bytes_read": self.bytes_read,
            "damage": list(self.damage),
            "drift": list(self.drift),
            "stale": self.stale,
            "store_mode_warning": self.store_mode_warning,
            "unseen": list(self.unseen),
            "metadata_only": self.metadata_only,
            "entries_visited": self.entries_visited,
            "reconcile_ms": self.reconcile_ms,
            "duration_ms": self.duration_ms,
        }

    def _damaged(self, exc: BaseException) -> None:
        text = str(exc).replace(f"{self.index_dir}/", "")
        name, sep, problem = text.partition(": ")
        self.damage.append({"file": name if sep else "", "problem": problem if sep else text})


def audit(project: Project, plan: Plan, *, lock_timeout: float | None = None) -> Audit:
    """Audit the published generation under the update lock (raises IndexBusy
    when a writer holds it longer than `lock_timeout`)."""
    from ctindex.store.lock import DEFAULT_TIMEOUT_S, update_lock

    index_dir = Path(project.index_dir)
    found = Audit(index_dir)
    t0 = time.perf_counter()
    if not index_dir.is_dir():
        found.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
        return found
    with update_lock(index_dir, DEFAULT_TIMEOUT_S if lock_timeout is None else lock_timeout):
        _audit_locked(project, plan, found)
    found.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
    return found


def _audit_locked(project: Project, plan: Plan, found: Audit) -> None:
    from ctindex.indexing.transaction import rebuild_reason
    from ctindex.store.generation import read_manifest

    index_dir = found.index_dir
    try:
        m = read_manifest(index_dir)
    except IndexCorrupt as exc:
        found.exists = True
        found._damaged(exc)
        return
    if m is None:
        return
    found.exists = True
    found.generation = m.generation
    found.documents = m.documents
    found.segments = len(m.segments)
    found.files_checked = 1
    found.bytes_read = (index_dir / "MANIFEST").stat().st_size
    found.stale = rebuild_reason(m, plan)
    live, errors = _check_files(index_dir, m, found)
    table = _load_table(index_dir, m, found)
    if table is None:
        return  # without the table there is nothing to reconcile against
    found.store_mode_warning = wider_than_files(project.root, table.raw)
    if live is not None:
        recorded = set(table.raw())
        for key in sorted(recorded - live - errors):
            found.drift.append({"path": key, "change": UNINDEXED, "to": None})
        for key in sorted(live - recorded):
            found.drift.append({"path": key, "change": UNRECORDED, "to": None})
    _reconcile(project, plan, table, found)


def _check_files(
    index_dir: Path, m: StoreManifest, found: Audit
) -> tuple[set[str] | None, set[str]]:
    """Every byte of every segment, tombstone and diagnostics file; returns
    (live document keys, keys with a provider error), live None when some
    segment could not be read."""
    from ctindex.store.generation import read_dels, read_diag
    from ctindex.store.segment_read import Segment
    from ctindex.store.snapshot import check_segment

    live: set[str] | None = set()
    for ref in m.segments:
        path = index_dir / ref.name
        deleted: frozenset[int] = frozenset()
        if ref.dels:
            try:
                deleted = read_dels(index_dir / ref.dels)
                found.files_checked += 1
                found.bytes_read += (index_dir / ref.dels).stat().st_size
                if len(deleted) != ref.deleted or any(d >= ref.ndocs for d in deleted):
                    raise IndexCorrupt(
                        f"{index_dir / ref.dels}: {len(deleted)} tombstones, "
                        f"manifest says {ref.deleted} of {ref.ndocs} documents"
                    )
            except FileNotFoundError:
                found._damaged(IndexCorrupt(f"{index_dir / ref.dels}: missing"))
            except (IndexCorrupt, OSError) as exc:
                found._damaged(exc)
        try:
            seg = Segment(path)
        except FileNotFoundError:
            found._damaged(IndexCorrupt(f"{path}: missing"))
            live = None
            continue
        except IndexCorrupt as exc:
            found._damaged(exc)
            live = None
            continue
        try:
            check_segment(seg, ref)
            found.bytes_read += seg.verify_all()
            found.files_checked += 1
            if live is not None:
                live.update(k for i, k in enumerate(seg.keys()) if i not in deleted)
        except (IndexCorrupt, OSError) as exc:
            found._damaged(exc)
            live = None
        finally:
            seg.close()
    errors: set[str] = set()
    if m.diag:
        try:
            errs, warns = read_diag(index_dir / m.diag)
            found.files_checked += 1
            found.bytes_read += (index_dir / m.diag).stat().st_size
            if (len(errs), len(warns)) != (m.errors, m.warnings):
                raise IndexCorrupt(
                    f"{index_dir / m.diag}: {len(errs)} errors and "
                    f"{len(warns)} warnings, manifest says {m.errors} and "
                    f"{m.warnings}"
                )
            errors = set(errs)
        except FileNotFoundError:
            found._damaged(IndexCorrupt(f"{index_dir / m.diag}: missing"))
        except (IndexCorrupt, OSError, ValueError, KeyError, TypeError) as exc:
            found._damaged(
                exc
                if isinstance(exc, IndexCorrupt)
                else IndexCorrupt(f"{index_dir / m.diag}: unreadable ({exc})")
            )
    return live, errors


def _load_table(index_dir: Path, m: StoreManifest, found: Audit) -> Manifest | None:
    from ctindex.store.filetable import load_file_table

    try:
        table = load_file_table(index_dir, m)
    except FileNotFoundError:
        found._damaged(IndexCorrupt(f"{index_dir / str(m.files)}: missing"))
        return None
    except (IndexCorrupt, OSError, ValueError) as exc:
        found._damaged(exc)
        return None
    if m.files:
        found.files_checked += 1
        found.bytes_read += (index_dir / m.files).stat().st_size
    return table


def _reconcile(project: Project, plan: Plan, table: Manifest, found: Audit) -> None:
    """A full pass with no sink and no publish: its result is only read."""
    from ctindex.indexing.transaction import walk_problems
    from ctindex.reconciler import reconcile

    res = reconcile(project.root, plan.path_filter(), table)
    found.entries_visited = res.metrics.entries_visited
    found.reconcile_ms = round(res.metrics.duration_ms, 3)
    found.metadata_only = len(res.metadata_only)
    found.unseen = walk_problems(res.report)
    for change, keys in (
        (ADDED, res.added),
        (CHANGED, res.changed),
        (REMOVED, res.removed),
        (DIRTY, res.dirty),
    ):
        found.drift.extend({"path": k, "change": change, "to": None} for k in sorted(keys))
    found.drift.extend(
        {"path": old, "change": RENAMED, "to": new} for old, new in sorted(res.renamed)
    )
