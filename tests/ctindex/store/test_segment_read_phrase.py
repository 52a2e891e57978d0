"""Segment.phrase_docs (one bytes.find scan per run of token streams) agrees
with checking each document's stream on its own (matcher.has_run)."""

from __future__ import annotations

import random
from pathlib import Path

from ctindex.indexing.analyse import build_input
from ctindex.providers import okf_markdown as okf
from ctindex.search.matcher import has_run
from ctindex.store.segment import SEQ_BLOCK_DOCS
from ctindex.store.segment_build import build_segment
from ctindex.store.segment_read import Segment

WORDS = ["alpha", "beta", "gamma", "delta", "omega"]


def test_bulk_phrase_scan_matches_per_document_check(tmp_path: Path) -> None:
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
    seg = Segment(path)
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
            assert seg.phrase_docs(everyone, want) == expected, phrase
            some = everyone[::3]  # only candidates can match
            assert seg.phrase_docs(some, want) == expected & set(some), phrase
            found += len(expected)
        assert found > 100  # the phrases do occur, in many documents
    finally:
        seg.close()
