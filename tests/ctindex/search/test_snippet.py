"""Snippets as text and spans: `snippet` is `snippet_text` with each span
wrapped in markers, the spans are exactly the matched words, and guillemets
in the text itself are never mistaken for markers. A long document is read
in bounded pieces (ctindex/search/snippet.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.providers import INDEX_PROVIDER, load
from ctindex.providers.base import AsciiTerms, Provider
from ctindex.search import native_snippet, snippet
from ctindex.search.snippet import HEAD_CHARS, MAX_CHARS, make_snippet, mark, snippet_spans

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


def _filler(n_chars: int) -> str:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    out: list[str] = []
    size = 0
    while size < n_chars:
        out.append(words[len(out) % len(words)])
        size += len(out[-1]) + 1
    return " ".join(out)


def test_match_far_past_the_head_is_found_and_marked() -> None:
    body = _filler(3 * HEAD_CHARS) + " the Specified register here " + _filler(3 * HEAD_CHARS)
    got = make_snippet(body, "", {"specifi", "regist"})
    assert "«Specified» «register»" in got
    assert got.startswith("…") and got.endswith("…")


def test_short_document_snippet_has_no_ellipsis() -> None:
    body = "then the target word and more"
    got = make_snippet(body, "", {"target"})
    assert "«target»" in got and not got.startswith("…")


def test_long_document_tokenizes_a_bounded_amount(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tokenizer sees the head and one region, never the whole text.
    seen: list[int] = []
    real = snippet.load

    class Counting:
        def __init__(self, provider: Provider) -> None:
            self.provider = provider

        def term_spans(self, text: str) -> Iterator[tuple[int, int, str]]:
            seen.append(len(text))
            return self.provider.term_spans(text)

        def ascii_terms(self) -> AsciiTerms | None:
            return self.provider.ascii_terms()

    real_window = snippet._native_window

    def counted(*args: Any) -> native_snippet.Window | None:
        seen.append(len(args[2]))  # the piece the C window reads
        return real_window(*args)

    monkeypatch.setattr(snippet, "load", lambda name: Counting(real(name)))
    monkeypatch.setattr(snippet, "_native_window", counted)
    body = _filler(40 * HEAD_CHARS) + " needleword " + _filler(40 * HEAD_CHARS)
    got = make_snippet(body, "", {"needleword"})
    assert "«needleword»" in got
    assert sum(seen) <= HEAD_CHARS + 2 * snippet.REGION_CHARS


def test_no_match_anywhere_falls_back_to_a_bounded_start() -> None:
    body = _filler(10 * HEAD_CHARS)
    got = make_snippet(body, "", {"absentword"})
    assert got.startswith("alpha beta") and len(got) <= snippet.MAX_CHARS + 1


def test_stem_inside_another_word_in_the_head_still_reaches_the_region() -> None:
    # "rain" begins no word of the head but stands inside "terrain" there;
    # the real word is past the head.
    body = "terrain " * (HEAD_CHARS // 8 + 10) + "then rain fell " + _filler(2 * HEAD_CHARS)
    got = make_snippet(body, "", {"rain"})
    assert "«rain»" in got


def test_an_accented_match_far_past_the_head_is_found_and_marked() -> None:
    """The tokenizer folds accents (ctindex/providers/folding.py): the region
    past the head is looked for in the folded text too."""
    body = _filler(3 * HEAD_CHARS) + " her Résumé was read " + _filler(3 * HEAD_CHARS)
    terms = {t for _, _, t in load(INDEX_PROVIDER).term_spans("resume")}
    assert "«Résumé»" in make_snippet(body, "", terms)


def _pieces_folding_everything(
    text: str, terms: set[str], prefixes: tuple[str, ...]
) -> list[tuple[int, int]]:
    """The pieces as reading the whole folded text decides them (the
    reference the lazy `_pieces` must agree with)."""
    if len(text) <= HEAD_CHARS:
        return [(0, len(text))]
    head = snippet._cut(text, HEAD_CHARS)
    folded = snippet._folded(text)
    if len(folded) != len(text):
        return [(0, head)]
    stems = [t[: max(len(t) - 1, 3)] for t in terms if t[:1].isalnum()] + list(prefixes)
    found = [at for at in (folded.find(s) for s in stems if s) if at >= 0]
    if not found:
        return [(0, head)]
    if min(found) >= head:
        return [snippet._region(text, min(found), head)]
    later = [x for x in (folded.find(s, head) for s in stems if s) if x >= 0]
    return [(0, head), snippet._region(text, min(later), head)] if later else [(0, head)]


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(["alpha", "Beta", "gamma", "needle", "NEEDLEs", "nee", "dle", "é", "x"]),
        min_size=1,
        max_size=2500,
    ),
    terms=st.sets(st.sampled_from(["needl", "beta", "gamma", "zzz", "ne"]), max_size=3),
    prefixes=st.sampled_from([(), ("nee",), ("bet", "zz")]),
)
def test_lazy_pieces_are_the_pieces_of_the_whole_folded_text(
    words: list[str], terms: set[str], prefixes: tuple[str, ...]
) -> None:
    text = " ".join(words)
    assert list(snippet._pieces(text, terms, prefixes)) == _pieces_folding_everything(
        text, terms, prefixes
    )


def test_a_long_text_whose_head_matches_is_not_folded_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Bounded work per shown result: the head holds the word, so the rest of
    # a long page is neither tokenized nor folded.
    body = "the needleword first " + _filler(60 * HEAD_CHARS)
    folded: list[int] = []
    real = snippet._folded
    monkeypatch.setattr(snippet, "_folded", lambda text: folded.append(len(text)) or real(text))
    assert "«needleword»" in make_snippet(body, "", {"needleword"})
    assert folded == []


def test_a_long_texts_fold_is_kept_for_that_very_text_within_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fold of a long text is kept for the same str (a long-lived reader
    shows the same large pages again), never found for an equal copy, and
    the folds kept stay within their bound, the oldest dropped first."""
    folds = snippet._Folds()
    folds.LIMIT = 5 * (2 * HEAD_CHARS + 40)
    monkeypatch.setattr(snippet, "_FOLDS", folds)
    pages = [f"{_filler(HEAD_CHARS)} Page{i} NeedleWord {_filler(HEAD_CHARS)}" for i in range(4)]
    first = [make_snippet(p, "", {"needleword"}) for p in pages]
    assert folds.get(pages[3]) == pages[3].casefold()
    assert folds.get(pages[0]) is None  # dropped: four pages and folds exceed the bound
    assert folds._chars <= folds.LIMIT
    again = [make_snippet(p, "", {"needleword"}) for p in pages]
    assert again == first and all("«NeedleWord»" in s for s in again)
    copy = pages[3][:1] + pages[3][1:]
    assert copy == pages[3] and copy is not pages[3] and folds.get(copy) is None
    short = "a NeedleWord"
    make_snippet(short, "", {"needleword"})
    assert folds.get(short) is None  # a short text is read whole, not folded


def test_where_a_stem_stands_in_a_kept_long_text_is_remembered_within_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long page shown again does not search its fold for the same stem
    again: the place is remembered with the fold (at most FINDS per text),
    and the snippets are those of a reader that remembers nothing."""
    folds = snippet._Folds()
    folds.FINDS = 2
    monkeypatch.setattr(snippet, "_FOLDS", folds)
    # Not ASCII, so the whole text is folded and searched, and the words
    # stand far past the head.
    page = f"Café {_filler(8 * HEAD_CHARS)} NeedleWord {_filler(HEAD_CHARS)} OtherWord end"
    words = ["needleword", "otherword", "absentword"]
    first = [make_snippet(page, "", {w}) for w in words]
    places = folds._kept[id(page)][2]
    assert 0 < len(places) <= folds.FINDS
    again = [make_snippet(page, "", {w}) for w in words]
    monkeypatch.setattr(snippet, "_FOLDS", snippet._Folds())
    fresh = [make_snippet(page, "", {w}) for w in words]
    assert again == first == fresh
    assert "«NeedleWord»" in first[0] and "«OtherWord»" in first[1]
    # A stem's remembered place is the fold's own answer.
    folded = folds.get(page)
    assert folded is not None
    for (stem, start), at in folds._kept[id(page)][2].items():
        assert at == folded.find(stem, start)


@settings(max_examples=150, deadline=None)
@given(
    pages=st.lists(
        st.tuples(
            st.one_of(texts, texts.map(lambda t: t + " Café naïve"), texts.map(lambda t: t * 40)),
            texts,
        ),
        max_size=6,
    )
)
def test_a_querys_snippets_are_each_pages_own(pages: list[tuple[str, str]]) -> None:
    """`snippets` (the shown results' snippets at once, a short ASCII body
    straight to the C window) is `snippet_spans` of each page: short and
    long, ASCII or not, the body's window or the description's."""
    assert snippet.snippets(pages, TERMS, PREFIXES) == [
        snippet_spans(body, description, TERMS, PREFIXES) for body, description in pages
    ]
