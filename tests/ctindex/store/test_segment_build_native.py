"""The native segment builder (ctindex/store/_invert.c) against its pure
specification in ctindex/store/invert.py: the same bytes for any input
(hypothesis), the same refusals, and whole segment files byte-identical.

Skipped where the extension is not built (an install without a compiler);
CI builds it, so there these tests always run.
"""

from __future__ import annotations

import importlib
import json
import random
import zlib
from bisect import bisect_left
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex.base import native_modules
from ctindex.store import invert, segment, segment_build
from ctindex.store.native_invert import Inverter
from ctindex.store.segment import StoredDoc
from ctindex.store.segment_build import BuildInput, build_segment
from ctindex.store.segment_read import Segment


def _native() -> ModuleType:
    try:
        return importlib.import_module("ctindex.store._invert")
    except ImportError:
        pytest.skip("the native segment builder is not built here")


# Terms as the analysis makes them: words from any script (non-BMP too),
# with the ranking prefixes (control characters) the provider adds.
_terms = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12
) | st.sampled_from(["\x01ta", "\x02tx y", "\x00type:a b", "a", "b", "é", "\U0001d518"])
# Token streams hold words only: no SEP inside, nothing that sorts with the
# facet and ranking terms (segment.WORD_START).
_words = _terms.filter(lambda t: "\x00" not in t and t >= segment.WORD_START)
_tfw = st.dictionaries(_terms, st.integers(min_value=0, max_value=200_000), max_size=12)


def _feed(inverter: Inverter, docs: list[tuple[dict[str, int], list[str]]]) -> None:
    for tfw, tokens in docs:
        inverter.add(tfw, tokens)


def _outputs(inverter: Inverter, docs32: bool) -> tuple[object, ...]:
    """postings(), then streams() of the word terms at both widths' choice."""
    terms, postings, entries = inverter.postings(docs32)
    word_base = bisect_left(terms, segment.WORD_START)
    streams = inverter.streams(word_base, len(terms) - word_base >= 0xFFFF)
    return terms, postings, entries, word_base, streams


@st.composite
def _documents(draw: st.DrawFn) -> list[tuple[dict[str, int], list[str]]]:
    """Documents as a segment gets them: each one's dict, and a token stream of
    words that are terms of this document, of another one (before or after
    it), and the separator."""
    tfws = draw(st.lists(_tfw, max_size=40))
    words = sorted({t for tfw in tfws for t in tfw if t >= segment.WORD_START and "\x00" not in t})
    pool = [*words, "\x00"]
    rng = random.Random(draw(st.integers(0, 2**32)))
    return [(tfw, rng.choices(pool, k=rng.randrange(0, 30)) if words else []) for tfw in tfws]


@settings(max_examples=300, deadline=None)
@given(docs=_documents(), docs32=st.booleans())
@pytest.mark.slow
def test_inverter_matches_the_pure_one(
    docs: list[tuple[dict[str, int], list[str]]], docs32: bool
) -> None:
    native = _native().Inverter("\x00")
    pure = invert.PyInverter("\x00")
    _feed(native, docs)
    _feed(pure, docs)
    assert _outputs(native, docs32) == _outputs(pure, docs32)


# Terms that share long heads (the sort compares 16 bytes of UTF-8 first),
# with NULs, lone surrogates (a file name's surrogate escapes reach the ID
# terms) and every width of code point.
_heads = st.sampled_from(
    ["", "\x01t", "\x02title words ", "a" * 15, "a" * 16, "é" * 7, "\U0001d518" * 4]
)
_tails = st.text(alphabet=st.characters(), max_size=6)


@settings(max_examples=300, deadline=None)
@given(terms=st.lists(st.tuples(_heads, _tails).map("".join), min_size=1, max_size=60))
def test_terms_come_out_in_code_point_order(terms: list[str]) -> None:
    inverter = _native().Inverter("\x00")
    for i in range(0, len(terms), 7):
        inverter.add(dict.fromkeys(terms[i : i + 7], 1), [])
    got, _, _ = inverter.postings(False)
    assert got == sorted(set(terms))


def test_more_than_one_checksum_block_of_streams() -> None:
    """Streams of more documents than SEQ_BLOCK_DOCS, some empty, at both widths."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(50)]
    docs = [
        (
            {w: rng.randrange(1, 9) for w in rng.sample(words, 5)},
            rng.choices(words, k=rng.randrange(0, 9)),
        )
        for _ in range(150)
    ]
    docs.append(({w: 1 for w in words}, ["\x00", *words]))  # every token is some document's term
    for seq32 in (False, True):
        native, pure = _native().Inverter("\x00"), invert.PyInverter("\x00")
        _feed(native, docs)
        _feed(pure, docs)
        got = [inv.postings(False) for inv in (native, pure)]
        assert got[0] == got[1]
        assert native.streams(0, seq32) == pure.streams(0, seq32)


def test_the_separator_stays_the_separator_even_as_a_term() -> None:
    """A dict that holds the separator as a term (the same object or an
    equal one) does not make the separator tokens its rank."""
    sep = "\x00sep"
    twin = "".join(["\x00s", "ep"])  # equal, another object
    assert twin == sep and twin is not sep
    for term in (sep, twin):
        docs = [({term: 2, "a": 1}, ["a", sep, "a", twin])]
        native, pure = _native().Inverter(sep), invert.PyInverter(sep)
        _feed(native, docs)
        _feed(pure, docs)
        assert _outputs(native, False) == _outputs(pure, False)


def test_a_token_no_document_made_a_term_is_refused_by_both() -> None:
    for inverter in (_native().Inverter("\x00"), invert.PyInverter("\x00")):
        inverter.add({"a": 1}, ["a", "zzz"])
        inverter.postings(False)
        with pytest.raises(KeyError):
            inverter.streams(0, False)


def test_a_token_below_the_word_terms_is_refused_by_both() -> None:
    for inverter in (_native().Inverter("\x00"), invert.PyInverter("\x00")):
        inverter.add({"\x01t": 1, "a": 1}, ["\x01t"])
        inverter.postings(False)
        with pytest.raises(KeyError):
            inverter.streams(1, False)


def test_refusals_match() -> None:
    native = _native()
    for inverter in (native.Inverter("\x00"), invert.PyInverter("\x00")):
        with pytest.raises(OverflowError):  # the C one refuses it in add, the pure one at the end
            inverter.add({"a": -1}, [])
            inverter.postings(False)
    for bad in ({1: 1}, {"a": 1.5}):
        with pytest.raises(TypeError):
            native.Inverter("\x00").add(bad, [])
    with pytest.raises(TypeError):
        native.Inverter("\x00").add({"a": 1}, ["a", 3])


def test_a_refused_document_leaves_nothing_behind() -> None:
    """add() is all or nothing: after a refusal the inverter holds exactly the
    documents added before it."""
    good = [({"a": 2, "b": 1}, ["a", "\x00", "b"]), ({"b": 3, "c": 1}, ["c", "b"])]
    native = _native().Inverter("\x00")
    native.add(*good[0])
    with pytest.raises(TypeError):
        native.add({"b": 5, "new": 1, "x": 1.5}, ["new"])  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        native.add({"b": 5}, ["b", None])  # type: ignore[list-item]
    native.add(*good[1])
    pure = invert.PyInverter("\x00")
    _feed(pure, good)
    assert _outputs(native, False) == _outputs(pure, False)


def test_calls_out_of_order_are_refused() -> None:
    for inverter in (_native().Inverter("\x00"), invert.PyInverter("\x00")):
        with pytest.raises(ValueError):
            inverter.streams(0, False)
        inverter.add({"a": 1}, ["a"])
        inverter.postings(False)
        with pytest.raises(ValueError):
            inverter.postings(False)
    native = _native().Inverter("\x00")
    native.postings(False)
    with pytest.raises(ValueError):
        native.add({"a": 1}, [])


def test_the_builder_refuses_keys_out_of_order(tmp_path: Path) -> None:
    builder = segment_build.SegmentBuilder("\x00")
    builder.add(_item(2, ["b"]))
    with pytest.raises(ValueError):
        builder.add(_item(1, ["a"]))


@given(st.binary(max_size=5000))
def test_crc32_is_zlibs(data: bytes) -> None:
    assert _native().crc32(data) == zlib.crc32(data)


_any_text = st.text(alphabet=st.characters(), max_size=40)  # lone surrogates too


@settings(max_examples=500, deadline=None)
@given(
    fields=st.lists(_any_text, min_size=7, max_size=7),
    tags=st.lists(_any_text, max_size=4),
    size=st.integers(-(2**70), 2**70),
)
def test_a_record_is_the_json_modules(fields: list[str], tags: list[str], size: int) -> None:
    """Every code point (controls, quotes, backslashes, DEL, the BMP, above
    it, lone surrogates) and any int: the bytes json writes."""
    doc = StoredDoc(*fields[:6], tuple(tags), fields[6], size)
    want = json.JSONEncoder(separators=(",", ":")).encode(doc).encode()
    assert _native().record(doc) == want
    encode = segment_build._record_encoder
    assert encode(_native())(doc) == encode(None)(doc) == want


class _Text(str):
    pass


def test_a_record_of_other_types_is_left_to_json() -> None:
    native = _native()
    base = StoredDoc("k", "c", "", "t", "", "", ("a",), "b", 1)
    odd = [
        base._replace(size=True),
        base._replace(size=1.5),  # type: ignore[arg-type]
        base._replace(title=_Text("t")),
        base._replace(tags=(("nested",),)),  # type: ignore[arg-type]
        base._replace(tags=["a"]),  # type: ignore[arg-type]
        base._replace(body=None),  # type: ignore[arg-type]
    ]
    for doc in odd:
        assert native.record(doc) is None
        want = json.JSONEncoder(separators=(",", ":")).encode(doc).encode()
        assert segment_build._record_encoder(native)(doc) == want
    assert native.record(base) == b'["k","c","","t","","",["a"],"b",1]'
    big = base._replace(body="\U0001f600" * 300_000)  # past the kept buffer's bound
    assert native.record(big) == json.dumps(big, separators=(",", ":")).encode()
    assert native.record(base) == b'["k","c","","t","","",["a"],"b",1]'


def _item(i: int, words: list[str]) -> BuildInput:
    tfw: dict[str, int] = {}
    for w in words:
        tfw[w] = tfw.get(w, 0) + 1
    tfw["\x01t" + words[0]] = 3
    doc = StoredDoc(f"k/{i:04d}.md", f"{i:04d}", "k", words[0], "T", "", ("x",), " ".join(words), 9)
    return BuildInput(doc, [words[0], "\x00", *words], tfw, len(words) + 3, (1, 1, 0, 1))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(docs=st.lists(st.lists(_words, min_size=1, max_size=20), max_size=80))
def test_whole_segments_are_byte_identical(
    docs: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _native()
    items = [_item(i, words) for i, words in enumerate(docs)]
    out = {}
    for pure in ("1", "0"):
        monkeypatch.setenv("CTINDEX_PURE", pure)
        native_modules.reset()
        path = tmp_path / f"pure{pure}-{len(list(tmp_path.iterdir()))}.seg"
        build_segment(path, items, "\x00")
        out[pure] = path.read_bytes()
    native_modules.reset()
    assert out["0"] == out["1"]


def test_many_terms_take_the_wide_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 65,535 distinct terms: 32-bit ranks in the token streams (FLAG_SEQ32)."""
    _native()
    items = [_item(i, [f"w{i}x{j}" for j in range(40)]) for i in range(1700)]
    out = {}
    for pure in ("1", "0"):
        monkeypatch.setenv("CTINDEX_PURE", pure)
        native_modules.reset()
        build_segment(tmp_path / f"{pure}.seg", items, "\x00")
        out[pure] = (tmp_path / f"{pure}.seg").read_bytes()
    native_modules.reset()
    assert out["0"] == out["1"]
    seg = Segment(tmp_path / "0.seg")
    try:
        assert seg.seq_code == "I"
    finally:
        seg.close()
