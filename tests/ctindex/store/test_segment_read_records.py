"""What a Segment keeps between reads (segment_read.Kept: inflated record
blocks, checked token-stream runs, parsed records, checked postings): any
order of reads gives what a fresh reader gives, what is kept stays within
its budget (the newest always kept), and damage in a part not yet kept is
still found."""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctindex.indexing.analyse import build_input
from ctindex.providers import okf_markdown as okf
from ctindex.store import segment_read
from ctindex.store.durable import IndexCorrupt
from ctindex.store.segment import RECORD_BLOCK_DOCS
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


def against_fresh(path: Path, terms: list[str], seed: int, n: int) -> Iterator[tuple[str, Segment]]:
    """`n` random picks of `terms`, each with a segment opened afresh (and
    closed after), to compare a long-lived reader's answers with."""
    rng = random.Random(seed)
    for term in [rng.choice(terms) for _ in range(n)]:
        fresh = Segment(path)
        try:
            yield term, fresh
        finally:
            fresh.close()


def test_any_read_order_matches_a_fresh_reader_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_read, "RECORD_CACHE_BYTES", 150_000)
    monkeypatch.setattr(segment_read, "RUN_CACHE_BYTES", 20_000)
    monkeypatch.setattr(segment_read, "DOC_CACHE_BYTES", 50_000)
    path = tmp_path / "s.seg"
    make(path)
    rng = random.Random(3)
    kept = Segment(path)
    try:
        seen: set[int] = set()
        runs: set[int] = set()
        for docid in [rng.randrange(kept.ndocs) for _ in range(600)]:
            fresh = Segment(path)
            try:
                assert kept.stored(docid) == fresh.stored(docid)
                assert kept.sequence(docid) == fresh.sequence(docid)
            finally:
                fresh.close()
            for what, budget in (
                (kept._rblocks, 150_000),
                (kept._runs, 20_000),
                (kept._docs, 50_000),
            ):
                assert len(what) >= 1
                assert what.nbytes <= budget or len(what) == 1
            seen |= set(kept._rblocks.keys())
            runs |= set(kept._runs.keys())
        assert len(seen) > len(kept._rblocks) + 3  # blocks were dropped and read again
        assert len(runs) > len(kept._runs)
        kept.forget_blocks()
        assert not kept._rblocks and not kept._runs and not kept._docs
        assert kept._rblocks.nbytes == kept._runs.nbytes == kept._docs.nbytes == 0
    finally:
        kept.close()


def test_a_damaged_block_not_kept_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.seg"
    make(path)
    seg = Segment(path)
    try:
        seg.stored(0)  # block 0 kept
        last = seg.ndocs - 1
        assert last // RECORD_BLOCK_DOCS > 0  # in another block
        off, length, _ = seg.sections[segment_read.S_RECORDS]
        data = bytearray(path.read_bytes())
        data[off + length - 3] ^= 0xFF  # inside the last record block
        path.write_bytes(bytes(data))
        assert seg.stored(0).key == "d0000.md"  # checked when it was read
        with pytest.raises(IndexCorrupt, match="record block"):
            seg.stored(last)
    finally:
        seg.close()


def test_a_damaged_run_not_kept_is_reported_and_verify_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.seg"
    make(path)
    seg = Segment(path)
    try:
        seg.sequence(0)  # run 0 kept
        off, length, _ = seg.sections[segment_read.S_SEQS]
        data = bytearray(path.read_bytes())
        data[off + length - 1] ^= 0xFF  # inside the last run
        path.write_bytes(bytes(data))
        seg.sequence(0)
        with pytest.raises(IndexCorrupt, match="token streams"):
            seg.sequence(seg.ndocs - 1)
        data[off + length - 1] ^= 0xFF
        data[off] ^= 0xFF  # inside run 0, which a query kept: verify must still see it
        path.write_bytes(bytes(data))
        with pytest.raises(IndexCorrupt):
            seg.verify_all()
    finally:
        seg.close()


def test_keep_within_bounds_everything_kept(tmp_path: Path) -> None:
    """The daemon's query thread keeps less (ctindex/daemon/query.py KEEP_BYTES)."""
    path = tmp_path / "s.seg"
    make(path)
    seg = Segment(path)
    try:
        for docid in range(seg.ndocs):
            seg.stored(docid)
            seg.sequence(docid)
        assert seg.kept_bytes > 90_000
        seg.keep_within(90_000)
        for kept in (seg._rblocks, seg._runs, seg._docs, seg._postings):
            assert kept.nbytes <= 22_500 or len(kept) == 1
        for docid in range(0, seg.ndocs, 7):
            seg.stored(docid)
            assert seg._docs.nbytes <= 22_500 or len(seg._docs) == 1
    finally:
        seg.close()


def test_kept_postings_are_the_postings_read_afresh_and_damage_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_read, "POSTING_CACHE_BYTES", 400)
    path = tmp_path / "s.seg"
    make(path)
    kept = Segment(path)
    try:
        for term, fresh in against_fresh(path, [f"w{i}" for i in range(0, 500, 3)], 5, 400):
            assert kept.postings(term) == fresh.postings(term)
            assert kept._postings.nbytes <= 400 or len(kept._postings) == 1
        found = kept.lookup("w7")
        assert found is not None
        kept.forget_blocks()
        data = bytearray(path.read_bytes())
        data[kept.sections[segment_read.S_POSTINGS][0] + found[0]] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(IndexCorrupt, match="postings of 'w7'"):
            kept.postings("w7")
    finally:
        kept.close()


def test_kept_lookups_are_the_dictionarys_answers_absent_terms_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term's entry, or its absence, is kept within LOOKED_TERMS and is
    what a fresh reader finds; forgetting the blocks forgets them, so a
    damaged dictionary block is still found by the next lookup."""
    monkeypatch.setattr(segment_read, "LOOKED_TERMS", 7)
    path = tmp_path / "s.seg"
    make(path)
    kept = Segment(path)
    try:
        terms = [f"w{i}" for i in range(0, 520, 7)] + ["zz", "", "a"]
        for term, fresh in against_fresh(path, terms, 9, 300):
            assert kept.lookup(term) == fresh.lookup(term)
            assert len(kept._looked) <= 7
        assert kept.lookup("zz") is None and "zz" in kept._looked
        kept.forget_blocks()
        assert not kept._looked
        block = bisect_right(kept._first, b"w0") - 1  # the block holding w0
        data = bytearray(path.read_bytes())
        data[kept.sections[segment_read.S_BLOCKS][0] + kept._block_offs[block] + 4] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(IndexCorrupt, match=f"term block {block}"):
            kept.lookup("w0")
    finally:
        kept.close()
