"""The write transaction: lock -> reconcile -> analyse -> write segments ->
publish a generation, and its entry points (update, update_paths, rebuild,
repair).

Every entry point takes the update lock, re-reads the published manifest
under it and builds on exactly that. The reconciler hands over the
bytes it hashed (``sink``), so what is indexed is what the new file table
records, never a second, possibly torn, read. Parsing and analysis are
ctindex/indexing/analyse.py; the store's rules (integrity, file table, pass records)
are ctindex/store/.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ctindex.base.jsontypes import JSON, JSONObject
from ctindex.base.output import Progress, counted_keys
from ctindex.ipc.build_id import build_id
from ctindex.policy.netfs import BLIND_NOTE, ctime_blind
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
from ctindex.store.generation import StoreManifest, TornManifest, read_diag, read_manifest
from ctindex.store.integrity import check_generation, damage_reason
from ctindex.store.passlog import record_pass

if TYPE_CHECKING:
    from ctindex.indexing.analyse import Added
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.reconciler import Manifest, ReconcileResult, WalkReport
    from ctindex.store.budget import BuildBudget
    from ctindex.store.writer import StoreWriter


@dataclass(frozen=True)
class UpdateReport:
    """What one pass (update, narrowed update, rebuild, repair) did: the
    fields of `ctindex --json update` (`as_dict`), what `ctindex.Index.update`
    returns, and what the daemon learns from its own passes."""

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
    dirty: int = 0  # files that changed while being read: not indexed yet
    documents: int = 0
    errors: int = 0
    warnings: int = 0
    merged_segments: int = 0
    missing_roots: tuple[str, ...] = ()  # configured scope roots not found
    # Files a full walk skipped for their reserved name (index.md, log.md):
    # counted and named, never silently left out (docs/cli.md, `update`).
    reserved: tuple[str, ...] = ()
    entries_visited: int = 0
    reconcile_ms: float = 0.0
    duration_ms: float = 0.0
    notes: tuple[str, ...] = ()
    # Files seen with more than one name -> (fingerprint, recorded_ns) as the
    # new file table records them; `linked_full`: the pass walked every root
    # (else only the keys it was narrowed to). The daemon re-checks these at
    # each barrier (docs/daemon.md, "Changes no event announces"). None: the
    # report does not say (a test's engine).
    linked: Mapping[str, RecordedFile] | None = None
    linked_full: bool = False
    # Every file the pass recorded within what it walked (all roots, or the
    # keys it was narrowed to), same form, read lazily from the new file
    # table: the daemon watches each of these files itself
    # (ctindex/daemon/filewatch.py); nobody else pays for it. None: as above.
    seen: Mapping[str, RecordedFile] | None = None
    # The identity of the manifest published, or built on when nothing was
    # (store/generation.py manifest_identity): what the daemon vouches for.
    identity: str = ""

    @property
    def content_changed(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.renamed)

    def as_dict(self) -> dict[str, Any]:
        """The `update --json` fields. `linked` and `seen` are the daemon's
        input, not part of it (and `seen` is the whole new file table); what
        the index could not take in is read by whoever shows it
        (ctindex/service/update_problems.py)."""
        return {
            f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name not in _INTERNAL
        }


_INTERNAL = frozenset(("linked", "linked_full", "seen", "identity"))


def _plain(value: object) -> object:
    """A field as JSON has it: tuples as lists."""
    return list(value) if isinstance(value, tuple) else value


# Off only in tests that compare a rebuild with the pass's own reads.
DEFER_REBUILD_READS = True
RESERVED_KEPT = 100  # reserved paths a pass record names (the count is whole)


def provider_versions() -> dict[str, int | str]:
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


@dataclass(frozen=True)
class Walked:
    """A full walk made before the lock was taken (a query's lock-free
    comparison: ctindex/query/reconcile_here.py reconcile). The update builds on
    it instead of walking again when the generation it compared with is
    still the published one: the same table, so the same result, and on a
    network share the walk is most of the cost."""

    generation: int
    identity: str
    result: ReconcileResult
    contents: dict[str, bytes]  # the bytes of every file it hashed and found changed
    reserved: list[str]  # what its filter refused for a reserved name


def update(
    project: Project,
    plan: Plan,
    *,
    progress: TextIO | None = None,
    lock_timeout: float | None = None,
    walked: Walked | None = None,
) -> UpdateReport:
    """Full reconciliation, then upserts and tombstones; a rebuild instead when
    the index is missing, damaged or built for another provider/plan."""
    return _locked(
        project, plan, None, fresh=False, progress=progress, timeout=lock_timeout, walked=walked
    )


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
    walked: Walked | None = None,
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
        except TornManifest:
            if not fresh:
                raise  # maybe only a mount's cache: not repaired from here
            base = None  # `rebuild` needs nothing of it
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
        if walked is not None and not (
            only is None
            and not fresh
            and not stale
            and previous is not None
            and base is not None
            and (base.generation, base.identity) == (walked.generation, walked.identity)
        ):
            walked = None  # another generation, or another kind of pass: walk again
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
                walked=walked,
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
        report = replace(
            report, reason=reason if (fresh or stale) else None, notes=(*notes, *report.notes)
        )
        from ctindex.store import gc as store_gc

        store_gc.collect(index_dir)  # every writing pass, published or not (store/gc.py)
        return report


@dataclass(frozen=True)
class _Pass:
    """What one pass is asked to do, as `_locked` decided it."""

    project: Project
    plan: Plan
    index_dir: Path
    base: StoreManifest | None  # the published generation built on (None: none)
    previous: Manifest | None  # its file table (None: start over)
    only: list[str] | None  # the keys a narrowed pass looks at (None: every root)
    fresh: bool  # index everything anew
    stale: list[str]  # scope roots re-indexed from scratch (plan change)
    progress: TextIO | None
    reason: str | None
    # What the walk's filter refused for a reserved name (PlanPathFilter.reserved)
    reserved: list[str] = field(default_factory=list)
    # The files are seen through a filesystem that keeps no ctime of its own
    # (ctindex/policy/netfs.py ctime_blind): the walk compares size and mtime.
    ctime_blind: bool = False

    @property
    def kind(self) -> str:
        return "rebuild" if self.fresh else ("narrowed" if self.only is not None else "full")


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
    walked: Walked | None = None,
) -> UpdateReport:
    """Reconcile (or take `walked`'s result) and publish. `fresh`: index
    everything anew. `stale`: scope roots whose documents are re-indexed
    from scratch (plan change), the rest of the index is updated
    incrementally. Parsing and the store's
    writer (ctindex/indexing/analyse.py, ctindex/store/writer.py) are imported where a
    pass writes: a nothing-changed one returns before that, without them."""
    t0 = time.perf_counter()
    job = _Pass(
        project,
        plan,
        index_dir,
        base,
        previous,
        only,
        fresh,
        stale,
        progress,
        reason,
        ctime_blind=previous is not None and ctime_blind(project),
    )
    if walked is not None:
        res, contents = walked.result, walked.contents
        job.reserved.extend(walked.reserved)
    else:
        res, contents = _reconcile(job)
    writer, added = _analyse_deferred(job, res) if res.pending else (None, None)
    pass_info, problems = _pass_record(job, res)
    counts = _counts(job, res, problems)
    if base is not None and not fresh and not stale and not _content_changed(res):
        if writer is not None:  # (only a rebuild defers reads, and it never gets here)
            writer.close()
        report = _keep_generation(job, base, res, pass_info, counts)
    else:
        report = _publish(job, res, contents, writer, added, pass_info, counts)
    record_pass(index_dir, pass_info)
    return replace(report, duration_ms=round((time.perf_counter() - t0) * 1000, 3))


def _content_changed(res: ReconcileResult) -> bool:
    return bool(res.added or res.changed or res.removed or res.renamed)


# Phase 1. The walk is its own step because it is the one every pass pays,
# nothing-changed ones included: it touches no parser and no store writer.
def _reconcile(job: _Pass) -> tuple[ReconcileResult, dict[str, bytes]]:
    """Walk the scopes against the previous file table; the bytes of every
    file hashed, by key (empty for a rebuild, whose workers read them)."""
    from ctindex.policy.netfs import walk_threads
    from ctindex.reconciler import Manifest, reconcile

    contents: dict[str, bytes] = {}
    bar = Progress(job.progress, "reading")

    def sink(key: str, data: bytes) -> None:
        contents[key] = data
        bar(len(contents), None)

    previous = job.previous
    if job.stale and previous is not None:
        # forget what is known under stale scopes: all of it comes back as added
        previous = Manifest(
            {k: e for k, e in previous.raw().items() if not key_under_any(k, job.stale)}
        )
    # The table was built under this plan (a changed one means fresh or
    # stale scopes, whose entries are dropped above): its unchanged keys need
    # no filter call, which lets the native scan run (ctindex/reconciler/native.py).
    # A rebuild reads nothing while it walks: each indexing worker reads and
    # hashes the files it parses (ctindex/reconciler/capture.py), so reading runs in
    # parallel too and this process never holds every file's bytes.
    # (A pass that may not defer, e.g. under a test's injected stat, reads
    # as usual: then nothing is pending.)
    flt = job.plan.path_filter()
    flt.reserved = job.reserved  # filled while it walks
    res = reconcile(
        job.project.root,
        flt,
        Manifest() if job.fresh or previous is None else previous,
        only=job.only,
        sink=sink,
        workers=walk_threads(job.project.root),
        trust_filter=not job.fresh,
        defer_reads=job.fresh and DEFER_REBUILD_READS,
        ctime_blind=job.ctime_blind,
    )
    bar.done()
    return res, contents


def _new_writer(job: _Pass) -> StoreWriter:
    from ctindex.indexing.analyse import reanalyzer
    from ctindex.store.writer import StoreWriter

    return StoreWriter(
        job.index_dir,
        job.base,
        fresh=job.fresh,
        reanalyze=reanalyzer(job.plan),
        sep=SEP,
        budget=_budget(job),
    )


def _budget(job: _Pass) -> BuildBudget:
    """What the pass's segment builds may hold (`max_build_memory_bytes`)."""
    from ctindex.store.budget import BuildBudget

    return BuildBudget(job.plan.settings.max_build_memory_bytes)


# Phase 2 (rebuilds only). A separate step because the walk deferred the
# reads: the workers read, hash and parse their key ranges, and only then
# does the result know every file's fingerprint and digest (`complete`).
def _analyse_deferred(job: _Pass, res: ReconcileResult) -> tuple[StoreWriter, Added]:
    """Parse the files the walk left unread into a new writer (left open
    for `_publish`)."""
    from ctindex.indexing.analyse import Reads, add_documents
    from ctindex.reconciler.capture import complete

    writer = _new_writer(job)
    try:
        reads = Reads(str(job.project.root), res.pending.by_key())
        res.pending = reads.pending  # the walk's order is not kept twice
        added = add_documents(
            writer,
            reads.pending.keys,
            reads,
            job.plan,
            job.index_dir,
            job.progress,
            _budget(job),
        )
        complete(res, added.shipments)
    except BaseException:
        writer.close()
        raise
    return writer, added


# Phase 3. The record of the pass is its own step because both endings
# (same generation, new generation) write it, and what the walk could not
# see must reach both the record and the report, never dropped silently.
def _pass_record(job: _Pass, res: ReconcileResult) -> tuple[JSONObject, list[str]]:
    """The pass record (store/passlog.py) and the walk's problems."""
    pass_info: JSONObject = {
        "kind": job.kind,
        "duration_ms": round(res.metrics.duration_ms, 3),
        "entries_visited": res.metrics.entries_visited,
        "files_hashed": res.metrics.files_hashed,
        "at_ns": time.time_ns(),
        "writer": build_id(),
    }  # which build wrote it: not the format version
    if job.reason:
        pass_info["reason"] = job.reason
    if job.only is None:  # a full walk saw every reserved name there is
        names = sorted(set(job.reserved))
        pass_info["reserved"] = len(names)
        pass_info["reserved_paths"] = list[JSON](names[:RESERVED_KEPT])
    problems = walk_problems(res.report)
    if problems:  # what the walk could not see is reported, never a silent drop
        pass_info["problems"] = list[JSON](problems)
    return pass_info, problems


def _counts(job: _Pass, res: ReconcileResult, problems: list[str]) -> UpdateReport:
    """The report's part that the walk alone decides."""
    # A view, not raw(): a table the native scan left packed stays packed.
    table = res.manifest.raw_view()
    return UpdateReport(
        added=len(res.added),
        changed=len(res.changed),
        removed=len(res.removed),
        renamed=len(res.renamed),
        metadata_only=len(res.metadata_only),
        dirty=len(res.dirty),
        entries_visited=res.metrics.entries_visited,
        reconcile_ms=round(res.metrics.duration_ms, 3),
        rebuilt=job.fresh or bool(job.stale),
        missing_roots=tuple(res.report.missing_roots.sample),
        reserved=tuple(sorted(set(job.reserved))) if job.only is None else (),
        notes=(*problems, BLIND_NOTE) if job.ctime_blind else tuple(problems),
        linked=recorded(table, res.linked),
        linked_full=job.only is None,
        seen=RecordedFiles(table, job.only),
    )


# Phase 4a. Nothing to index: a separate ending because it must stay cheap
# (no parser, no writer imported) and publishes no generation; at most the
# file table is re-recorded under the same one.
def _keep_generation(
    job: _Pass,
    base: StoreManifest,
    res: ReconcileResult,
    pass_info: JSONObject,
    counts: UpdateReport,
) -> UpdateReport:
    """The documents are unchanged; the file table may not be: new stat
    fingerprints (metadata only) or racily-clean files re-read now that
    they are old enough to be trusted. Recording those under the same
    generation spares re-reading them on every pass."""
    identity, refreshed, notes = base.identity, False, counts.notes
    previous = job.previous
    if counts.metadata_only or (previous is not None and newly_trusted(previous, res)):
        update = table_update(job.index_dir, base, previous, res, job.only is not None)
        if update.base is not None or update.delta != base.files_delta:
            from ctindex.store.writer import republish

            identity = republish(
                job.index_dir,
                base,
                files_table=update.base,
                files_delta=update.delta or {},
                reconcile=pass_info,
            ).identity
            refreshed = True
            notes = (
                *notes,
                "only file metadata changed: refreshed the file table (same generation)",
            )
    return replace(
        counts,
        generation=base.generation,
        identity=identity,
        documents=base.documents,
        errors=base.errors,
        warnings=base.warnings,
        refreshed=refreshed,
        notes=notes,
    )


# Phase 4b. A new generation: tombstones for what went, documents for what
# came, diagnostics carried over, one commit (the store's one publish point).
def _publish(
    job: _Pass,
    res: ReconcileResult,
    contents: dict[str, bytes],
    writer: StoreWriter | None,
    added: Added | None,
    pass_info: JSONObject,
    counts: UpdateReport,
) -> UpdateReport:
    from ctindex.indexing.analyse import add_documents

    base, fresh, stale, index_dir = job.base, job.fresh, job.stale, job.index_dir
    notes = list(counts.notes)
    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}
    if base is not None and base.diag and not fresh:
        errors, warnings = read_diag(index_dir / base.diag)
    before = (dict(errors), dict(warnings))
    if writer is None:
        writer = _new_writer(job)
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
            notes.append("re-indexed scope " + ", ".join(repr(r) for r in stale))
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
                notes.append(f"{key}: content not captured; will be retried")
            todo = sorted(k for k in todo if k in contents)
            added = add_documents(
                writer,
                todo,
                contents,
                job.plan,
                index_dir,
                job.progress,
                _budget(job),
            )
        errors.update(added.diagnostics.errors)
        warnings.update(added.diagnostics.warnings)
        diag = (errors, warnings) if fresh or (errors, warnings) != before else None
        files = table_update(
            index_dir, base, None if fresh or stale else job.previous, res, job.only is not None
        )
        meta = {
            "provider": provider_versions(),
            "scopes": scope_digests(job.plan),
            "plan_digest": job.plan.digest(),
            "source_bytes": files.source_bytes,
            "reconcile": pass_info,
        }
        m = writer.commit(files_table=files.base, meta=meta, diag=diag, files_delta=files.delta)
    finally:
        writer.close()
    return replace(
        counts,
        published=True,
        generation=m.generation,
        identity=m.identity,
        documents=m.documents,
        errors=m.errors,
        warnings=m.warnings,
        merged_segments=writer.merged,
        notes=tuple(notes),
    )
