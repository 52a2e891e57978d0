"""One write transaction on the store: upserts, tombstones, merges, publish.

The caller holds the update lock and hands in the manifest it re-read under
that lock. ``commit`` writes every new file completely (fsync), then the new
MANIFEST (temp sibling, rename, folder fsync), then removes files that
generations older than the grace period retired.
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctindex.store.budget import BuildBudget, estimate
from ctindex.store.durable import atomic_write, fault, fsync_dir, unique_name, write_new
from ctindex.store.generation import (
    LINEAGE,
    MANIFEST_NAME,
    SegmentRef,
    StoreManifest,
    manifest_identity,
    read_dels,
    write_dels,
    write_diag,
)
from ctindex.store.segment import StoredDoc
from ctindex.store.segment_build import BuildInput, SegmentBuilder, SegmentInfo
from ctindex.store.segment_read import Segment

if TYPE_CHECKING:
    from ctindex.base.jsontypes import JSONObject
    from ctindex.store.filetable import DeltaJSON
    from ctindex.store.generation import RetiredFile

# Merge policy: at most MAX_SEGMENTS segments that are not full (merging the
# smallest down to half that), and a segment with more than MAX_DELETED_RATIO
# of its documents tombstoned is rewritten without them. A full segment (its
# build used half the budget's share or more: budget.py) is not merged to
# lower the count, so a large index keeps more segments rather than copying
# them; every merge writes segments that fit the budget.
MAX_SEGMENTS = 8
MAX_DELETED_RATIO = 0.2
# A retired file stays on disk this long, so a reader that read the previous
# MANIFEST just before the swap can still open everything it names.
GRACE_NS = 60 * 1_000_000_000
clock_ns: Callable[[], int] = time.time_ns  # retirement times; tests move it on
OURS = ("seg-", "del-", "files-", "diag-")  # name prefixes of store files

Reanalyze = Callable[[StoredDoc], BuildInput]


class StoreWriter:
    def __init__(
        self,
        index_dir: Path,
        base: StoreManifest | None,
        *,
        fresh: bool,
        reanalyze: Reanalyze,
        sep: str,
        budget: BuildBudget | None = None,
    ) -> None:
        self.dir = index_dir
        self.budget = budget or BuildBudget()
        # Without a readable manifest, continue above every generation whose
        # files are still here: generations never go backwards for readers.
        self.base = base or StoreManifest(generation=highest_generation(index_dir))
        self.fresh = fresh
        self._reanalyze = reanalyze
        self._sep = sep
        self.refs = [] if fresh else [SegmentRef(**vars(r)) for r in self.base.segments]
        self._deleted: list[set[int]] = []
        self._locs: dict[str, tuple[int, int]] | None = None
        self._segments: list[Segment] = []
        self._dirty: set[int] = set()  # segments with new tombstones
        self.added: dict[str, BuildInput] = {}
        self._adopted: list[SegmentRef] = []
        self.merged = 0

    # -- locating current documents -------------------------------------------
    def _open_segments(self) -> None:
        if len(self._segments) < len(self.refs):
            for ref in self.refs[len(self._segments) :]:
                self._segments.append(Segment(self.dir / ref.name))
                self._deleted.append(set(read_dels(self.dir / ref.dels)) if ref.dels else set())

    def _load(self) -> dict[str, tuple[int, int]]:
        """Every live key's (segment, doc id): only for whole-index work."""
        if self._locs is None:
            self._open_segments()
            locs: dict[str, tuple[int, int]] = {}
            for si, seg in enumerate(self._segments):
                dels = self._deleted[si]
                for docid, key in enumerate(seg.keys()):
                    if docid not in dels:
                        locs[key] = (si, docid)
            self._locs = locs
        return self._locs

    def _locate(self, key: str) -> tuple[int, int] | None:
        """Where the live document of `key` is; a small update bisects each
        segment's sorted keys instead of loading every key (docs/decisions/perf.md)."""
        if self._locs is not None:
            return self._locs.get(key)
        self._open_segments()
        for si, seg in enumerate(self._segments):
            docid = seg.find(key)
            if docid is not None and docid not in self._deleted[si]:
                return si, docid
        return None

    def live_keys(self) -> list[str]:
        """Keys of the live documents (before this transaction's additions)."""
        return list(self._load())

    def contains(self, key: str) -> bool:
        return key in self.added or self._locate(key) is not None

    def remove(self, key: str) -> bool:
        """Tombstone the live document of `key` (if any)."""
        hit = self.added.pop(key, None) is not None
        loc = self._locate(key)
        if loc is None:
            return hit
        if self._locs is not None:
            del self._locs[key]
        si, docid = loc
        self._deleted[si].add(docid)
        self._dirty.add(si)
        ref = self.refs[si]
        ref.deleted += 1
        ref.length_sum -= self._segments[si].lengths()[docid]
        return True

    def add(self, item: BuildInput) -> None:
        """Upsert: the caller removed the old version first (asserted)."""
        key = item.doc.key
        if self._locate(key) is not None:
            self.remove(key)
        self.added[key] = item

    def adopt(self, name: str, info: SegmentInfo) -> None:
        """Take a segment built elsewhere (a worker process) for this
        generation; its keys must have been removed from the rest first."""
        self._adopted.append(_ref(name, info))

    @property
    def generation(self) -> int:
        """The generation this transaction will publish."""
        return self.base.generation + 1

    @property
    def changed(self) -> bool:
        return bool(self.added or self._adopted or self._dirty or self.fresh)

    # -- merge policy ------------------------------------------------------------
    def _pick_merges(self) -> set[int]:
        picked = {
            i
            for i, r in enumerate(self.refs)
            if r.ndocs == 0 or r.deleted / r.ndocs > MAX_DELETED_RATIO
        }
        # A segment's file size stands in for its text: larger, so the
        # estimate errs high.
        small = [
            i
            for i, r in enumerate(self.refs)
            if i not in picked and not self.budget.full(r.live, r.size)
        ]
        new = (1 if (self.added or picked) else 0) + len(self._adopted)
        if len(small) + new > MAX_SEGMENTS:
            small.sort(key=lambda i: self.refs[i].live)
            while small and len(small) + new > MAX_SEGMENTS // 2:
                picked.add(small.pop(0))
        return picked

    def _merged(self, merges: set[int]) -> Iterator[BuildInput]:
        """The documents added and the live ones of the segments merged, in
        key order, each analysed only when the build reaches it."""

        def live(si: int) -> Iterator[BuildInput]:
            seg, dels = self._segments[si], self._deleted[si]
            for docid in range(seg.ndocs):
                if docid not in dels:
                    yield self._reanalyze(seg.stored(docid))

        added = sorted(self.added.values(), key=_key)
        return heapq.merge(added, *(live(si) for si in sorted(merges)), key=_key)

    def _build(self, gen: int, items: Iterator[BuildInput]) -> list[tuple[str, SegmentInfo]]:
        """`items` (in key order) written as segments, a new one begun
        whenever the next document would take the current build past the
        budget's share."""
        out: list[tuple[str, SegmentInfo]] = []
        cap = self.budget.per_build
        builder: SegmentBuilder | None = None
        docs = text = 0
        for item in items:
            if builder is not None and estimate(docs + 1, text + item.doc.size) > cap:
                out.append(self._finish(gen, builder))
                builder = None
            if builder is None:
                builder, docs, text = SegmentBuilder(self._sep), 0, 0
            builder.add(item)
            docs += 1
            text += item.doc.size
        if builder is not None:
            out.append(self._finish(gen, builder))
        return out

    def _finish(self, gen: int, builder: SegmentBuilder) -> tuple[str, SegmentInfo]:
        name = unique_name("seg", gen, ".seg")
        return name, builder.finish(self.dir / name, fault_point="mid-segment")

    # -- publish -------------------------------------------------------------------
    def commit(
        self,
        *,
        files_table: list[bytes] | None,
        meta: dict[str, Any],
        diag: tuple[dict[str, str], dict[str, str]] | None,
        progress: Callable[[int, int], None] | None = None,
        files_delta: DeltaJSON | None = None,
    ) -> StoreManifest:
        """Write the new generation and publish it. `meta` fills the manifest
        fields provider/scopes/plan_digest/source_bytes/reconcile.
        `files_table`: a new file-table base (its delta then starts empty
        unless `files_delta` is given); else `files_delta` replaces the
        delta of the base kept (None: keep it as is)."""
        self._open_segments()
        gen = self.base.generation + 1
        merges = self._pick_merges()
        self.merged = len(merges)
        refs = [r for i, r in enumerate(self.refs) if i not in merges]
        refs += self._adopted
        new_files: list[str] = [r.name for r in self._adopted]
        built = self._build(gen, self._merged(merges))
        for name, info in built:
            new_files.append(name)
            refs.append(_ref(name, info))
        if built:
            fault("after-segment")
        for si in sorted(self._dirty - merges):
            ref = self.refs[si]
            name = unique_name("del", gen, ".del")
            write_dels(self.dir / name, self._deleted[si])
            ref.dels = name
            new_files.append(name)
        fault("after-dels")
        m = StoreManifest(
            generation=gen,
            created_ns=time.time_ns(),
            segments=refs,
            files=self.base.files,
            diag=self.base.diag,
            errors=self.base.errors,
            warnings=self.base.warnings,
            provider=dict(meta["provider"]),
            scopes=dict(meta["scopes"]),
            plan_digest=meta["plan_digest"],
            source_bytes=meta["source_bytes"],
            reconcile=dict(meta["reconcile"]),
        )
        m.files_delta = dict(self.base.files_delta)
        if files_table is not None:
            m.files = unique_name("files", gen, ".bin")
            write_new(self.dir / m.files, files_table)
            m.files_delta = {}
        if files_delta is not None:
            m.files_delta = files_delta
        if diag is not None:
            m.diag = unique_name("diag", gen, ".json")
            write_diag(self.dir / m.diag, *diag)
            m.errors, m.warnings = len(diag[0]), len(diag[1])
        fsync_dir(self.dir)
        now = clock_ns()
        m.retired = retired_after(self.base, m, now)
        publish(self.dir, m, self.base)
        self.close()
        m.retired = collect_garbage(self.dir, m, now)
        return m

    def close(self) -> None:
        for seg in self._segments:
            seg.close()
        self._segments = []


def republish(
    index_dir: Path,
    base: StoreManifest,
    *,
    files_table: list[bytes] | None,
    files_delta: DeltaJSON,
    reconcile: JSONObject,
) -> StoreManifest:
    """Record a new file table for the same documents: MANIFEST is replaced
    under the same generation number (the generation names content; a
    metadata-only change or a racily-clean re-check changes none). Same
    protocol as commit: a new base file is fsynced before MANIFEST names it."""
    m = copy.copy(base)  # the fields as they are, lists of its own where it changes them
    m.segments = [SegmentRef(**vars(r)) for r in base.segments]
    m.retired = list(base.retired)
    m.lineage = list(base.lineage)
    m.identity = ""  # until publish writes it
    m.reconcile = dict(reconcile)
    m.files_delta = files_delta
    if files_table is not None:
        m.files = unique_name("files", base.generation, ".bin")
        write_new(index_dir / m.files, files_table)
        fsync_dir(index_dir)
    now = clock_ns()
    m.retired = retired_after(base, m, now)
    publish(index_dir, m, base)
    m.retired = collect_garbage(index_dir, m, now)
    return m


def retired_after(base: StoreManifest, m: StoreManifest, now: int) -> list[RetiredFile]:
    """The retired list `m` publishes: what `base` named and `m` does not
    (retired `now`), and `base`'s own retired files still inside the grace
    period. Names past it are left out: collect_garbage removes them right
    after the publish, and if this process dies first, its stray rule does
    (a file's mtime is older than its retirement). Carrying them instead kept
    every file ever retired in MANIFEST, which every publish rewrites and
    every query reads: 5,273 names and 268 KB after a quarter of an hour of
    a daemon's passes."""
    referenced = m.referenced()
    kept = [r for r in base.retired if r[0] not in referenced and now - r[1] < GRACE_NS]
    return kept + [(n, now) for n in sorted(base.referenced() - referenced)]


def _home(index_dir: Path) -> list[int] | None:
    """The folder's device and inode; None through a network filesystem,
    where the client numbers them per mount (sshfs, NFS): the share host's
    daemon would take a client's publish for another folder's store
    (docs/network-shares.md, "A daemon on the share's host")."""
    from ctindex.policy.netfs import share_of

    if share_of([os.fspath(index_dir)]) is not None:
        return None
    st = os.stat(index_dir)
    return [st.st_dev, st.st_ino]


def publish(index_dir: Path, m: StoreManifest, base: StoreManifest) -> None:
    """The store's one publish point: MANIFEST swapped to name `m`, after
    every file it names was written and fsynced (docs/format.md, "Commit
    protocol"). `m` is given its lineage here (docs/format.md, "Lineage"):
    `base`'s store id (a new one for a store's first generation) and
    identity, and the folder it is published in; `m.identity` is then the
    identity of the bytes written."""
    m.store_id = base.store_id or secrets.token_hex(16)
    m.lineage = ([base.identity] if base.identity else []) + base.lineage[: LINEAGE - 1]
    m.home = _home(index_dir)
    data = m.to_bytes()
    atomic_write(index_dir / MANIFEST_NAME, data, fault_label="manifest")
    m.identity = manifest_identity(data)


def _key(item: BuildInput) -> str:
    return item.doc.key


def _ref(name: str, info: SegmentInfo) -> SegmentRef:
    return SegmentRef(
        name=name,
        ndocs=info.ndocs,
        length_sum=info.length_sum,
        size=info.size,
        head=info.head,
        field_sums=list(info.field_sums) or None,
    )


def collect_garbage(index_dir: Path, m: StoreManifest, now: int) -> list[RetiredFile]:
    """Remove retired files past the grace period and stray leftovers of
    writers that died before publishing. Returns the retired list still kept
    (it is written with the next generation; a stale list only delays removal)."""
    keep: list[RetiredFile] = []
    retired_names = set()
    for name, at in m.retired:
        if now - at >= GRACE_NS:
            _unlink(index_dir / name)
        else:
            keep.append((name, at))
            retired_names.add(name)
    referenced = m.referenced()
    for name in _listdir(index_dir):
        if name in referenced or name in retired_names:
            continue
        if name.startswith(OURS) or (name.startswith(MANIFEST_NAME) and name.endswith(".tmp")):
            try:
                age = now - os.stat(index_dir / name).st_mtime_ns
            except OSError:
                continue
            if age >= GRACE_NS:
                _unlink(index_dir / name)
    return keep


def highest_generation(index_dir: Path) -> int:
    """The largest generation number in the store's file names (0 if none)."""
    best = 0
    for name in _listdir(index_dir):
        if name.startswith(OURS):
            part = name.split("-")[1:2]
            if part and part[0].isdigit():
                best = max(best, int(part[0]))
    return best


def _listdir(folder: Path) -> Iterable[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _unlink(path: Path) -> None:
    # Already gone, or a read-only share: harmless, retried next time.
    with contextlib.suppress(OSError):
        os.unlink(path)
