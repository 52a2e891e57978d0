"""Accent and compatibility folding (ctindex/providers/folding.py): what it
claims about Unicode, checked on the running Python's Unicode database, and
the map back to the original text that snippets rely on."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.providers import okf_markdown as okf
from ctindex.providers.folding import MARK_PLANES, FoldedText, fold

_ALL = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
WORD = re.compile(r"[^\W_]+")


def test_every_combining_mark_lies_in_the_planes_scanned() -> None:
    outside = [
        hex(c)
        for c in range(0x110000)
        if unicodedata.category(chr(c))[0] == "M" and not any(c in p for p in MARK_PLANES)
    ]
    assert outside == []


@pytest.mark.slow
def test_folding_a_text_is_folding_each_character() -> None:
    """Why FoldedText may fold character by character: NFKD's reordering
    only moves characters with a combining class, and every one of them is a
    mark, which folding removes."""
    assert not [c for c in _ALL if unicodedata.combining(c) and unicodedata.category(c)[0] != "M"]
    for i in range(0, len(_ALL), 8192):
        chunk = "".join(_ALL[i : i + 8192])
        assert fold(chunk) == "".join(fold(c) for c in chunk)


def test_casefolding_keeps_a_fold_folded() -> None:
    """Terms are casefolded after folding (okf_markdown._stem_words), so a
    term is folded too: the query side may fold and casefold in either order."""
    for i in range(0, len(_ALL), 8192):
        folded = fold("".join(_ALL[i : i + 8192]))
        assert fold(folded.casefold()) == folded.casefold()


def test_known_folds() -> None:
    assert fold("Café naïve résumé re\u0301sume\u0301") == "Cafe naive resume resume"
    assert fold("\ufb01le x\u00b2 \u2163 \u00bd") == "file x2 IV 1\u20442"
    assert fold("plain ascii") == "plain ascii"
    assert okf.terms("Café naïve résumé") == okf.terms("cafe naive resume")


_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from("aé\u0301\ufb01\u00bd "),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(text=_text)
def test_folded_text_maps_each_word_back_to_where_it_came_from(text: str) -> None:
    folded = FoldedText(text)
    assert folded.text == fold(text)
    last = (0, 0)
    for m in WORD.finditer(folded.text):
        start, end = folded.origin(m.start(), m.end())
        # In order (a character that folds to two words gives both its span),
        # and the original span folds to text that holds the word.
        assert 0 <= start < end <= len(text) and (start, end) >= last
        assert m.group() in fold(text[start:end])
        last = (start, end)
    # All at once (what a snippet uses): the same spans.
    spans = [m.span() for m in WORD.finditer(folded.text)]
    assert folded.origins(spans) == [folded.origin(*span) for span in spans]


@settings(max_examples=200, deadline=None)
@given(text=_text)
def test_term_spans_are_the_terms_on_the_original_text(text: str) -> None:
    spans = list(okf.term_spans(text))
    assert [t for _, _, t in spans] == okf.terms(text)
    for start, end, term in spans:
        assert okf.terms(text[start:end]) and term in okf.terms(text[start:end])


def test_snippet_spans_mark_the_unfolded_word() -> None:
    text = "Un café naïve, re\u0301sume\u0301"
    got = [(text[s:e], t) for s, e, t in okf.term_spans(text)]
    assert got == [
        ("Un", "un"),
        ("café", "cafe"),
        ("naïve", "naiv"),
        ("re\u0301sume\u0301", "resum"),
    ]
