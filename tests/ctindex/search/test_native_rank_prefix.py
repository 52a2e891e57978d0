"""A prefix's documents: ctindex/search/_rank.c `prefix_union` against its
specification, ctindex/search/native_rank.py `prefix_union_py` (hypothesis:
the same ids and the same damaged posting reported, both equal to a plain
union of the postings), and through a segment's partition on a real file:
the same matches with the C union and with CTINDEX_PURE=1, the expansions'
postings taken from the prefix's runs equal to the segment's own reads, and
a damaged posting raising IndexCorrupt that names its term either way.

The C comparisons skip where the extension is not built (CI builds it).
"""

from __future__ import annotations

import importlib
import random
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.base import native_modules
from ctindex.indexing.analyse import build_input
from ctindex.providers import okf_markdown as okf
from ctindex.providers.fields import FIELD_TERM
from ctindex.search import native_rank
from ctindex.search.index_partition import SegmentPartition
from ctindex.store.durable import IndexCorrupt
from ctindex.store.segment import ENTRY, S_POSTINGS
from ctindex.store.segment_build import build_segment
from ctindex.store.segment_read import Segment
from ctindex.store.snapshot import SegmentView


def _native() -> ModuleType:
    try:
        return importlib.import_module("ctindex.search._rank")
    except ImportError:
        pytest.skip("the native ranking loops are not built here")


def _pack(postings: list[list[int]], wide: bool, first: int) -> tuple[bytes, bytes]:
    """(postings bytes, packed entries) as a segment lays out adjacent terms:
    each posting's ids, then its tfs; entries give offsets from `first`."""
    code = "<I" if wide else "<H"
    data, entries = bytearray(), bytearray()
    for ids in postings:
        chunk = b"".join(struct.pack(code, d) for d in ids) + b"\x01\x00" * len(ids)
        entries += ENTRY.pack(first + len(data), len(ids), zlib.crc32(chunk) & 0xFFFFFFFF)
        data += chunk
    return bytes(data), bytes(entries)


_ids = st.lists(st.integers(0, 70), unique=True).map(sorted)


@settings(max_examples=400, deadline=None)
@given(
    postings=st.lists(_ids, max_size=12),
    wide=st.booleans(),
    first=st.integers(0, 1 << 40),
    ndocs=st.integers(0, 80),
)
def test_the_union_is_the_pure_one_and_the_plain_union(
    postings: list[list[int]], wide: bool, first: int, ndocs: int
) -> None:
    data, entries = _pack(postings, wide, first)
    pure = native_rank.prefix_union_py(data, first, entries, wide, ndocs)
    ids, bad = pure
    assert bad == -1
    every = {d for p in postings for d in p}
    if len(ids) < ndocs or every <= set(range(ndocs)):
        # No early stop, or a stop once every document was in: all of them.
        assert ids == every
    else:  # ids past ndocs (a damaged count): a stop may leave some out
        assert ids <= every and len(ids) >= ndocs
    assert _native().prefix_union(data, first, entries, wide, ndocs) == pure


@settings(max_examples=300, deadline=None)
@given(
    postings=st.lists(_ids.filter(bool), min_size=1, max_size=8),
    wide=st.booleans(),
    data_seed=st.randoms(use_true_random=False),
    how=st.sampled_from(["flip", "offset", "short"]),
)
def test_a_damaged_posting_is_reported_alike(
    postings: list[list[int]], wide: bool, data_seed: random.Random, how: str
) -> None:
    """A flipped byte, an entry pointing before the read, a read cut short:
    both report the same entry (the first damaged one in their order)."""
    first = 1000
    data, entries = _pack(postings, wide, first)
    victim = data_seed.randrange(len(postings))
    off, df, want = ENTRY.unpack_from(entries, victim * ENTRY.size)
    if how == "flip":
        at = off - first + data_seed.randrange(df * (6 if wide else 4))
        data = data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :]
    elif how == "offset":
        raw = bytearray(entries)
        ENTRY.pack_into(raw, victim * ENTRY.size, first - 2, df, want)
        entries = bytes(raw)
    else:
        data = data[: off - first + df * (6 if wide else 4) - 1]
    pure = native_rank.prefix_union_py(data, first, entries, wide, 10**6)
    assert pure[1] >= 0 and pure[0] == set()
    assert _native().prefix_union(data, first, entries, wide, 10**6) == pure


def test_the_union_refuses_malformed_entries() -> None:
    with pytest.raises(ValueError):
        native_rank.prefix_union_py(b"", 0, b"\x00" * 15, False, 3)
    with pytest.raises(ValueError):
        _native().prefix_union(b"", 0, b"\x00" * 15, False, 3)


# -- through a segment's partition ----------------------------------------------

WORDS = ["lyre", "lynx", "lying", "lymph", "lyric", "lab", "lyra", "mango", "zebra"]


@pytest.fixture
def segment_file(tmp_path: Path) -> Path:
    rng = random.Random(5)
    items = []
    for i in range(300):
        title = " ".join(rng.sample(WORDS, 2))
        body = " ".join(rng.choices(WORDS, k=rng.randint(1, 20)))
        doc = okf.parse(f"d{i:03d}.md", f"# {title}\n\n{body}\n".encode())
        assert isinstance(doc, okf.Document)
        items.append(build_input(doc))
    path = tmp_path / "s.seg"
    build_segment(path, items, okf.SEP)
    return path


def _partition(path: Path, deleted: frozenset[int] = frozenset()) -> SegmentPartition:
    seg = Segment(path)
    # No manifest entry: only the statistics read it, and these tests score nothing.
    return SegmentPartition(SegmentView(seg, None, deleted))  # type: ignore[arg-type]


@pytest.fixture(params=["native", "pure"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "pure":
        monkeypatch.setenv("CTINDEX_PURE", "1")
    else:
        monkeypatch.delenv("CTINDEX_PURE", raising=False)
        _native()
    native_modules.reset()
    assert (native_rank.module() is None) == (request.param == "pure")
    yield request.param
    native_modules.reset()


def test_prefix_matches_and_expansion_postings_are_the_segments(
    segment_file: Path, mode: str
) -> None:
    deleted = frozenset(range(0, 300, 17))
    part = _partition(segment_file, deleted)
    seg = Segment(segment_file)
    try:
        for prefix in ("ly", "l", "lyr", "m", "q", "lymphx"):
            terms = [t for t in seg.terms_with_prefix("") if t.startswith(prefix)]
            want = set().union(*(seg.postings(t)[0] for t in terms)) - deleted  # type: ignore[index]
            assert part.prefix_docs(prefix) == want, prefix
            assert part.terms_with_prefix(prefix) == terms, prefix
            # Scoring then reads the expansions in every field from the runs.
            for t in [*terms, prefix + "absent"]:
                for head in ("", *FIELD_TERM):
                    assert part.posting_arrays(head + t) == seg.postings(head + t), (head, t)
                    live = seg.postings(head + t)
                    n = 0 if live is None else len(set(live[0]) - deleted)
                    assert part.df(head + t) == n
    finally:
        seg.close()
        part.seg.close()


def _damage_posting(path: Path, term: str) -> None:
    seg = Segment(path)
    try:
        off, df, _, _ = seg.lookup(term)  # type: ignore[misc]
        at = seg.sections[S_POSTINGS][0] + off + df * seg.doc_size  # its first tf
    finally:
        seg.close()
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x40
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("term", ["lynx", "lyric"])
def test_a_damaged_posting_in_a_prefix_names_its_term(
    segment_file: Path, mode: str, term: str
) -> None:
    _damage_posting(segment_file, term)
    part = _partition(segment_file)
    try:
        assert part.prefix_docs("m") == part.term_docs("mango")  # other runs still read
        with pytest.raises(IndexCorrupt, match=f"postings of '{term}'"):
            part.prefix_docs(term[:4])  # the one term of its run
    finally:
        part.seg.close()


def test_a_damaged_expansion_posting_read_from_a_run_names_its_term(
    segment_file: Path, mode: str
) -> None:
    part = _partition(segment_file)
    try:
        title = FIELD_TERM[0] + "lynx"
        assert part.posting_arrays(title) is not None  # the title field holds it
    finally:
        part.seg.close()
    _damage_posting(segment_file, title)
    part = _partition(segment_file)
    try:
        part.terms_with_prefix("ly")  # the runs scoring reads from
        with pytest.raises(IndexCorrupt, match="postings of '\\\\x01tlynx'"):
            part.posting_arrays(title)
    finally:
        part.seg.close()
