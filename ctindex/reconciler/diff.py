"""reconcile(): compare the tree (or part of it) with the previous manifest."""

from __future__ import annotations

import os
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ctindex.reconciler.fingerprint import DEFAULT_GRANULARITY_NS, fingerprint_of
from ctindex.reconciler.hashing import DEFAULT_RETRIES, Outcome, read_stable
from ctindex.reconciler.manifest import DIRTY_SIZE, Manifest, RawEntry
from ctindex.reconciler.pending import PendingReads
from ctindex.reconciler.report import PassMetrics, WalkReport
from ctindex.reconciler.walk import (
    DEFAULT_MAX_DEPTH,
    FileBatch,
    FsOps,
    NativeScan,
    PathFilter,
    StatFn,
    Unchanged,
    Walker,
)

Sink = Callable[[str, bytes], None]


# Beyond this many added+removed keys a fresh sort (lazily, if ever needed) is cheaper.
CARRY_SORTED_LIMIT = 2_000


@dataclass
class ReconcileResult:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (old, new)
    metadata_only: list[str] = field(default_factory=list)
    dirty: list[str] = field(default_factory=list)
    # Accepted files the walk found with st_nlink > 1 (unchanged ones included).
    linked: list[str] = field(default_factory=list)
    unchanged: int = 0
    manifest: Manifest = field(default_factory=Manifest)
    report: WalkReport = field(default_factory=WalkReport)
    metrics: PassMetrics = field(default_factory=PassMetrics)
    # defer_reads: the files still to read; the result is complete once
    # ctindex/reconciler/capture.py complete() has their outcomes (then empty).
    pending: PendingReads = field(default_factory=PendingReads)

    @property
    def has_changes(self) -> bool:
        """True if the new manifest differs from the previous one in any way."""
        return bool(
            self.added
            or self.changed
            or self.removed
            or self.renamed
            or self.metadata_only
            or self.dirty
        )


def normalize_key(key: str) -> str:
    key = key.strip("/")
    return "" if key == "." else key


def minimal_scopes(keys: Iterable[str]) -> list[str]:
    """Drop duplicates and keys already covered by an ancestor key."""
    uniq = sorted({normalize_key(k) for k in keys})
    if "" in uniq:
        return [""]
    chosen: set[str] = set()
    for k in uniq:  # sorted: an ancestor is always seen before its descendants
        parts = k.split("/")
        if not any("/".join(parts[:i]) in chosen for i in range(1, len(parts))):
            chosen.add(k)
    return sorted(chosen)


def subtree(sorted_keys: list[str], key: str) -> list[str]:
    """Keys equal to `key` or below it, from a sorted key list."""
    if not key:
        return list(sorted_keys)
    out: list[str] = []
    i = bisect_left(sorted_keys, key)
    if i < len(sorted_keys) and sorted_keys[i] == key:
        out.append(key)
    # '0' follows '/' in code-point order, so [key/, key0) is exactly the subtree.
    lo = bisect_left(sorted_keys, key + "/")
    hi = bisect_left(sorted_keys, key + "0", lo)
    out.extend(sorted_keys[lo:hi])
    return out


class _Pass:
    def __init__(
        self,
        base: str,
        flt: PathFilter,
        previous: Manifest,
        sink: Sink | None,
        stat: StatFn,
        clock_ns: Callable[[], int],
        granularity_ns: int,
        max_depth: int,
        retries: int,
        ops: FsOps | None,
        workers: int = 0,
        native: bool = False,
        defer_reads: bool = False,
        ctime_blind: bool = False,
    ) -> None:
        self.previous = previous
        self.ctime_blind = ctime_blind
        if ctime_blind:  # the rule differs: every listed file goes through on_files
            native = False
        self.defer_reads = defer_reads
        # With the native scan the previous table stays packed (no dict of
        # 200k tuples); entries are looked up one by one for the few files
        # that differ (ctindex/reconciler/native.py).
        # Not with parallel listing threads: those prefetch DirEntry objects
        # for latency-bound filesystems (ctindex/reconciler/parallel_walk.py).
        table = previous.native_table() if native and workers == 0 and stat is os.lstat else None
        self.native = (
            None if table is None else NativeScan(table, bytearray(table.size), granularity_ns)
        )
        self.prev: dict[str, RawEntry] | None = None if self.native else previous.raw()
        self.prev_get: Callable[[str], RawEntry | None] = (
            previous.lookup if self.prev is None else self.prev.get
        )
        # Unchanged entries are only noted in `seen` (cheap append); the new table is
        # the previous one copied in C plus `updates`, minus what is gone.
        self.updates: dict[str, RawEntry] = {}
        self.seen: list[str] = []
        self.kept: list[str] = []
        self.fresh: list[str] = []  # hashed keys absent from the previous manifest
        self.res = ReconcileResult()
        self.sink = sink
        self.stat = stat
        self.injected_stat = None if stat is os.lstat else stat
        self.clock_ns = clock_ns
        self.gran = granularity_ns
        self.retries = retries
        self.ops = ops or FsOps()
        self.base = base
        self.unchanged = (
            Unchanged(self.prev, granularity_ns, self.seen)
            if self.prev is not None and not ctime_blind
            else None
        )
        args = (
            base,
            flt,
            stat,
            self.on_files,
            self.kept.append,
            self.res.report,
            self.res.metrics,
            max_depth,
            self.ops,
            self.unchanged,
        )
        if workers > 0:  # latency-bound filesystems (ctindex/reconciler/parallel_walk.py)
            from ctindex.reconciler.parallel_walk import ParallelWalker

            self.walker: Walker = ParallelWalker(*args, workers=workers)
        else:
            self.walker = Walker(*args, native=self.native)
        if self.native is not None and self.walker.native is None:  # an injected listing
            self.native = None
            self.prev = previous.raw()
            self.prev_get = self.prev.get
            self.unchanged = self.walker.unchanged = Unchanged(self.prev, granularity_ns, self.seen)

    def on_files(self, dfd: int, files: FileBatch) -> None:
        """One call per folder; a full fingerprint match costs no read. With the
        default stat the walker already applied this rule (walk.Unchanged) and
        hands over only the files that failed it."""
        res, gran = self.res, self.gran
        if self.defer_reads:  # from nothing (reconcile() decides): every file is read later
            add = res.pending.add
            for _name, key, st in files:
                add(key, st)
            return
        if self.ctime_blind:
            self._on_files_blind(dfd, files)
            return
        prev_get = self.prev_get
        seen = self.seen.append
        trusted = 0
        for name, key, st in files:
            p = prev_get(key)
            if (
                p is not None
                and p[0] == st.st_size
                and p[1] == st.st_mtime_ns
                and p[2] == st.st_ctime_ns
                and p[3] == st.st_ino
                and p[4] == st.st_dev
            ):
                rec = p[6]
                # git's racy-clean rule: trust the fingerprint only if both stamps are
                # at least one granularity older than the moment the content was read.
                if rec - p[1] >= gran and rec - p[2] >= gran:
                    seen(key)
                    trusted += 1
                    continue
                res.metrics.bump("racy_rehashed")
            self._hash(dfd, name, key, st, p)
        res.unchanged += trusted

    def _on_files_blind(self, dfd: int, files: FileBatch) -> None:
        """on_files where the filesystem keeps no ctime of its own and numbers
        inodes itself (reconcile(ctime_blind=True)): size and mtime, at the
        precision the mount shows, are all a stat can tell, so they are the
        rule. So is the racy rule on mtime: a write after the record moves
        the mtime a granularity on, to another second. Its ctime half is
        left out: the mount cannot show a ctime, and the record's (made
        where the files live) is often recent for an old mtime (`cp -p`).
        The loop is on_files' with the other rule, written out rather than
        passed in: a rule called per file would slow the local walk's loop."""
        res, gran, prev_get, seen = self.res, self.gran, self.prev_get, self.seen.append
        trusted = 0
        for name, key, st in files:
            p = prev_get(key)
            if p is not None and p[0] == st.st_size and same_mtime(p[1], st.st_mtime_ns):
                if p[6] - p[1] >= gran:
                    seen(key)
                    trusted += 1
                    continue
                res.metrics.bump("racy_rehashed")
            self._hash(dfd, name, key, st, p)
        res.unchanged += trusted

    def _hash(self, dfd: int, name: str, key: str, st: os.stat_result, p: RawEntry | None) -> None:
        res = self.res
        r = read_stable(
            dfd,
            name,
            f"{self.base}/{key}",
            fingerprint_of(st),
            self.injected_stat,
            self.clock_ns,
            self.retries,
            self.ops.open,
        )
        if r.outcome is Outcome.GONE:
            res.report.vanished.add(key)
            return
        if r.outcome is Outcome.ERROR:
            assert r.error is not None
            self.walker.fail(key, r.error, is_dir=False)  # keeps the previous entry
            return
        if r.outcome is Outcome.DIRTY:
            res.dirty.append(key)
            if p is not None:  # keep the old digest, but make sure it is re-hashed next time
                self.updates[key] = (DIRTY_SIZE, *p[1:])
            return
        assert r.fp is not None
        res.metrics.files_hashed += 1
        res.metrics.bytes_hashed += len(r.data)
        self.updates[key] = (*r.fp, r.digest, r.recorded_ns)
        if p is None:
            self.fresh.append(key)
        elif r.digest != p[5]:
            res.changed.append(key)
        elif r.fp != p[:5]:
            res.metadata_only.append(key)
            return
        else:
            res.unchanged += 1  # racily clean, re-hashed, same content
            return
        if self.sink is not None:
            self.sink(key, r.data)

    # -- assembling the result -----------------------------------------------------
    def finish(self, scopes: list[str] | None) -> ReconcileResult:
        # Walk-time counters in one order whichever path bumped them first.
        self.res.metrics.counts = dict(sorted(self.res.metrics.counts.items()))
        if self.native is not None:
            return self._finish_native(self.native)
        prev, updates, res = self.prev, self.updates, self.res
        assert prev is not None
        if self.unchanged is not None:  # (none where ctime_blind: on_files counted)
            res.unchanged += self.unchanged.count
        new = dict(prev)
        new.update(updates)
        # Every key met in prev was either noted in `seen` or updated (fresh keys were not in prev).
        met_prev = len(self.seen) + len(updates) - len(self.fresh)
        if scopes is None and met_prev == len(prev):
            gone: list[str] = []  # the common case: no set of 200k keys to build
        else:
            sorted_prev = self.previous.sorted_keys()
            known = set(self.seen)
            known.update(updates)
            for k in self.kept:  # we could not look: carry what we knew
                known.update(subtree(sorted_prev, k))
            candidates = (
                prev if scopes is None else (k for s in scopes for k in subtree(sorted_prev, s))
            )
            gone = [k for k in candidates if k not in known]
            for k in gone:
                del new[k]
        fresh = sorted(self.fresh)
        self._pair_renames(sorted(gone), fresh)
        res.manifest = Manifest(new, self._carry_sorted(gone, fresh))
        return self._summarize()

    def _finish_native(self, nat: NativeScan) -> ReconcileResult:
        """finish() for a full pass whose unchanged entries the native scan
        marked in `nat.seen` instead of listing them in `self.seen`."""
        updates, res = self.updates, self.res
        res.unchanged += nat.trusted
        met_prev = nat.trusted + len(self.seen) + len(updates) - len(self.fresh)
        gone: list[str] = []
        if met_prev != nat.table.live:
            known = set(self.seen)
            known.update(updates)
            kept = set(self.kept)

            def carried(key: str) -> bool:  # at or under a key we could not look at
                if key in kept or "" in kept:
                    return True
                cut = key.rfind("/")
                while cut > 0:
                    if key[:cut] in kept:
                        return True
                    cut = key.rfind("/", 0, cut)
                return False

            for raw_key in nat.table.unseen(nat.seen):
                k = raw_key.decode("utf-8", "surrogateescape")
                if k not in known and not (kept and carried(k)):
                    gone.append(k)
        packed = self.previous.packed() if updates or gone else None
        if not updates and not gone:
            res.manifest = self.previous  # immutable: the same table, still packed
        elif packed is not None:
            # The previous table edited where this pass found changes: no
            # tuple for each of the files it trusted (a daemon's audit of a
            # million files with a few changed ones).
            edits: dict[str, RawEntry | None] = dict(updates)
            edits.update((k, None) for k in gone)
            table = packed.edited(edits)
            res.manifest = Manifest(source=table, _sorted_keys=table.keys)
        else:
            new = dict(self.previous.raw())
            new.update(updates)
            for k in gone:
                del new[k]
            res.manifest = Manifest(new)
        self._pair_renames(sorted(gone), sorted(self.fresh))
        return self._summarize()

    def _summarize(self) -> ReconcileResult:
        self.res.linked = self.walker.linked
        return _count(self.res)

    def _carry_sorted(self, gone: list[str], fresh: list[str]) -> list[str] | None:
        """Derive the new sorted key list from the previous one when that is cheap,
        so chained narrowed passes (the daemon) never re-sort the whole table."""
        old = self.previous.known_sorted_keys()
        if old is None or len(gone) + len(fresh) > CARRY_SORTED_LIMIT:
            return None
        if gone:
            dropped = set(gone)
            keys = [k for k in old if k not in dropped]
        else:
            keys = list(old)
        for k in fresh:
            insort(keys, k)
        return keys

    def _pair_renames(self, gone: list[str], fresh: list[str]) -> None:
        """A removed path whose (dev, ino) or digest equals an added one's is a rename."""
        prev_get, new, res = self.prev_get, self.updates, self.res
        by_inode: dict[tuple[int, int], str] = {}
        by_digest: dict[bytes, str] = {}
        for k in gone:
            e = prev_get(k)
            assert e is not None  # gone keys come from the previous table
            if e[3]:  # an inode number of 0 means "not provided"
                by_inode.setdefault((e[3], e[4]), k)
            by_digest.setdefault(e[5], k)
        used: set[str] = set()
        for k in fresh:
            e = new[k]
            old = by_inode.get((e[3], e[4])) if e[3] else None
            if old is None or old in used:
                old = by_digest.get(e[5])
            if old is not None and old not in used:
                used.add(old)
                res.renamed.append((old, k))
            else:
                res.added.append(k)
        res.removed = [k for k in gone if k not in used]


def _count(res: ReconcileResult) -> ReconcileResult:
    for lst in (res.changed, res.metadata_only, res.dirty):
        lst.sort()
    m = res.metrics
    for kind in ("added", "changed", "removed", "renamed", "metadata_only", "dirty"):
        m.counts[kind] = len(getattr(res, kind))
    m.counts["unchanged"] = res.unchanged
    return res


def finish_fresh(res: ReconcileResult, manifest: Manifest, keys: list[str]) -> None:
    """A pass that started from an empty manifest, finished with the table
    of the files read (`keys`: its keys, sorted): every one of them is added
    (nothing before it to be renamed or changed). For
    ctindex/reconciler/capture.py complete()."""
    res.added = keys
    res.manifest = manifest
    _count(res)


def same_mtime(recorded_ns: int, shown_ns: int) -> bool:
    """A recorded mtime against one a ctime-blind mount shows. Such a mount
    may show whole seconds only (sftp carries seconds): the record, made
    where the files live, then agrees to the second."""
    if shown_ns % 1_000_000_000:
        return recorded_ns == shown_ns
    return recorded_ns // 1_000_000_000 == shown_ns // 1_000_000_000


def reconcile(
    base: Path | str,
    flt: PathFilter,
    previous: Manifest,
    only: Iterable[str] | None = None,
    sink: Sink | None = None,
    stat: StatFn = os.lstat,
    clock_ns: Callable[[], int] = time.time_ns,
    *,
    granularity_ns: int = DEFAULT_GRANULARITY_NS,
    max_depth: int = DEFAULT_MAX_DEPTH,
    retries: int = DEFAULT_RETRIES,
    ops: FsOps | None = None,
    workers: int = 0,
    trust_filter: bool = False,
    defer_reads: bool = False,
    ctime_blind: bool = False,
) -> ReconcileResult:
    """Diff the filtered tree under `base` against `previous` (see docs/architecture.md).

    `only` narrows the pass to those keys (files, or folders meaning their
    subtree); entries outside it are carried over unchanged. `workers` > 0
    lists and stats folders with that many requests in flight (same result;
    for network filesystems, ctindex/reconciler/parallel_walk.py).

    `trust_filter`: `previous` was built by this same `flt` (same plan), so
    a key it holds whose full fingerprint is unchanged is accepted again
    without asking the filter. It allows the native scan (ctindex/reconciler/native.py)
    on full serial passes; the result is the same either way.

    `defer_reads`: read nothing if this pass may defer (a full pass from an
    empty `previous` on the default stat: ctindex/reconciler/capture.py says why);
    the files to read are then `result.pending` (`sink` gets nothing), and
    the result is complete once ctindex/reconciler/capture.py complete() has their
    outcomes. A pass that may not defer reads as usual, `pending` empty.

    `ctime_blind`: the tree is seen through a filesystem that keeps no ctime
    of its own and gives its own inode and device numbers (sshfs; the
    caller tests it: ctindex/reconciler/ctime_probe.py). The full fingerprint
    then tells no more than size and mtime, and its inode and device parts
    differ from a record made where the files live, so every such file
    would be re-read. The rule becomes size and mtime (same_mtime); a
    same-size rewrite that restores the mtime is then not seen, which the
    caller must say wherever it vouches for the result.
    """
    defer_reads = defer_reads and not len(previous) and only is None and stat is os.lstat
    t0 = time.perf_counter_ns()
    scopes = None if only is None else minimal_scopes(only)
    if scopes == [""]:
        scopes = None
    p = _Pass(
        os.path.abspath(os.fspath(base)),
        flt,
        previous,
        sink,
        stat,
        clock_ns,
        granularity_ns,
        max_depth,
        retries,
        ops,
        workers,
        native=trust_filter and scopes is None,
        defer_reads=defer_reads,
        ctime_blind=ctime_blind,
    )
    # All roots, even nested ones: a nested root may sit under a pruned folder.
    roots = sorted({normalize_key(r) for r in flt.roots()})
    if scopes is None:
        p.walker.walk_roots(roots)
    else:
        for s in scopes:
            for r in roots:
                if r == s or r.startswith(s + "/"):
                    p.walker.walk_root(r)
                elif not r or s.startswith(r + "/"):
                    p.walker.walk_path(r, s)
    res = p.finish(scopes)
    res.metrics.duration_ms = (time.perf_counter_ns() - t0) / 1e6
    return res
