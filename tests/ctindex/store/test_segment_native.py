"""The native segment builder (ctindex/store/_invert.c) against its pure
specification in ctindex/store/segment.py: the same bytes for any input
(hypothesis), the same refusals, and whole segment files byte-identical.

Skipped where the extension is not built (an install without a compiler);
CI builds it, so there these tests always run.
"""

from __future__ import annotations

import importlib
import random
import zlib
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex import native_modules
from ctindex.store import segment
from ctindex.store.segment import BuildInput, StoredDoc, build_segment


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


@settings(max_examples=300, deadline=None)
@given(tfws=st.lists(_tfw, max_size=40), docs32=st.booleans())
def test_invert_matches_the_pure_inversion(tfws: list[dict[str, int]], docs32: bool) -> None:
    assert _native().invert(tfws, docs32) == segment._invert_py(tfws, docs32)


@settings(max_examples=200, deadline=None)
@given(tfws=st.lists(_tfw, min_size=1, max_size=20), seed=st.integers(0, 2**32))
def test_streams_match_the_pure_streams(tfws: list[dict[str, int]], seed: int) -> None:
    rng = random.Random(seed)
    terms, _, _ = segment._invert_py(tfws, False)
    pool = [*terms, "\x00"]
    # more than one checksum block (SEQ_BLOCK_DOCS) of streams, some empty
    lists = [rng.choices(pool, k=rng.randrange(0, 30)) for _ in range(rng.randrange(60, 140))]
    for seq32 in (False, True):
        got = _native().streams(lists, terms, "\x00", seq32)
        assert got == segment._streams_py(lists, terms, "\x00", seq32)


def test_refusals_match() -> None:
    native = _native()
    with pytest.raises(OverflowError):
        segment._invert_py([{"a": -1}], False)
    with pytest.raises(OverflowError):
        native.invert([{"a": -1}], False)
    for streams in (native.streams, segment._streams_py):
        with pytest.raises(KeyError):
            streams([["a", "zzz"]], ["a"], "\x00", False)
    with pytest.raises(TypeError):
        native.invert([{1: 1}], False)  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        native.invert([{"a": 1.5}], False)  # type: ignore[dict-item]


@given(st.binary(max_size=5000))
def test_crc32_is_zlibs(data: bytes) -> None:
    assert _native().crc32(data) == zlib.crc32(data)


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
    seg = segment.Segment(tmp_path / "0.seg")
    try:
        assert seg.seq_code == "I"
    finally:
        seg.close()
