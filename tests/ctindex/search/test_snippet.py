"""Snippets as text and spans: `snippet` is `snippet_text` with each span
wrapped in markers, the spans are exactly the matched words, and guillemets
in the text itself are never mistaken for markers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.providers import INDEX_PROVIDER, load
from ctindex.search.snippet import MAX_CHARS, make_snippet, mark, snippet_spans

WORDS = ["margin", "revenue", "cost", "«quoted»", "**bold**", "ünïcode", "—", "x", "grossly"]
TERMS = {"margin", "revenu"}
PREFIXES = ("gross",)


def _term(word: str) -> str:
    return next(t for _, _, t in load(INDEX_PROVIDER).term_spans(word))


texts = st.lists(
    st.tuples(st.sampled_from(WORDS), st.sampled_from([" ", "  ", "\n", "\t", "\n\n "])),
    max_size=150,
).map(lambda parts: "".join(w + s for w, s in parts))


@settings(max_examples=150, deadline=None)
@given(body=texts, description=texts)
def test_the_spans_are_the_matched_words_and_mark_gives_the_snippet(
    body: str, description: str
) -> None:
    text, spans = snippet_spans(body, description, TERMS, PREFIXES)
    assert mark(text, spans) == make_snippet(body, description, TERMS, PREFIXES)
    assert len(text) <= MAX_CHARS + 1  # the cut adds one '…'
    assert text == " ".join(text.split())  # whitespace collapsed
    last = 0
    for start, end in spans:
        assert last <= start < end <= len(text)
        last = end
        term = _term(text[start:end])
        assert term in TERMS or term.startswith(PREFIXES)
    # Every matched word of the text is a span (none missed).
    matched = [
        (s, e)
        for s, e, t in load(INDEX_PROVIDER).term_spans(text)
        if t in TERMS or t.startswith(PREFIXES)
    ]
    if spans:
        assert [(s, e) for s, e in matched if e <= spans[-1][1]] == list(spans)


def test_guillemets_in_the_text_are_text() -> None:
    body = "Le «margin» est la « marge » brute."
    text, spans = snippet_spans(body, "", {"margin"})
    assert text == body.removesuffix(".")  # the window ends with its last word
    assert [text[s:e] for s, e in spans] == ["margin"]
    assert mark(text, spans) == "Le ««margin»» est la « marge » brute"
    assert mark(text, spans, "[[", "]]") == "Le «[[margin]]» est la « marge » brute"
