"""A prefix's run of the term dictionary (Segment.prefix_postings,
terms_with_prefix, entry_in, postings_in) against the dictionary read
term by term: the same terms, entries and postings, across block
boundaries, for prefixes that match nothing, one term, or many."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.indexing.analyse import build_input
from ctindex.providers import okf_markdown as okf
from ctindex.store.segment import BLOCK_TERMS, ENTRY
from ctindex.store.segment_build import build_segment
from ctindex.store.segment_read import Segment

LETTERS = "abcdeéz"


@pytest.fixture(scope="module")
def seg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Segment]:
    rng = random.Random(3)
    words = sorted({"".join(rng.choices(LETTERS, k=rng.randint(2, 6))) for _ in range(900)})
    items = []
    for i in range(200):
        body = " ".join(rng.choices(words, k=30))
        doc = okf.parse(f"d{i:03d}.md", f"# {rng.choice(words)}\n\n{body}\n".encode())
        assert isinstance(doc, okf.Document)
        items.append(build_input(doc))
    path = tmp_path_factory.mktemp("prefix") / "s.seg"
    build_segment(path, items, okf.SEP)
    opened = Segment(path)
    yield opened
    opened.close()


def _every_term(seg: Segment) -> list[str]:
    terms = seg.terms_with_prefix("")
    assert len(terms) == seg.nterms > 4 * BLOCK_TERMS  # several blocks
    assert terms == sorted(terms)
    return terms


@settings(max_examples=150, deadline=None)
@given(prefix=st.text(LETTERS + "\x01t", min_size=1, max_size=4))
def test_a_prefix_run_is_the_dictionary_read_term_by_term(seg: Segment, prefix: str) -> None:
    want = [t for t in _every_term(seg) if t.startswith(prefix)]
    assert seg.terms_with_prefix(prefix) == want
    run = seg.prefix_postings(prefix)
    assert run.terms == want
    assert len(run.entries) == len(want) * ENTRY.size
    for t in want:
        found = seg.lookup(t)
        assert found is not None
        assert seg.entry_in(run, t) == found[:3]
        assert seg.postings_in(run, t) == seg.postings(t)
    absent = prefix + "\x7f"
    assert seg.entry_in(run, absent) is None and seg.postings_in(run, absent) is None
    if want:
        off, df, _ = ENTRY.unpack_from(run.entries, len(run.entries) - ENTRY.size)
        assert run.first == ENTRY.unpack_from(run.entries)[0]
        assert len(run.data) == off + df * (seg.doc_size + 2) - run.first
    else:
        assert run.data == b""
