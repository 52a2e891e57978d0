"""ctindex/search/_snippet.c against its specification, the pure ASCII path
of ctindex/search/snippet.py: the same snippet text and spans, character for
character, on generated texts (words, punctuation, every ASCII whitespace
Python's str.split() knows, long and short texts, prefixes), and the
stemmer reached for words it has not seen. Skipped where the extension is
not built (an install without a compiler); CI builds it."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctindex.providers import okf_markdown
from ctindex.search import native_snippet, snippet

NATIVE = native_snippet.module()
pytestmark = pytest.mark.skipif(NATIVE is None, reason="ctindex.search._snippet not built")

WORDS = ["margin", "Margins", "revenue", "cost", "gross", "grossly", "x", "a1", "B2b", "net"]
PUNCT = ["", ",", ".", "(", ")", "-", "**", "'s", "/", "…"]
SPACE = [" ", "  ", "\n", "\t", "\n\n ", "\x0b", "\x0c", "\r\n", "\x1c", "\x1f", " \x1d "]
TERMS = [frozenset(), frozenset({"margin"}), frozenset({"margin", "revenu"}), frozenset({"x"})]
PREFIXES = [(), ("gross",), ("b",), ("m", "co")]

texts = st.lists(
    st.tuples(
        st.sampled_from(PUNCT),
        st.sampled_from(WORDS),
        st.sampled_from(PUNCT),
        st.sampled_from(SPACE),
    ),
    max_size=400,
).map(lambda parts: "".join(a + w + b + s for a, w, b, s in parts))


def both(body: str, description: str, terms: frozenset[str], prefixes: tuple[str, ...]) -> None:
    native = snippet.snippet_spans(body, description, terms, prefixes)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native_snippet, "module", lambda: None)
        pure = snippet.snippet_spans(body, description, terms, prefixes)
    assert native == pure


@settings(max_examples=400, deadline=None)
@given(
    body=texts,
    description=texts,
    terms=st.sampled_from(TERMS),
    prefixes=st.sampled_from(PREFIXES),
    lead=st.sampled_from(["", " ", "\n\n", "x" * 5000 + " "]),
)
@example(body="margin", description="", terms=TERMS[1], prefixes=(), lead="")
@example(body=" \x1c margin \x1f ", description="", terms=TERMS[1], prefixes=(), lead="")
def test_the_c_window_is_the_pure_one(
    body: str, description: str, terms: frozenset[str], prefixes: tuple[str, ...], lead: str
) -> None:
    both(lead + body, description, terms, prefixes)


def test_a_long_text_past_the_head_and_every_window_edge() -> None:
    filler = " ".join(["cost"] * 3000)
    for body in (
        filler + " margin " + filler,  # a region past the head
        "margin " + filler,  # the first word
        filler + " margin",  # the last word
        " ".join(["margin"] * 200),  # hits everywhere: the earliest best window
        "net " * 10 + "margin revenue " + "net " * 40 + "margin revenue margin",
    ):
        both(body, "", frozenset({"margin", "revenu"}), ())


def test_a_word_never_stemmed_before_is_stemmed_then_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    word = "zqxvfreshlyseenword"
    monkeypatch.setattr(okf_markdown, "_CACHE", dict(okf_markdown._CACHE))
    okf_markdown._CACHE.pop(word, None)
    text, spans = snippet.snippet_spans(f"one {word} two", "", {word}, ())
    assert text == f"one {word} two" and spans == ((4, 4 + len(word)),)


def test_bad_arguments_are_errors_not_crashes() -> None:
    assert NATIVE is not None
    with pytest.raises(ValueError):
        NATIVE.window("café", {}, set(), (), 24, 6)
    with pytest.raises(ValueError):
        NATIVE.window("a", {"a": "a"}, {"a"}, (), 0, 6)
    with pytest.raises(KeyError):
        NATIVE.window("unknown", {}, set(), (), 24, 6)
    assert NATIVE.window("a b", {"a": "a", "b": "b"}, set(), (), 24, 6) is None


def test_words_past_a_settled_window_are_not_read() -> None:
    """With a set of terms and no prefix, the reading ends once a window
    holds every term: a word past it is never looked up (no KeyError for a
    word the stems do not know), and the window is the one a full reading
    finds, with the words after it still counted."""
    assert NATIVE is not None
    stems = {"a": "a", "b": "b", "c": "c"}
    text = "b a " + "b " * 30 + "neverstemmed"
    got = NATIVE.window(text, stems, frozenset({"a"}), (), 24, 6)
    assert got == (" ".join(["b", "a", *["b"] * 23]), [(2, 3)], False, True)
    # Two terms: the first window holding both settles it, not the first hit.
    text = "a " + "b " * 30 + "a c b b neverstemmed"
    got = NATIVE.window(text, stems, frozenset({"a", "c"}), (), 3, 1)
    assert got == ("b a c b", [(2, 3), (4, 5)], True, True)
    # A list of terms, or a prefix, may match more: the whole piece is read.
    with pytest.raises(KeyError):
        NATIVE.window(text, stems, ["a", "c"], (), 3, 1)
    with pytest.raises(KeyError):
        NATIVE.window(text, stems, frozenset({"a", "c"}), ("zz",), 3, 1)


def test_each_stems_dict_is_its_own_memo() -> None:
    """Words met before are found by their bytes (a memo of the stems dict's
    lookups); another dict passed in answers with its own terms."""
    assert NATIVE is not None
    first = {"one": "x1", "two": "x2"}
    for _ in range(2):  # the second reading answers from the memo
        got = NATIVE.window("one two", first, frozenset({"x1"}), (), 24, 6)
        assert got == ("one two", [(0, 3)], False, False)
    other = {"one": "y1", "two": "y2"}
    assert NATIVE.window("one two", other, frozenset({"x1"}), (), 24, 6) is None
    got = NATIVE.window("one two", other, frozenset({"y2"}), (), 24, 6)
    assert got == ("one two", [(4, 7)], False, False)
    with pytest.raises(KeyError):  # and a word it lacks is asked for, not remembered
        NATIVE.window("one three", other, frozenset({"y2"}), (), 24, 6)
