"""Segment's kept record blocks (segment_read.RECORD_CACHE_BYTES): any order
of reads gives what a fresh reader gives, the blocks kept stay within the
budget (the newest always kept), and damage in a block not yet kept is
still found."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ctindex.indexing.analyse import build_input
from ctindex.providers import okf_markdown as okf
from ctindex.store import segment_read
from ctindex.store.durable import IndexCorrupt
from ctindex.store.segment_build import build_segment
from ctindex.store.segment_read import Segment


def make(path: Path, docs: int = 200) -> list[str]:
    rng = random.Random(11)
    items, bodies = [], []
    for i in range(docs):
        # Mostly small pages, now and then one large enough to fill a block alone.
        words = rng.randint(3, 40) if i % 37 else 20_000
        body = " ".join(f"w{rng.randint(0, 500)}" for _ in range(words))
        doc = okf.parse(f"d{i:04d}.md", f"# D {i}\n\n{body}\n".encode())
        assert isinstance(doc, okf.Document)
        items.append(build_input(doc))
        bodies.append(body)
    build_segment(path, items, okf.SEP)
    return bodies


def test_any_read_order_matches_a_fresh_reader_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_read, "RECORD_CACHE_BYTES", 150_000)
    path = tmp_path / "s.seg"
    make(path)
    rng = random.Random(3)
    kept = Segment(path)
    try:
        seen: set[int] = set()
        for docid in [rng.randrange(kept.ndocs) for _ in range(600)]:
            fresh = Segment(path)
            try:
                assert kept.stored(docid) == fresh.stored(docid)
            finally:
                fresh.close()
            assert len(kept._rblocks) >= 1
            assert kept._rblocks_bytes <= 150_000 or len(kept._rblocks) == 1
            assert kept._rblocks_bytes == sum(map(len, kept._rblocks.values()))
            seen |= set(kept._rblocks)
        assert len(seen) > len(kept._rblocks) + 3  # blocks were dropped and read again
        kept.forget_blocks()
        assert not kept._rblocks and kept._rblocks_bytes == 0
    finally:
        kept.close()


def test_a_damaged_block_not_kept_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.seg"
    make(path)
    seg = Segment(path)
    try:
        seg.stored(0)  # block 0 kept
        last = seg.ndocs - 1
        off, length, _ = seg.sections[segment_read.S_RECORDS]
        data = bytearray(path.read_bytes())
        data[off + length - 3] ^= 0xFF  # inside the last record block
        path.write_bytes(bytes(data))
        assert seg.stored(0).key == "d0000.md"  # checked when it was read
        with pytest.raises(IndexCorrupt, match="record block"):
            seg.stored(last)
    finally:
        seg.close()
