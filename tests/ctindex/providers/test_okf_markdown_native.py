"""The native tokenizer and field counting (ctindex/providers/_words.c)
against the pure okf-markdown code they replace: the same words on any text
(every code point, the regex `[^\\W_]+` as the oracle), the same counts, and
the same analysis of whole documents.

Skipped where the extension is not built (an install without a compiler);
CI builds it, so there these tests always run.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex import native_modules
from ctindex.providers import okf_markdown as okf

WORD = re.compile(r"[^\W_]+")  # the oracle: what a word is, by definition (docs/provider.md)


def _native() -> ModuleType:
    try:
        return importlib.import_module("ctindex.providers._words")
    except ImportError:
        pytest.skip("the native tokenizer is not built here")


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200) | st.text(
    alphabet="ab_ 1é\u0301\u00b2\u0660\u4e00\U0001d518\u2163.-\t\n", max_size=200
)


@settings(max_examples=500, deadline=None)
@given(text=_text, known=st.sets(st.sampled_from(["a", "b", "ab", "1", "é", "\u4e00"])))
def test_terms_are_the_regex_words_through_the_cache(text: str, known: set[str]) -> None:
    cache = {w: w.upper() + "!" for w in known}
    words = WORD.findall(text)
    found, missing = _native().terms(text, cache)
    assert found == [cache.get(w, w) for w in words]
    expected_missing = [i for i, w in enumerate(words) if w not in cache]
    assert missing == (expected_missing or None)


def test_every_code_point_splits_like_the_regex() -> None:
    """One pass over all of Unicode (surrogates excluded: no decoded text has them)."""
    native = _native()
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(chars), 4096):
        text = " ".join(chars[i : i + 4096]) + "".join(chars[i : i + 4096])
        assert native.terms(text, {})[0] == WORD.findall(text)


@settings(max_examples=300, deadline=None)
@given(
    start=st.dictionaries(st.sampled_from(["a", "b", "\x01ta"]), st.integers(0, 9)),
    toks=st.lists(st.sampled_from(["a", "b", "c", "é"]), max_size=20),
    weight=st.integers(1, 5),
)
def test_counting_matches(start: dict[str, int], toks: list[str], weight: int) -> None:
    native = _native()
    want, got = dict(start), dict(start)
    okf._count_field(want, toks, weight, "\x01t")
    native.count_field(got, toks, weight, "\x01t")
    assert got == want and list(got) == list(want)
    counted = native.count(toks)
    assert counted == Counter(toks) and list(counted) == list(Counter(toks))


_line = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)


# The fixture only sets CTINDEX_PURE, which the test itself sets anew for every input.
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    title=_line,
    tags=st.lists(_line.filter(lambda t: t.strip() and "," not in t and "]" not in t), max_size=3),
    body=_text,
)
def test_whole_analysis_matches(
    title: str, tags: list[str], body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _native()
    got = okf.parse("kb/x.md", b"# x\n", "kb")
    assert isinstance(got, okf.Document)
    doc = got._replace(title=title, tags=tuple(tags), description=title[::-1], body=body)
    out = {}
    for pure in ("1", "0"):
        monkeypatch.setenv("CTINDEX_PURE", pure)
        native_modules.reset()
        okf._CACHE.clear()
        out[pure] = (okf.analyze(doc), list(okf.analyze_many([doc, doc])))
    native_modules.reset()
    assert out["0"] == out["1"]
    assert list(out["0"][0].tfw) == list(out["1"][0].tfw)  # same insertion order too
