"""reconcile -> parse -> write a segment -> publish a generation.

Every entry point takes the update lock, re-reads the published manifest
under it and builds on exactly that (spec §9). The reconciler hands over the
bytes it hashed (``sink``), so what is indexed is what the new file table
records, never a second, possibly torn, read.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ctindex import runtime as rt
from ctindex.policy.project import key_within
from ctindex.providers import okf_markdown as okf
from ctindex.store.durable import IndexCorrupt, read_all
from ctindex.store.generation import StoreManifest, read_diag, read_manifest
from ctindex.store.segment import BuildInput, StoredDoc

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.reconciler.manifest import Fingerprint

    LinkedEntry = tuple[Fingerprint, int]  # a file's recorded fingerprint and recorded_ns

STATUS_NAME = "last-reconcile.json"  # best-effort record of passes that published nothing
# The same for full passes only (update, rebuild, daemon audits): a narrowed
# pass after one must not hide when the tree was last compared in full.
FULL_STATUS_NAME = "last-full-reconcile.json"


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
    linked: dict[str, LinkedEntry] = field(default_factory=dict)
    linked_full: bool = False
    # Every file the pass recorded within what it walked (all roots, or the
    # keys it was narrowed to), same form, read lazily from the new file
    # table: the daemon watches each of these files itself
    # (ctindex/daemon/filewatch.py); nobody else pays for it.
    seen: Mapping[str, LinkedEntry] = field(default_factory=dict)

    @property
    def content_changed(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.renamed)

    def as_dict(self) -> dict[str, Any]:
        # `linked` and `seen` are the daemon's input, not part of `update
        # --json`; skipped before copying (asdict would deep-copy `seen`,
        # the whole new file table).
        skip = ("linked", "linked_full", "seen")
        return {
            f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name not in skip
        }


MAX_MESSAGE = 300  # characters kept of one provider error / warning


def clip(message: str) -> str:
    """Bound a diagnostic kept in the index (a YAML error can quote a long line)."""
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def scope_root_of(plan: Plan, key: str) -> str:
    found = plan.find_scope(key)
    return found[0].root if found else ""


def provider_versions() -> dict[str, Any]:
    return {
        "id": okf.PROVIDER_ID,
        "version": okf.PROVIDER_VERSION,
        "tokenizer_version": okf.TOKENIZER_VERSION,
    }


def scope_digests(plan: Plan) -> dict[str, str]:
    return {s.root: plan.scope_digest(s) for s in plan.scopes}


def rebuild_reason(m: StoreManifest | None, plan: Plan) -> str | None:
    """Why the published index can not serve this plan as is (None: it can)."""
    if m is None:
        return "no index yet"
    if m.provider != provider_versions():
        old = m.provider
        return (
            f"provider {old.get('id')} v{old.get('version')} tokenizer "
            f"v{old.get('tokenizer_version')} -> v{okf.PROVIDER_VERSION} tokenizer "
            f"v{okf.TOKENIZER_VERSION}"
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


def _under(key: str, roots: list[str]) -> bool:
    return any(not r or key == r or key.startswith(r + "/") for r in roots)


class RecordedFiles(Mapping[str, "LinkedEntry"]):
    """The entries of a pass's file table within what it walked, as
    (fingerprint, recorded_ns), made on access: a query that reconciles
    itself never builds 40,000 of them."""

    def __init__(self, raw: Mapping[str, Sequence[Any]], only: list[str] | None) -> None:
        from ctindex.reconciler import Fingerprint  # once: not per entry (an import costs ~4 µs)

        self._raw = raw
        self._inside = None if only is None else set(only)
        self._fp = Fingerprint

    def __contains__(self, key: object) -> bool:
        if self._inside is None:
            return key in self._raw
        return isinstance(key, str) and key in self._raw and key_within(key, self._inside)

    def __getitem__(self, key: str) -> LinkedEntry:
        e = self._raw[key]  # KeyError when absent
        if self._inside is not None and not key_within(key, self._inside):
            raise KeyError(key)
        return self._fp(*e[:5]), e[6]

    def __iter__(self) -> Iterator[str]:
        inside = self._inside
        return (
            iter(self._raw) if inside is None else (k for k in self._raw if key_within(k, inside))
        )

    def __len__(self) -> int:
        return len(self._raw) if self._inside is None else sum(1 for _ in self)


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


def walk_problems(walk: Any) -> list[str]:
    """One line per kind of thing the reconciler could not see, with a count
    and the first few keys (JSON-escaped: names may hold newlines)."""
    lines = []
    for name, meaning in _WALK_PROBLEMS:
        bucket = getattr(walk, name)
        if bucket.count:
            sample = ", ".join(json.dumps(k) for k in bucket.sample[:5])
            more = f" and {bucket.count - 5} more" if bucket.count > 5 else ""
            lines.append(f"{meaning}: {bucket.count} ({sample}{more})")
    return lines


def build_input(doc: okf.Document, analysis: okf.Analysis | None = None) -> BuildInput:
    a = okf.analyze(doc) if analysis is None else analysis
    stored = StoredDoc(
        doc.key,
        doc.concept_id,
        doc.scope,
        doc.title,
        doc.type,
        doc.description,
        doc.tags,
        doc.body,
        doc.size,
    )
    return BuildInput(stored, a.tokens, a.tfw, a.length, a.flens)


def _reanalyze(s: StoredDoc) -> BuildInput:
    doc = okf.Document(
        key=s.key,
        concept_id=s.concept_id,
        scope=s.scope,
        title=s.title,
        type=s.type,
        description=s.description,
        tags=s.tags,
        body=s.body,
        size=s.size,
    )
    return build_input(doc)


class Progress:
    """A one-line progress bar on stderr, only when it is a terminal."""

    def __init__(self, stream: TextIO | None, label: str) -> None:
        self.stream = stream if stream is not None and _isatty(stream) else None
        self.label = label
        self._last = 0.0
        self._shown = False

    def __call__(self, done: int, total: int | None) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        if total:
            width = 30
            fill = width * done // max(total, 1)
            line = f"{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}"
        else:
            line = f"{self.label}: {done} files read"
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self.stream is not None and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


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


def damage_reason(exc: BaseException, index_dir: Path) -> str:
    """`index repaired: <file>: <what>` with the file named relative to the index folder."""
    text = str(exc).replace(f"{index_dir}{os.sep}", "")
    for tail in (" (damaged index file)", " (damaged or truncated)", "; run `ctindex rebuild`"):
        text = text.replace(tail, "")
    return f"index repaired: {text}"


def check_generation(index_dir: Path, m: StoreManifest, *, file_table: bool = True) -> None:
    """The cheap integrity check of a published generation: every segment's
    header and term index, every tombstone and diagnostics file (a few KiB
    per segment) and, unless the caller loads it anyway, the file table.
    Raises IndexCorrupt. Deeper damage is caught by the reads that touch it,
    which verify their own checksums."""
    from ctindex.store.generation import read_dels
    from ctindex.store.segment import Segment
    from ctindex.store.snapshot import check_segment

    if file_table:
        load_file_table(index_dir, m)

    for ref in m.segments:
        try:
            seg = Segment(index_dir / ref.name)
        except FileNotFoundError as exc:
            raise IndexCorrupt(f"{index_dir / ref.name}: missing") from exc
        try:
            check_segment(seg, ref)
        finally:
            seg.close()
        if ref.dels:
            _checked(index_dir / ref.dels, read_dels)
    if m.diag:
        _checked(index_dir / m.diag, read_diag)


def _checked(path: Path, reader: Any) -> None:
    try:
        reader(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IndexCorrupt(f"{path}: unreadable ({exc})") from exc


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
    from ctindex.store.lock import DEFAULT_TIMEOUT_S, update_lock

    index_dir = Path(project.index_dir)
    with update_lock(index_dir, DEFAULT_TIMEOUT_S if timeout is None else timeout):
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
        from ctindex.store import gc

        gc.collect(index_dir)  # every writing pass, published or not (store/gc.py)
        return report


def load_file_table(index_dir: Path, m: StoreManifest, only: Iterable[str] | None = None) -> Any:
    """The reconciler file table a generation names (base + delta, empty when
    it names none): all of it, or only the entries under the keys `only`."""
    from ctindex.reconciler.diff import minimal_scopes
    from ctindex.store import filetable

    scopes = None if only is None else minimal_scopes(only)
    return filetable.load(index_dir, m.files, m.files_delta, None if scopes == [""] else scopes)


_load_files = load_file_table  # the daemon engine's name for it


def _apply(
    project: Project,
    plan: Plan,
    index_dir: Path,
    base: StoreManifest | None,
    previous: Any,
    only: list[str] | None,
    *,
    fresh: bool,
    stale: list[str],
    progress: TextIO | None,
    reason: str | None = None,
) -> UpdateReport:
    """Reconcile and publish. `fresh`: index everything anew. `stale`: scope
    roots whose documents are re-indexed from scratch (plan change), the
    rest of the index is updated incrementally."""
    from ctindex.reconciler import Fingerprint, Manifest, reconcile
    from ctindex.store.writer import StoreWriter

    t0 = time.perf_counter()
    contents: dict[str, bytes] = {}
    bar = Progress(progress, "reading")

    def sink(key: str, data: bytes) -> None:
        contents[key] = data
        bar(len(contents), None)

    if stale:  # forget what is known under stale scopes: all of it comes back as added
        previous = Manifest({k: e for k, e in previous.raw().items() if not _under(k, stale)})
    from ctindex.netfs import walk_threads

    # The table was built under this plan (a changed one means fresh or
    # stale scopes, whose entries are dropped above): its unchanged keys need
    # no filter call, which lets the native scan run (reconciler/native.py).
    res = reconcile(
        project.root,
        plan.path_filter(),
        Manifest() if fresh else previous,
        only=only,
        sink=sink,
        workers=walk_threads(project.root),
        trust_filter=not fresh,
    )
    bar.done()
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
    recorded = res.manifest.raw_view()
    report.linked = {
        k: (Fingerprint(*e[:5]), e[6]) for k in res.linked if (e := recorded.get(k)) is not None
    }
    report.linked_full = only is None
    report.seen = RecordedFiles(recorded, only)
    kind = "rebuild" if fresh else ("narrowed" if only is not None else "full")
    pass_info: dict[str, Any] = {
        "kind": kind,
        "duration_ms": report.reconcile_ms,
        "entries_visited": report.entries_visited,
        "files_hashed": res.metrics.files_hashed,
        "at_ns": time.time_ns(),
        "writer": rt.build_id(),
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
        report.documents = base.documents
        report.errors, report.warnings = base.errors, base.warnings
        # The documents are unchanged; the file table may not be: new stat
        # fingerprints (metadata only) or racily-clean files re-read now that
        # they are old enough to be trusted. Recording those under the same
        # generation spares re-reading them on every pass.
        if report.metadata_only or newly_trusted(previous, res):
            table, delta, _ = _file_table(index_dir, base, previous, res, only is not None)
            if table is not None or delta != base.files_delta:
                from ctindex.store.writer import republish

                republish(
                    index_dir, base, files_table=table, files_delta=delta or {}, reconcile=pass_info
                )
                report.refreshed = True
                report.notes.append(
                    "only file metadata changed: refreshed the file table (same generation)"
                )
        _record_pass(index_dir, pass_info)
        report.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
        return report

    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}
    if base is not None and base.diag and not fresh:
        errors, warnings = read_diag(index_dir / base.diag)
    before = (dict(errors), dict(warnings))
    writer = StoreWriter(index_dir, base, fresh=fresh, reanalyze=_reanalyze, sep=okf.SEP)
    try:

        def forget(key: str) -> None:
            writer.remove(key)
            errors.pop(key, None)
            warnings.pop(key, None)

        if stale:
            for key in [k for k in writer.live_keys() if _under(k, stale)]:
                forget(key)
            for key in [k for k in {**errors, **warnings} if _under(k, stale)]:
                forget(key)
            report.notes.append("re-indexed scope " + ", ".join(repr(r) for r in stale))
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
        roots = {k: scope_root_of(plan, k) for k in todo}
        workers = _workers(len(todo))
        if workers > 1:
            for name, info, errs, warns in _parallel(
                todo, contents, roots, index_dir, writer.generation, workers, progress
            ):
                writer.adopt(name, info)
                errors.update(errs)
                warnings.update(warns)
        else:
            bar = Progress(progress, "indexing")
            for n, key in enumerate(todo, 1):
                got = okf.parse(key, contents[key], roots[key])
                if isinstance(got, okf.ProviderError):
                    errors[key] = clip(got.message)
                else:
                    if got.warning:
                        warnings[key] = clip(got.warning)
                    writer.add(build_input(got))
                bar(n, len(todo))
            bar.done()
        diag = (errors, warnings) if fresh or (errors, warnings) != before else None
        table, delta, source_bytes = _file_table(
            index_dir, base, None if fresh or stale else previous, res, only is not None
        )
        meta = {
            "provider": provider_versions(),
            "scopes": scope_digests(plan),
            "plan_digest": plan.digest(),
            "source_bytes": source_bytes,
            "reconcile": pass_info,
        }
        m = writer.commit(files_table=table, meta=meta, diag=diag, files_delta=delta)
    finally:
        writer.close()
    report.published = True
    report.generation = m.generation
    report.documents = m.documents
    report.errors, report.warnings = m.errors, m.warnings
    report.merged_segments = writer.merged
    _record_pass(index_dir, pass_info)
    report.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
    return report


def newly_trusted(previous: Any, res: Any) -> bool:
    """True when the pass re-read racily-clean files (fingerprint too close
    to the time their content was read to be trusted, git's rule) that are
    now old enough: recording them spares re-reading them on every pass.
    While they are still within the window, recording would change nothing."""
    if not res.metrics.counts.get("racy_rehashed"):
        return False
    from ctindex.reconciler.fingerprint import racily_clean

    old = previous.raw()
    for key, e in res.manifest.raw().items():
        p = old.get(key)
        if p is not e and p != e and not racily_clean(e, e[6]):
            return True
    return False


def _file_table(
    index_dir: Path, base: StoreManifest | None, previous: Any, res: Any, partial: bool
) -> tuple[bytes | None, dict[str, Any] | None, int]:
    """(new base file or None, new inline delta or None, source bytes) for
    the table `res.manifest`. `previous` is the table the pass started from
    (`partial`: only the entries under a narrowed pass's folders); None:
    start over. The base is rewritten only when the delta outgrows
    DELTA_MAX keys (docs/format.md)."""
    from ctindex.store import filetable

    def size(e: Any) -> int:
        return e[0] if e is not None and e[0] > 0 else 0

    new = res.manifest.raw()
    if base is None or previous is None:
        return filetable.encode_base(new), None, sum(map(size, new.values()))
    old = previous.raw()
    change = filetable.changes(old, new)
    source = base.source_bytes + sum(size(new.get(k)) - size(old.get(k)) for k in change)
    merged = filetable.merge(filetable.delta_from_json(base.files_delta), change)
    if len(merged) <= filetable.DELTA_MAX:
        return None, filetable.delta_to_json(merged), source
    if partial:  # the pass saw part of the table: compact the whole of it
        full = dict(load_file_table(index_dir, base).raw())
        for k, e in change.items():
            if e is None:
                full.pop(k, None)
            else:
                full[k] = e
        new = full
    return filetable.encode_base(new), None, sum(map(size, new.values()))


# -- parallel indexing (large batches) -------------------------------------------------

PARALLEL_MIN_DOCS = 4000  # below this, forking costs more than it saves
MAX_WORKERS = 4
_JOB: tuple[dict[str, bytes], dict[str, str], Path] | None = None  # inherited by fork
_PARENT = [0]  # pid of the process that forked the workers


def _workers(docs: int) -> int:
    """How many processes to parse and build segments with (1 = in process)."""
    import multiprocessing

    if (
        docs < PARALLEL_MIN_DOCS
        or not sys.platform.startswith("linux")
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS, docs // (PARALLEL_MIN_DOCS // 2)))


def _parallel(
    keys: list[str],
    contents: dict[str, bytes],
    roots: dict[str, str],
    index_dir: Path,
    generation: int,
    workers: int,
    progress: TextIO | None,
) -> list[tuple[str, Any, dict[str, str], dict[str, str]]]:
    """Parse, analyse and write one segment per worker (forked: the file
    contents are shared, not pickled); key ranges are contiguous."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from ctindex.errors import IndexWriteError
    from ctindex.store.durable import unique_name

    global _JOB
    size = -(-len(keys) // workers)
    parts = [
        (unique_name("seg", generation, ".seg"), keys[i : i + size])
        for i in range(0, len(keys), size)
    ]
    bar = Progress(progress, f"indexing ({workers} processes)")
    bar(0, len(keys))
    _JOB = (contents, roots, index_dir)
    _PARENT[0] = os.getpid()
    out = []
    try:
        with ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init
        ) as pool:
            for got in pool.map(_build_part, parts):
                out.append(got)
                bar(sum(len(p[1]) for p in parts[: len(out)]), len(keys))
    except BrokenProcessPool as exc:
        raise IndexWriteError(
            f"{index_dir}: an indexing process died; nothing was published"
        ) from exc
    finally:
        _JOB = None
        bar.done()
    return out


def _worker_init() -> None:
    """A worker must never outlive or out-lock its parent: it drops the
    inherited update-lock descriptor and asks the kernel to kill it when the
    parent dies (Linux PR_SET_PDEATHSIG), e.g. after a SIGKILL mid-rebuild.

    It also runs without the cyclic GC: it builds one segment and exits, makes
    no garbage cycles worth collecting, and every collection would walk (and
    copy-on-write touch) the objects inherited from the parent and the
    millions of postings it allocates."""
    import ctypes
    import gc
    import signal

    gc.disable()
    from ctindex.store.lock import release_inherited

    release_inherited()
    with contextlib.suppress(OSError, AttributeError):  # _workers() only forks on Linux
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    if os.getppid() != _PARENT[0]:  # the parent died before prctl took effect
        os._exit(1)


def _build_part(part: tuple[str, list[str]]) -> tuple[str, Any, dict[str, str], dict[str, str]]:
    from ctindex.store.segment import build_segment

    assert _JOB is not None
    contents, roots, index_dir = _JOB
    name, keys = part
    docs: list[okf.Document] = []
    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}
    for key in keys:
        got = okf.parse(key, contents[key], roots[key])
        if isinstance(got, okf.ProviderError):
            errors[key] = clip(got.message)
        else:
            if got.warning:
                warnings[key] = clip(got.warning)
            docs.append(got)
    items = list(map(build_input, docs, okf.analyze_many(docs)))
    del docs
    info = build_segment(index_dir / name, items, okf.SEP, fault_point="mid-segment")
    return name, info, errors, warnings


def _record_pass(index_dir: Path, info: dict[str, Any]) -> None:
    """Remember the last pass for `status` (best effort: a read-only share skips it)."""
    names = [STATUS_NAME] if info.get("kind") == "narrowed" else [STATUS_NAME, FULL_STATUS_NAME]
    for name in names:
        target = index_dir / name
        tmp = index_dir / f"{name}.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps(info))
            os.replace(tmp, target)
        except OSError:
            pass


def last_pass(index_dir: Path, m: StoreManifest | None, *, full: bool = False) -> dict[str, Any]:
    """The most recent reconciliation recorded (manifest or status file);
    with `full`, the most recent full one (narrowed passes skipped)."""
    best: dict[str, Any] = dict(m.reconcile) if m is not None else {}
    if full and best.get("kind") == "narrowed":
        best = {}
    try:
        got = json.loads(read_all(index_dir / (FULL_STATUS_NAME if full else STATUS_NAME)))
        if isinstance(got, dict) and got.get("at_ns", 0) > best.get("at_ns", 0):
            best = got
    except (OSError, ValueError):
        pass
    return best
