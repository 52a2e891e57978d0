"""Segment.phrase_docs (one scan per run of token streams, C or pure,
read or kept) agrees with checking each document's stream on its own
(matcher.has_run), and a damaged stream is an IndexCorrupt."""

from __future__ import annotations

import importlib
import random
from pathlib import Path

import pytest

from ctindex.indexing.analyse import build_input
from ctindex.providers import okf_markdown as okf
from ctindex.search import native_rank
from ctindex.search.matcher import has_run
from ctindex.store import segment_read
from ctindex.store.durable import IndexCorrupt
from ctindex.store.segment import S_SEQS, SEQ_BLOCK_DOCS
from ctindex.store.segment_build import build_segment
from ctindex.store.segment_read import PhraseScan, Segment

WORDS = ["alpha", "beta", "gamma", "delta", "omega"]


def _scans() -> list[PhraseScan]:
    """The pure scan, and the C one where it is built (CI builds it)."""
    try:
        native = importlib.import_module("ctindex.search._rank")
    except ImportError:
        return [native_rank.phrase_scan_py]
    return [native_rank.phrase_scan_py, native.phrase_scan]


def _segment(tmp_path: Path) -> Path:
    rng = random.Random(7)
    items = []
    for i in range(3 * SEQ_BLOCK_DOCS + 5):  # several runs, the last one partial
        body = " ".join(rng.choices(WORDS, k=rng.randint(0, 12)))
        title = " ".join(rng.choices(WORDS, k=rng.randint(1, 2)))
        doc = okf.parse(f"d{i:04d}.md", f"# {title}\n\n{body}\n".encode())
        assert isinstance(doc, okf.Document)
        items.append(build_input(doc))
    path = tmp_path / "s.seg"
    build_segment(path, items, okf.SEP)
    return path


@pytest.mark.parametrize("budget", [segment_read.RUN_CACHE_BYTES, 1])
@pytest.mark.parametrize("scan", _scans())
def test_bulk_phrase_scan_matches_per_document_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: PhraseScan, budget: int
) -> None:
    # budget=1: the reader keeps only the run read last, so every phrase
    # reads its runs again; else the second scan of a phrase reads none.
    monkeypatch.setattr(segment_read, "RUN_CACHE_BYTES", budget)
    seg = Segment(_segment(tmp_path))
    try:
        everyone = list(range(seg.ndocs))
        found = 0
        for phrase in (
            ["alpha", "beta"],
            ["omega", "alpha"],
            ["beta", "beta", "beta"],
            ["gamma"],
            ["delta", "omega", "gamma"],
        ):
            want = [seg.rank(t) for t in phrase]
            assert all(r is not None for r in want), phrase
            expected = {d for d, seq in seg.sequences(everyone) if has_run(seq, want)}
            assert seg.phrase_docs(everyone, want, scan) == expected, phrase
            some = everyone[::3]  # only candidates can match
            assert seg.phrase_docs(some, want, scan) == expected & set(some), phrase
            found += len(expected)
        assert found > 100  # the phrases do occur, in many documents
    finally:
        seg.close()


@pytest.mark.parametrize("scan", _scans())
def test_a_damaged_token_stream_is_index_corrupt(tmp_path: Path, scan: PhraseScan) -> None:
    # One byte of the second run's streams flipped: a phrase reading that
    # run fails naming it, alone or among other runs, and again when asked
    # again (a run failing its check is not kept); the first run still
    # answers as before.
    path = _segment(tmp_path)
    seg = Segment(path)
    try:
        offs, _ = seg._seq_index()
        at = seg.sections[S_SEQS][0] + offs[SEQ_BLOCK_DOCS]  # the second run's first byte
        want = [seg.rank("alpha"), seg.rank("beta")]
        ranks = [r for r in want if r is not None]
        first_run = list(range(SEQ_BLOCK_DOCS))
        expected = {d for d, seq in seg.sequences(first_run) if has_run(seq, ranks)}
    finally:
        seg.close()
    assert len(ranks) == 2 and expected
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    seg = Segment(path)
    try:
        second_run = list(range(SEQ_BLOCK_DOCS, 2 * SEQ_BLOCK_DOCS))
        for ids in (second_run, list(range(seg.ndocs)), [0, SEQ_BLOCK_DOCS + 1], second_run):
            with pytest.raises(
                IndexCorrupt, match=f"token streams of documents {SEQ_BLOCK_DOCS}\\+"
            ):
                seg.phrase_docs(ids, ranks, scan)
        assert seg.phrase_docs(first_run, ranks, scan) == expected
    finally:
        seg.close()
