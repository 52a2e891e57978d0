"""Lock-free readers: open one complete generation, retrying across a swap.

A reader reads MANIFEST, then opens every file it names. A writer may publish
a newer generation and (after the grace period) remove files of older ones in
between; the reader then finds a file missing or failing its checksum,
re-reads MANIFEST and starts over on the newer generation. Only when the same
generation fails twice is the index reported corrupt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import (
    ManifestReader,
    SegmentRef,
    StoreManifest,
    read_dels,
    read_manifest,
)
from ctindex.store.segment_read import Segment

T = TypeVar("T")
RETRIES = 6


class SegmentView:
    __slots__ = ("deleted", "ref", "segment")

    def __init__(self, segment: Segment, ref: SegmentRef, deleted: frozenset[int]) -> None:
        self.segment = segment
        self.ref = ref
        self.deleted = deleted

    def live(self, docid: int) -> bool:
        return docid not in self.deleted


class Snapshot:
    """One generation: its manifest and its open segments."""

    def __init__(self, index_dir: Path, manifest: StoreManifest, views: list[SegmentView]) -> None:
        self.index_dir = index_dir
        self.manifest = manifest
        self.views = views

    @property
    def generation(self) -> int:
        return self.manifest.generation

    def close(self) -> None:
        for v in self.views:
            v.segment.close()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_segment(seg: Segment, ref: SegmentRef) -> None:
    """Raise IndexCorrupt unless `seg` is the segment `ref` names: its header
    checksum passed on open; the header's checksum recorded in the manifest
    (it covers every section's checksum), the document count and the file
    size catch a valid segment of another store or generation under this
    name, and a truncated or extended one. Reading every byte is `verify`'s."""
    if seg.ndocs != ref.ndocs:
        raise IndexCorrupt(f"{seg.path}: holds {seg.ndocs} documents, manifest says {ref.ndocs}")
    if ref.size and seg.file_size() != ref.size:
        raise IndexCorrupt(f"{seg.path}: {seg.file_size()} bytes, manifest says {ref.size}")
    if ref.head and seg.head_crc != ref.head:
        raise IndexCorrupt(f"{seg.path}: not the segment the manifest names (header differs)")


def _open(index_dir: Path, manifest: StoreManifest) -> Snapshot:
    views: list[SegmentView] = []
    try:
        for ref in manifest.segments:
            seg = Segment(index_dir / ref.name)
            views.append(SegmentView(seg, ref, frozenset()))
            check_segment(seg, ref)
            if ref.dels:
                views[-1].deleted = read_dels(index_dir / ref.dels)
    except BaseException:
        for v in views:
            v.segment.close()
        raise
    return Snapshot(index_dir, manifest, views)


def open_snapshot(index_dir: Path) -> Snapshot | None:
    """The current generation, or None when nothing was ever published."""
    return with_snapshot(index_dir, lambda snap: snap, close=False)


def with_snapshot(index_dir: Path, work: Callable[[Snapshot], T], *, close: bool = True) -> T:
    """Run `work` on the current generation; retry on the newer one if the
    generation it opened was swapped out from under it (files gone/replaced).

    Raises IndexCorrupt when one generation keeps failing. ``work`` receives
    None-free snapshots; when no index exists FileNotFoundError is raised.
    """
    failed: dict[int, int] = {}
    last: Exception | None = None
    for attempt in range(RETRIES):
        manifest = read_manifest(index_dir)
        if manifest is None:
            raise FileNotFoundError(str(index_dir / "MANIFEST"))
        try:
            snap = _open(index_dir, manifest)
            try:
                return work(snap)
            finally:
                if close:
                    snap.close()
        except (FileNotFoundError, IndexCorrupt, OSError) as exc:
            last = exc
            gen = manifest.generation
            failed[gen] = failed.get(gen, 0) + 1
            if failed[gen] >= 3:
                break
            time.sleep(0.002 * (attempt + 1))
    if isinstance(last, IndexCorrupt):
        raise last
    raise IndexCorrupt(
        f"{index_dir}: index files missing or unreadable ({last}); run `ctindex rebuild`"
    )


def _same_documents(held: StoreManifest, published: StoreManifest) -> bool:
    """`published` serves exactly the documents of `held`: the same
    generation, plan, provider, store and segments (tombstones included);
    what may differ is the file table and the record of the last pass."""
    return (
        held.generation == published.generation
        and held.store_id == published.store_id
        and held.plan_digest == published.plan_digest
        and held.provider == published.provider
        and held.segments == published.segments
    )


class OpenGeneration:
    """The published generation, kept open between reads by a long-lived
    reader (the Python API's Index, the daemon's query path): on every call
    MANIFEST is checked (ctindex/store/generation.py ManifestReader: read
    again unless its full stat fingerprint vouches for the bytes read) and
    compared in full with the one held; only a different one opens the
    newer generation, and the older is closed then (its files may be
    collected: nothing reads them). Not thread-safe: one reader thread per
    instance."""

    def __init__(self, index_dir: Path, keep_bytes: int | None = None) -> None:
        self.index_dir = index_dir
        self.keep_bytes = keep_bytes  # per segment (Segment.keep_within); None: its defaults
        self.manifest = ManifestReader(index_dir)
        self.snap: Snapshot | None = None
        self.opened = 0  # generations opened so far

    def current(self) -> Snapshot:
        m = self.manifest.read()
        if m is not None and self.snap is not None and _same_documents(self.snap.manifest, m):
            # The same documents (the same manifest, or the same generation
            # whose file table alone was re-recorded: a pass that only
            # learnt racily clean files are settled); the segment files are
            # immutable, but one truncated or rewritten in place under us (a
            # restore, a careless copy) must not be read as the generation
            # held: IndexCorrupt. The manifest held is the one published, so
            # what a barrier vouched for (its identity) is checked against it.
            for view in self.snap.views:
                check_segment(view.segment, view.ref)
            self.snap.manifest = m
            return self.snap
        fresh = open_snapshot(self.index_dir)
        if fresh is None:
            raise FileNotFoundError(str(self.index_dir / "MANIFEST"))
        if self.keep_bytes is not None:
            for view in fresh.views:
                view.segment.keep_within(self.keep_bytes)
        self.close()
        self.snap = fresh
        self.opened += 1
        return fresh

    def close(self) -> None:
        if self.snap is not None:
            self.snap.close()
            self.snap = None
