"""The write transaction: lock -> reconcile -> analyse -> write segments ->
publish a generation, and its entry points (update, update_paths, rebuild,
repair).

Every entry point takes the update lock, re-reads the published manifest
under it and builds on exactly that (spec §9). The reconciler hands over the
bytes it hashed (``sink``), so what is indexed is what the new file table
records, never a second, possibly torn, read. Parsing and analysis are
ctindex/indexing/analyse.py; the store's rules (integrity, file table, pass records)
are ctindex/store/.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ctindex.base.output import Progress, counted_keys
from ctindex.ipc.build_id import build_id
from ctindex.policy.project import key_under_any
from ctindex.providers import INDEX_PROVIDER, PROVIDERS
from ctindex.providers.fields import SEP
from ctindex.store.durable import IndexCorrupt
from ctindex.store.filetable import (
    RecordedFile,
    RecordedFiles,
    load_file_table,
    newly_trusted,
    recorded,
    table_update,
)
from ctindex.store.generation import StoreManifest, read_diag, read_manifest
from ctindex.store.integrity import check_generation, damage_reason
from ctindex.store.passlog import record_pass

if TYPE_CHECKING:
    from ctindex.indexing.analyse import Added
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.reconciler import Manifest, WalkReport
    from ctindex.store.writer import StoreWriter


@dataclass
class UpdateReport:
    generation: int = 0
    published: bool = False  # a new generation
    refreshed: bool = False  # only the file table was re-recorded, same generation
    rebuilt: bool = False
    reason: str | None = None  # why a rebuild happened
    added: int = 0
    changed: int = 0
    removed: int = 0
    renamed: int = 0
    metadata_only: int = 0
    dirty: int = 0
    documents: int = 0
    errors: int = 0
    warnings: int = 0
    merged_segments: int = 0
    missing_roots: list[str] = field(default_factory=list)  # configured scope roots not found
    entries_visited: int = 0
    reconcile_ms: float = 0.0
    duration_ms: float = 0.0
    notes: list[str] = field(default_factory=list)
    # Files seen with more than one name -> (fingerprint, recorded_ns) as the
    # new file table records them; `linked_full`: the pass walked every root
    # (else only the keys it was narrowed to). The daemon re-checks these at
    # each barrier (docs/daemon.md, "Changes no event announces").
    linked: dict[str, RecordedFile] = field(default_factory=dict)
    linked_full: bool = False
    # Every file the pass recorded within what it walked (all roots, or the
    # keys it was narrowed to), same form, read lazily from the new file
    # table: the daemon watches each of these files itself
    # (ctindex/daemon/filewatch.py); nobody else pays for it.
    seen: Mapping[str, RecordedFile] = field(default_factory=dict)
    # The identity of the manifest published, or built on when nothing was
    # (store/generation.py manifest_identity): what the daemon vouches for.
    identity: str = ""

    @property
    def content_changed(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.renamed)

    def as_dict(self) -> dict[str, Any]:
        # `linked` and `seen` are the daemon's input, not part of `update
        # --json`; skipped before copying (asdict would deep-copy `seen`,
        # the whole new file table).
        skip = ("linked", "linked_full", "seen", "identity")
        return {
            f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name not in skip
        }


# Off only in tests that compare a rebuild with the pass's own reads.
DEFER_REBUILD_READS = True


def provider_versions() -> dict[str, Any]:
    """The versions a manifest records: the index provider's (the index
    folder is its; other providers' scopes are versioned by their scope
    digests, ctindex/policy/plan.py)."""
    return dict(PROVIDERS[INDEX_PROVIDER].versions())


def scope_digests(plan: Plan) -> dict[str, str]:
    return {s.root: plan.scope_digest(s) for s in plan.scopes}


def rebuild_reason(m: StoreManifest | None, plan: Plan) -> str | None:
    """Why the published index can not serve this plan as is (None: it can)."""
    if m is None:
        return "no index yet"
    now = provider_versions()
    if m.provider != now:
        old = m.provider
        return (
            f"provider {old.get('id')} v{old.get('version')} tokenizer "
            f"v{old.get('tokenizer_version')} -> v{now['version']} tokenizer "
            f"v{now['tokenizer_version']}"
        )
    stale = stale_scopes(m, plan)
    if stale:
        return "plan changed for scope " + ", ".join(repr(r) for r in stale)
    return None


def stale_scopes(m: StoreManifest, plan: Plan) -> list[str]:
    """Scope roots whose documents the index holds under another policy:
    scopes added, removed or changed since the manifest was written."""
    now = scope_digests(plan)
    return sorted(
        set(now) ^ set(m.scopes) | {r for r in now if r in m.scopes and now[r] != m.scopes[r]}
    )


_WALK_PROBLEMS = (  # WalkReport bucket -> what it means for the index
    ("missing_roots", "scope root missing, a symlink or not a folder (its documents are removed)"),
    ("unreadable_dirs", "unreadable folder (its documents keep their last indexed version)"),
    ("unreadable_files", "unreadable file (keeps its last indexed version)"),
    (
        "too_deep",
        "folder too deep or path too long to open (its documents keep their last indexed version)",
    ),
    ("errors", "walk error (entries keep their last indexed version)"),
)


def walk_problems(walk: WalkReport) -> list[str]:
    """One line per kind of thing the reconciler could not see, with a count
    and the first few keys (JSON-escaped: names may hold newlines)."""
    lines = []
    for name, meaning in _WALK_PROBLEMS:
        bucket = getattr(walk, name)
        if bucket.count:
            lines.append(f"{meaning}: {counted_keys(bucket.count, bucket.sample)}")
    return lines


# -- entry points --------------------------------------------------------------------


def update(
    project: Project,
    plan: Plan,
    *,
    progress: TextIO | None = None,
    lock_timeout: float | None = None,
) -> UpdateReport:
    """Full reconciliation, then upserts and tombstones; a rebuild instead when
    the index is missing, damaged or built for another provider/plan."""
    return _locked(project, plan, None, fresh=False, progress=progress, timeout=lock_timeout)


def update_paths(
    project: Project, plan: Plan, dirty_keys: Iterable[str], *, lock_timeout: float | None = None
) -> UpdateReport:
    """Reconcile only `dirty_keys` (files, or folders meaning their subtree)."""
    return _locked(
        project, plan, list(dirty_keys), fresh=False, progress=None, timeout=lock_timeout
    )


def rebuild(
    project: Project,
    plan: Plan,
    *,
    progress: TextIO | None = None,
    lock_timeout: float | None = None,
    reason: str = "requested",
) -> UpdateReport:
    """A fresh index from every eligible file, published in one manifest swap."""
    return _locked(
        project, plan, None, fresh=True, progress=progress, timeout=lock_timeout, reason=reason
    )


def repair(
    project: Project,
    plan: Plan,
    damage: IndexCorrupt,
    generation: int | None,
    *,
    lock_timeout: float | None = None,
) -> UpdateReport:
    """Rebuild after a reader found generation `generation` damaged (spec: a
    corrupt cache makes a query slower, never wrong). When another process
    published a newer generation meanwhile, that one is checked instead."""
    return _locked(
        project,
        plan,
        None,
        fresh=False,
        progress=None,
        timeout=lock_timeout,
        damaged=(damage, generation),
    )


@contextlib.contextmanager
def _cycles_uncollected() -> Iterator[None]:
    """The cyclic garbage collector paused for one pass. A pass makes a few
    objects per file (stat results, keys, pending reads, entries) that live
    until it ends and form no cycles; over 40,000 files the collector's
    repeated walks over them were 15-20 % of a rebuild's walk. It runs again
    afterwards (if it was on) and then collects whatever the pass left."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _locked(
    project: Project,
    plan: Plan,
    only: list[str] | None,
    *,
    fresh: bool,
    progress: TextIO | None,
    timeout: float | None,
    reason: str | None = None,
    damaged: tuple[IndexCorrupt, int | None] | None = None,
) -> UpdateReport:
    """Under the update lock: decide what the pass builds on (the published
    generation, checked; or nothing: a rebuild, and why), then `_apply`."""
    from ctindex.policy.store_path import prepare_index
    from ctindex.store.lock import DEFAULT_TIMEOUT_S, update_lock, write_error

    index_dir = Path(project.index_dir)
    settings = plan.settings
    try:
        first = prepare_index(project.root, settings.share_index_with_group)
    except OSError as exc:
        raise write_error(exc, f"{index_dir}: cannot create index folder") from exc
    if first and settings.gitignore_index:
        from ctindex.policy.gitignore import write_gitignore

        write_gitignore(project.root)
    with (
        update_lock(index_dir, DEFAULT_TIMEOUT_S if timeout is None else timeout),
        _cycles_uncollected(),
    ):
        notes: list[str] = []
        try:
            base = read_manifest(index_dir)
        except IndexCorrupt as exc:
            base = None
            notes.append(f"{exc}; rebuilding")
            reason = reason or damage_reason(exc, index_dir)
        previous = None
        stale: list[str] = []
        if not fresh:
            reason = rebuild_reason(base, plan) if base is not None else (reason or "no index yet")
            if base is not None and (reason is None or reason.startswith("plan changed")):
                try:
                    # A narrowed pass reads only the table entries it looks at.
                    previous = load_file_table(index_dir, base, only if reason is None else None)
                    if only is None:  # full passes check the generation they build on
                        check_generation(index_dir, base, file_table=False)
                    if damaged is not None and damaged[1] == base.generation:
                        raise damaged[0]  # still the generation a reader found damaged
                except (IndexCorrupt, OSError, ValueError) as exc:
                    notes.append(f"{exc}; rebuilding")
                    reason = damage_reason(exc, index_dir)
                    previous = None
                else:
                    stale = stale_scopes(base, plan) if reason else []
            fresh = reason is not None and not stale
        try:
            report = _apply(
                project,
                plan,
                index_dir,
                base,
                previous,
                only if not (fresh or stale) else None,
                fresh=fresh,
                stale=stale,
                progress=progress,
                reason=reason if (fresh or stale) else None,
            )
        except IndexCorrupt as exc:
            if fresh:
                raise
            # A damaged file of the base generation surfaced while building on
            # it: the files are the truth, so rebuild from them.
            notes.append(f"{exc}; rebuilding")
            reason = damage_reason(exc, index_dir)
            fresh, stale = True, []
            report = _apply(
                project,
                plan,
                index_dir,
                base,
                None,
                None,
                fresh=True,
                stale=[],
                progress=progress,
                reason=reason,
            )
        report.reason = reason if (fresh or stale) else None
        report.notes[:0] = notes
        from ctindex.store import gc as store_gc

        store_gc.collect(index_dir)  # every writing pass, published or not (store/gc.py)
        return report


def _apply(
    project: Project,
    plan: Plan,
    index_dir: Path,
    base: StoreManifest | None,
    previous: Manifest | None,
    only: list[str] | None,
    *,
    fresh: bool,
    stale: list[str],
    progress: TextIO | None,
    reason: str | None = None,
) -> UpdateReport:
    """Reconcile and publish. `fresh`: index everything anew. `stale`: scope
    roots whose documents are re-indexed from scratch (plan change), the
    rest of the index is updated incrementally. Parsing and the store's
    writer (ctindex/indexing/analyse.py, ctindex/store/writer.py) are imported where a
    pass writes: a nothing-changed one returns before that, without them."""
    from ctindex.reconciler import Manifest, reconcile

    t0 = time.perf_counter()
    contents: dict[str, bytes] = {}
    bar = Progress(progress, "reading")

    def sink(key: str, data: bytes) -> None:
        contents[key] = data
        bar(len(contents), None)

    if (
        stale and previous is not None
    ):  # forget what is known under stale scopes: all of it comes back as added
        previous = Manifest(
            {k: e for k, e in previous.raw().items() if not key_under_any(k, stale)}
        )
    from ctindex.policy.netfs import walk_threads

    # The table was built under this plan (a changed one means fresh or
    # stale scopes, whose entries are dropped above): its unchanged keys need
    # no filter call, which lets the native scan run (reconciler/native.py).
    # A rebuild reads nothing while it walks: each indexing worker reads and
    # hashes the files it parses (reconciler/capture.py), so reading runs in
    # parallel too and this process never holds every file's bytes.
    # (A pass that may not defer, e.g. under a test's injected stat, reads
    # as usual: then nothing is pending.)
    res = reconcile(
        project.root,
        plan.path_filter(),
        Manifest() if fresh or previous is None else previous,
        only=only,
        sink=sink,
        workers=walk_threads(project.root),
        trust_filter=not fresh,
        defer_reads=fresh and DEFER_REBUILD_READS,
    )
    bar.done()

    def new_writer() -> StoreWriter:
        from ctindex.indexing.analyse import reanalyzer
        from ctindex.store.writer import StoreWriter

        return StoreWriter(index_dir, base, fresh=fresh, reanalyze=reanalyzer(plan), sep=SEP)

    writer: StoreWriter | None = None
    added: Added | None = None
    if res.pending:  # only a rebuild (fresh) defers
        from ctindex.indexing.analyse import Reads, add_documents, targets_of
        from ctindex.reconciler.capture import complete

        writer = new_writer()
        try:
            keys = sorted(p.key for p in res.pending)
            reads = Reads(str(project.root), {p.key: p for p in res.pending})
            added = add_documents(writer, keys, reads, targets_of(plan, keys), index_dir, progress)
            complete(res, added.shipments)
        except BaseException:
            writer.close()
            raise
    report = UpdateReport(
        added=len(res.added),
        changed=len(res.changed),
        removed=len(res.removed),
        renamed=len(res.renamed),
        metadata_only=len(res.metadata_only),
        dirty=len(res.dirty),
        entries_visited=res.metrics.entries_visited,
        reconcile_ms=round(res.metrics.duration_ms, 3),
        rebuilt=fresh or bool(stale),
    )
    # A view, not raw(): a table the native scan left packed stays packed.
    table = res.manifest.raw_view()
    report.linked = recorded(table, res.linked)
    report.linked_full = only is None
    report.seen = RecordedFiles(table, only)
    kind = "rebuild" if fresh else ("narrowed" if only is not None else "full")
    pass_info: dict[str, Any] = {
        "kind": kind,
        "duration_ms": report.reconcile_ms,
        "entries_visited": report.entries_visited,
        "files_hashed": res.metrics.files_hashed,
        "at_ns": time.time_ns(),
        "writer": build_id(),
    }  # which build wrote it: not the format version
    if reason:
        pass_info["reason"] = reason
    report.missing_roots = list(res.report.missing_roots.sample)
    problems = walk_problems(res.report)
    if problems:  # what the walk could not see is reported, never a silent drop
        pass_info["problems"] = problems
        report.notes.extend(problems)
    if base is not None and not fresh and not stale and not report.content_changed:
        report.generation = base.generation
        report.identity = base.identity
        report.documents = base.documents
        report.errors, report.warnings = base.errors, base.warnings
        # The documents are unchanged; the file table may not be: new stat
        # fingerprints (metadata only) or racily-clean files re-read now that
        # they are old enough to be trusted. Recording those under the same
        # generation spares re-reading them on every pass.
        if report.metadata_only or (previous is not None and newly_trusted(previous, res)):
            update = table_update(index_dir, base, previous, res, only is not None)
            if update.base is not None or update.delta != base.files_delta:
                from ctindex.store.writer import republish

                report.identity = republish(
                    index_dir,
                    base,
                    files_table=update.base,
                    files_delta=update.delta or {},
                    reconcile=pass_info,
                ).identity
                report.refreshed = True
                report.notes.append(
                    "only file metadata changed: refreshed the file table (same generation)"
                )
        record_pass(index_dir, pass_info)
        report.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
        return report

    from ctindex.indexing.analyse import add_documents, targets_of

    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}
    if base is not None and base.diag and not fresh:
        errors, warnings = read_diag(index_dir / base.diag)
    before = (dict(errors), dict(warnings))
    if writer is None:
        writer = new_writer()
    try:

        def forget(key: str) -> None:
            writer.remove(key)
            errors.pop(key, None)
            warnings.pop(key, None)

        if stale:
            for key in [k for k in writer.live_keys() if key_under_any(k, stale)]:
                forget(key)
            for key in [k for k in {**errors, **warnings} if key_under_any(k, stale)]:
                forget(key)
            report.notes.append("re-indexed scope " + ", ".join(repr(r) for r in stale))
        if added is None:  # the documents of the pass's own reads
            for key in res.removed:
                forget(key)
            for old, _ in res.renamed:
                forget(old)
            todo = [*res.changed, *res.added, *(new for _, new in res.renamed)]
            for key in todo:
                forget(key)
            missing = [k for k in todo if k not in contents]
            for key in missing:  # not handed over (should not happen): index nothing torn
                report.notes.append(f"{key}: content not captured; will be retried")
            todo = sorted(k for k in todo if k in contents)
            added = add_documents(
                writer, todo, contents, targets_of(plan, todo), index_dir, progress
            )
        errors.update(added.diagnostics.errors)
        warnings.update(added.diagnostics.warnings)
        diag = (errors, warnings) if fresh or (errors, warnings) != before else None
        files = table_update(
            index_dir, base, None if fresh or stale else previous, res, only is not None
        )
        meta = {
            "provider": provider_versions(),
            "scopes": scope_digests(plan),
            "plan_digest": plan.digest(),
            "source_bytes": files.source_bytes,
            "reconcile": pass_info,
        }
        m = writer.commit(files_table=files.base, meta=meta, diag=diag, files_delta=files.delta)
    finally:
        writer.close()
    report.published = True
    report.generation = m.generation
    report.identity = m.identity
    report.documents = m.documents
    report.errors, report.warnings = m.errors, m.warnings
    report.merged_segments = writer.merged
    record_pass(index_dir, pass_info)
    report.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
    return report
