"""The native tokenizer and field counting (ctindex/providers/_words.c)
against the pure okf-markdown code they replace: the same words on any text
(every code point, the regex `[^\\W_]+` over the text's fold as the oracle), the same counts, and
the same analysis of whole documents.

Skipped where the extension is not built (an install without a compiler);
CI builds it, so there these tests always run.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex.base import native_modules
from ctindex.providers import frontmatter as fm
from ctindex.providers import okf_markdown as okf
from ctindex.providers.folding import fold
from ctindex.store import native_invert
from tests.ctindex.providers.test_frontmatter import _block as _frontmatter_block

WORD = re.compile(r"[^\W_]+")  # the oracle: what a word is, by definition (docs/provider.md)


def _words(text: str) -> list[str]:
    """The oracle's words: the regex over the text's fold."""
    return WORD.findall(fold(text))


def _native() -> ModuleType:
    try:
        return importlib.import_module("ctindex.providers._words")
    except ImportError:
        pytest.skip("the native tokenizer is not built here")


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200) | st.text(
    alphabet="ab_ 1é\u0301\u00b2\u0660\u4e00\U0001d518\u2163.-\t\n\ufb01\u00bd\u0130\u00df\u1e9e",
    max_size=200,
)


@settings(max_examples=500, deadline=None)
@given(text=_text, known=st.sets(st.sampled_from(["a", "b", "ab", "1", "é", "\u4e00"])))
def test_terms_are_the_regex_words_through_the_cache(text: str, known: set[str]) -> None:
    cache = {w: w.upper() + "!" for w in known}
    words = _words(text)
    found, missing = _native().terms(text, cache)
    assert found == [cache.get(w, w) for w in words]
    expected_missing = [i for i, w in enumerate(words) if w not in cache]
    assert missing == (expected_missing or None)


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(st.lists(_text, max_size=4).map(tuple), max_size=5),
    known=st.sets(st.sampled_from(["a", "b", "ab", "1", "é", "\u4e00"])),
)
def test_fields_terms_is_terms_of_each_field(docs: list[tuple[str, ...]], known: set[str]) -> None:
    """One call for a batch gives each field's terms() and, for each field
    with words the cache lacks, that very list and the missing indexes."""
    native = _native()
    cache = {w: w.upper() for w in known}
    got, unknown = native.fields_terms(list(docs), cache)
    want = [[native.terms(text, cache) for text in texts] for texts in docs]
    assert got == [[found for found, _ in fields] for fields in want]
    expected = [(found, missing) for fields in want for found, missing in fields if missing]
    assert unknown == expected
    lists = [found for fields in got for found in fields]
    assert all(any(found is f for f in lists) for found, _ in unknown)  # fixed up in place


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(st.lists(_text, max_size=4).map(tuple), max_size=5),
    known=st.sets(st.sampled_from(["a", "b", "ab", "1", "é", "\u4e00"])),
    clear=st.booleans(),
)
def test_fields_terms_stems_what_the_cache_lacks_in_one_call(
    docs: list[tuple[str, ...]], known: set[str], clear: bool
) -> None:
    """With `stem`: the words the cache lacks, as one set, to one stem() call
    (which may even empty the cache first, as a full one is), then every
    field's terms complete, as the pure path's lookups after stemming."""
    native = _native()
    cache = {w: w.upper() for w in known}
    calls: list[set[str]] = []

    def stem(words: set[str]) -> None:
        calls.append(set(words))
        if clear:
            cache.clear()
        cache.update((w, w.upper() + "~") for w in words)

    want_missing = {
        w for texts in docs for text in texts for w in okf.words(text) if w not in cache
    }
    got, unknown = native.fields_terms(list(docs), cache, stem)
    assert unknown == []
    assert calls == ([want_missing] if want_missing else [])
    # As the pure path: every word through the cache as it stands after stemming,
    # where a word already known before a clear keeps the term it had.
    before = {w: w.upper() for w in known}
    want = [
        [[cache.get(w) or before[w] for w in okf.words(text)] for text in texts] for texts in docs
    ]
    assert got == want


def test_fields_terms_passes_on_a_stem_that_fails() -> None:
    native = _native()

    def broken(words: set[str]) -> None:
        raise RuntimeError("stemmer down")

    with pytest.raises(RuntimeError, match="stemmer down"):
        native.fields_terms([("new words",)], {}, broken)
    with pytest.raises(KeyError):  # a stem() that does not fill the cache
        native.fields_terms([("new words",)], {}, lambda words: None)


@settings(max_examples=50, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(["ab", "1", "ß", "x" * 25, "\u4e00", "zz"]), min_size=250, max_size=700
    )
)
def test_long_texts_are_split_like_short_ones(words: list[str]) -> None:
    """More words than one call holds on its stack, memo hits and misses mixed."""
    text = " ".join(words)
    cache = {"ab": "AB", "x" * 25: "X", "\u4e00": "CJK"}
    found, missing = _native().terms(text, cache)
    assert found == [cache.get(w, w) for w in words]
    assert missing == ([i for i, w in enumerate(words) if w not in cache] or None)


@pytest.mark.slow
def test_every_code_point_splits_like_the_regex() -> None:
    """One pass over all of Unicode (surrogates excluded: no decoded text has them)."""
    native = _native()
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(chars), 4096):
        text = " ".join(chars[i : i + 4096]) + "".join(chars[i : i + 4096])
        assert native.terms(text, {})[0] == _words(text)


_tokens = st.lists(st.sampled_from(["a", "b", "c", "é", "\u4e00", "ab" * 12]), max_size=20)
_value = st.text(alphabet="aB é\u00df\u0130\u4e00\t-_.1", max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    body=_tokens,
    title=_tokens,
    tags=st.lists(st.tuples(_value, _tokens), max_size=4),
    description=_tokens,
    ids=_tokens,
    last=_tokens,
    doc_type=_value,
    weights=st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)),
)
def test_assemble_matches(
    body: list[str],
    title: list[str],
    tags: list[tuple[str, list[str]]],
    description: list[str],
    ids: list[str],
    last: list[str],
    doc_type: str,
    weights: tuple[int, int, int],
) -> None:
    """Same tokens, counts, lengths, and the counts' insertion order too.
    The heads are chosen so that field, facet and exact terms can collide
    with body tokens and with each other ("" + "a" is "a"; "x" + "b" is "xb")."""
    native = _native()
    layout = (
        weights,
        ("", "x", "\x01d", "\x01i"),
        "\x00",
        ("x", "", "\x00tag:"),
        ("", "x", "a", "b"),
    )
    fields = [body, title, *(t for _, t in tags), description, ids, last]
    args = (fields, doc_type, tuple(v for v, _ in tags), layout)
    want, got = okf._assemble(*args), native.assemble(*args)  # type: ignore[arg-type]
    assert got == want
    assert list(got[1].items()) == list(want[1].items())


class _Recorder:
    """A term sink that is not the C Inverter: assemble_into calls its add()."""

    def __init__(self) -> None:
        self.added: list[tuple[dict[str, int], list[str]]] = []

    def add(self, tfw: dict[str, int], tokens: list[str]) -> None:
        self.added.append((tfw, tokens))


def _c_inverter() -> native_invert.Inverter:
    module = native_invert.module()
    if module is None:
        pytest.skip("the native inverter is not built here")
    return module.Inverter("\x00")


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(
        st.tuples(
            _tokens,
            _tokens,
            st.lists(st.tuples(_value, _tokens), max_size=3),
            _tokens,
            _tokens,
            _value,
        ),
        min_size=1,
        max_size=4,
    ),
    weights=st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)),
)
@pytest.mark.slow
def test_assemble_into_adds_what_assemble_returns(
    docs: list[tuple[list[str], list[str], list[tuple[str, list[str]]], list[str], list[str], str]],
    weights: tuple[int, int, int],
) -> None:
    """Fed straight to the C inverter (its C entry point, no dict or list
    built), documents give the postings and token streams that adding
    `_assemble`'s dict and list gives; to any other sink, assemble_into hands
    that very dict and list, and both return `_assemble`'s lengths."""
    native = _native()
    layout = (weights, ("", "x", "\x01d", "\x01i"), "\x00", ("x", "", "\x00tag:"), okf._LAYOUT[4])
    fed, added, recorder = _c_inverter(), _c_inverter(), _Recorder()
    for body, title, tags, description, ids, doc_type in docs:
        fields = [body, title, *(t for _, t in tags), description, ids, ids[-1:]]
        args = (fields, doc_type, tuple(v for v, _ in tags), layout)
        tokens, tfw, length, flens = okf._assemble(*args)  # type: ignore[arg-type]
        assert native.assemble_into(*args, fed) == (length, flens)
        assert native.assemble_into(*args, recorder) == (length, flens)
        assert okf._assemble_into(*args, added) == (length, flens)  # type: ignore[arg-type]
        assert list(recorder.added[-1][1]) == tokens
        assert list(recorder.added[-1][0].items()) == list(tfw.items())
    assert fed.postings(False) == added.postings(False)
    assert fed.streams(0, False) == added.streams(0, False)


def test_assemble_into_clips_counts_as_add_does() -> None:
    """A count past u16 is stored as 0xFFFF both ways in."""
    native = _native()
    fed, added = _c_inverter(), _c_inverter()
    fields: list[list[str]] = [["a"] * 70_000 + ["b"], ["a"] * 30_000, [], [], []]
    native.assemble_into(fields, "", (), okf._LAYOUT, fed)
    okf._assemble_into(fields, "", (), okf._LAYOUT, added)
    assert fed.postings(False) == added.postings(False)


def test_assemble_into_adds_nothing_it_refuses() -> None:
    """The inverter's refusal reaches the caller, and leaves no document
    behind; so does a sink's own error."""
    native = _native()
    inverter = _c_inverter()
    fields: list[list[str]] = [["a", "b"], ["t"], [], [], []]
    assert native.assemble_into(fields, "", (), okf._LAYOUT, inverter)[0] > 0
    inverter.postings(False)
    with pytest.raises(ValueError, match="after postings"):
        native.assemble_into(fields, "", (), okf._LAYOUT, inverter)

    class Refusing:
        def add(self, tfw: dict[str, int], tokens: list[str]) -> None:
            raise OSError("full")

    with pytest.raises(OSError, match="full"):
        native.assemble_into(fields, "", (), okf._LAYOUT, Refusing())
    with pytest.raises(AttributeError):
        native.assemble_into(fields, "", (), okf._LAYOUT, object())


def test_assemble_rejects_what_it_can_not_count() -> None:
    native = _native()
    layout = okf._LAYOUT
    with pytest.raises(TypeError):
        native.assemble([["a", 1], [], [], [], []], "", (), layout)
    with pytest.raises(ValueError):
        native.assemble([["a"], [], [], [], []], "", ("tag",), layout)
    with pytest.raises(TypeError):
        native.assemble([["a"], [], [], [], []], "", (), ((1, 1), *layout[1:]))


def test_whitespace_is_never_a_word_character() -> None:
    """Why assemble may take the type's words from the whole facet value
    instead of from each of its whitespace-separated parts."""
    assert not [c for c in range(0x110000) if chr(c).isspace() and chr(c).isalnum()]


def test_the_word_memo_follows_its_cache() -> None:
    """terms() remembers what the cache answered for short one-byte-per-character
    words (ctindex/providers/_words.c): a new cache, or the same one emptied,
    is asked again, and more words than the memo holds stay right."""
    native = _native()
    cache = {"ab": "AB", "ß": "E"}
    assert native.terms("ab ß ab", cache) == (["AB", "E", "AB"], None)
    assert native.terms("ab ß ab", cache) == (["AB", "E", "AB"], None)  # from the memo
    other = {"ab": "other"}
    assert native.terms("ab ß", other) == (["other", "ß"], [1])
    other.clear()
    other["ß"] = "E2"
    assert native.terms("ab ß", other) == (["ab", "E2"], [0])
    long_word = "x" * 40
    assert native.terms(long_word, {long_word: "L"}) == (["L"], None)
    many = {f"w{i}": f"t{i}" for i in range(200_000)}  # past the memo's bound
    text = " ".join(many)
    want = list(many.values())
    assert native.terms(text, many) == (want, None)
    assert native.terms(text, many) == (want, None)


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


@settings(max_examples=800, deadline=None)  # new blocks each run: the runs add up
@given(_frontmatter_block() | st.lists(st.text(max_size=30), max_size=4).map("\n".join))
@pytest.mark.slow
def test_frontmatter_reads_as_the_pure_reader(block: str) -> None:
    """The C `frontmatter` against `read_without_yaml`: the same dict (values,
    types and order) or the same refusal, on the YAML tests' generated
    blocks (well-formed and broken) and on any text."""
    got = _native().frontmatter(block, fm.NOT_SCALAR)
    want = fm.read_without_yaml(block)
    assert got == want and (got is None or list(got) == list(want or {})), block


def test_frontmatter_keys_are_at_most_64_characters() -> None:
    for n, kept in ((63, True), (64, True), (65, False)):
        block = "k" * n + ": v"
        assert (_native().frontmatter(block, fm.NOT_SCALAR) is not None) is kept
        assert _native().frontmatter(block, fm.NOT_SCALAR) == fm.read_without_yaml(block)


@pytest.mark.parametrize(
    "block",
    [
        "title: Hello world\ntype: Metric\ntags: [a, b ,  null]\nother: x",
        "tags: [ a,b,   c  ]",
        "tags: [a, ,b]",
        "tags: []",
        "tags: [ ]",
        "tags: [é, ß]\n",
        "title:  x  ",
        "title: null\ntype: Null\ndescription: NULL",
        "title: ~\ntype: nulls",
        "title: a:b",
        "description: it's (fine); ok/+-.,",
        "x-y_z: [ q ]\n\ntitle: t",
        "title: first\ntitle: second",
        "Title: z",
        "title: 'it''s ''quoted'''\ntype: 'x'\ndescription: \"d # \"",
        "title: 'open",
        'title: "a\\"',
        "description: one\n  two\n\n\n   three\n\ntitle: t",
        "description:\n  below\n and on\ntags:\n- a\n-\n- [x]\n- k: v\n  j: w\n-\n  - n",
        "tags:\n  - a\n  - b\n  -\ntitle: t",
        "sources:\n- id: a\n  tags:\n  - x\n  title: t\ntitle: top",
        "generated:\n  by: x\n  at: '2026-07-10T23:16:28+00:00'\ntitle: g",
        "title: é\u4e00\U0001f600 ↔ x",
        "title: a\u2028b",
        "title: a\u2029b",
        "title: x # note",
        "title: a\n  b #c",
        "title: a#b\ntags: [x#y]",
        "tags: [a:b, http://x, a:?]",
        "g: { by: human:j@x, at: 2026-06-30T14:00:00Z }\ntitle: t",
        "g: {}\nh: { }\ntitle: t",
        "g: {a: b,}",
        "g: {a:b}",
        "g: {a: b:}",
        "g: {a: b: c}",
        "# about\ntitle: x # note\ntype: 'q' # n\ntags:\n# c\n- a #c\n- [b] # n",
        'description: one\n  two # end\n\n# c\nother: # n\ntitle: "d" #',
        "description: foo\n  # c\n  bar",
        "description: foo\n  # c\ntype: t",
        "title: a  #n\ntype: 'b'   # n",
        "description: foo\n  bar # c\n  baz",
        "title: 'x'#c",
        "title: 'x' junk",
        'title: "x" junk',
        "title: foo# c\ntags:\n- # c\n- b",
        "tags: [a: b]",
        "g: {a: x:/y, b: 1:2}",
        "title: {a: b}",
        "tags:\n- {a: b}\n- c",
        "title: a\x85b",
        "title: a\ufeffb",
        "title: a\udcffb",
        "title: x\n\tb",
        "title:\n  - a\n - b",
        "- a",
        "  title: x",
        "",
        "\n\n",
    ],
)
def test_frontmatter_cases(block: str) -> None:
    got = _native().frontmatter(block, fm.NOT_SCALAR)
    want = fm.read_without_yaml(block)
    assert got == want and (got is None or list(got) == list(want or {}))


def test_frontmatter_nesting_is_bounded_as_the_pure_reader_bounds_it() -> None:
    for depth in (20, 30, 2000):
        block = "title: t\nx:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(depth))
        got = _native().frontmatter(block, fm.NOT_SCALAR)
        assert got == fm.read_without_yaml(block)
        assert (got is None) == (depth > 20)


# -- parse -----------------------------------------------------------------

_body = st.one_of(
    _text,
    st.sampled_from(["", "\n", "# Heading\n\ntext\n", "---\n", "...\r\n", "tail"]),
)


# Lines `frontmatter` reads itself, most of the time (values with runs of
# spaces, every code-point width, YAML nulls, flow lists with repeats).
_plain_value = st.text(alphabet="aZ é\u00df\u4e00\U0001f600 .,;()/'+-1", min_size=1, max_size=12)
_simple_line = st.builds(
    lambda k, v: f"{k}: {v}",
    st.sampled_from(["title", "type", "description", "tags", "other"]),
    st.one_of(
        _plain_value,
        st.sampled_from(["null", "x  y", "a , b,,a"]),
        st.lists(_plain_value.filter(lambda v: "," not in v), max_size=4).map(
            lambda items: "[" + ", ".join(items) + "]"
        ),
    ),
)


@settings(max_examples=1500, deadline=None)
@given(
    bom=st.booleans(),
    opener=st.sampled_from(["---\n"] * 9 + ["---\r\n", "--- \n", "", "# T\n"]),
    lines=st.tuples(st.lists(_simple_line, max_size=5), st.just("") | _frontmatter_block()).map(
        lambda both: ["title: T  x", *both[0], *both[1].split("\n")]
    ),
    closer=st.sampled_from(["---"] * 6 + ["...", "---\r", "---\r\r", "--- ", "", "----", ".."]),
    newline=st.sampled_from(["\n"] * 6 + ["", "\r\n"]),
    body=_body,
    damage=st.sampled_from([b""] * 12 + [b"\x00", b"\xff", b"\xc3"]),
    key=st.sampled_from(["kb/a.md", "kb/sub/b.md", "kb.md", "kbx/c.md", "kb/d.txt", "é/e.md"]),
    root=st.sampled_from(["", "kb", "kb/sub", "é"]),
)
@pytest.mark.slow
def test_parse_is_the_pure_parse_or_leaves_it_to_it(
    bom: bool,
    opener: str,
    lines: list[str],
    closer: str,
    newline: str,
    body: str,
    damage: bytes,
    key: str,
    root: str,
) -> None:
    """Whatever the bytes, the C parse gives the pure parse's Document (the
    same class, every field equal) or None, and then the pure parse runs."""
    native = _native()
    text = opener + "".join(line + "\n" for line in lines) + closer + newline + body
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass") + damage
    got = native.parse(key, data, root, okf.Document, fm.NOT_SCALAR)
    if got is not None:
        want = okf._parse(key, data, root)
        assert type(got) is okf.Document and got == want


@pytest.mark.parametrize(
    "text",
    [
        "---\ntitle: T\n---\nbody\n",
        "---\ntitle: T\n---",  # no body, no newline
        "---\ntitle:  Two  spaces \ntype: A  B\ndescription: d\ntags: [x, y , x]\n---\n\nb\n",
        "---\ntitle: T\ntags: a, b,, a\n---\nb",
        "---\ntitle: T\ntags: [null, x]\ntype: null\n---\nb",
        "---\ntitle: T\nother: v\n...\r\nb",
        "---\ntitle: Ünïcode\n---\n\u4e00\u2028x\n",
        "\ufeff---\ntitle: T\n---\nb\n",
        "---\ntitle: 'quoted'\n---\nb",
        "---\ntitle: T\ntags:\n- a\n- k: v\n- a\ndescription: two\n  lines\nsrc:\n- id: x\n---\nb",
    ],
)
def test_parse_reads_the_common_shape_itself(text: str) -> None:
    """The shape it is for: not left to the pure parse, and equal to it."""
    native = _native()
    data = text.encode()
    for key, root in (("kb/x/a.md", "kb"), ("a.md", ""), ("kb/x/a.md", "kb/x/a.md")):
        got = native.parse(key, data, root, okf.Document, fm.NOT_SCALAR)
        assert got is not None and got == okf._parse(key, data, root)


@pytest.mark.parametrize(
    "text",
    [
        "no frontmatter\n",
        "---\r\ntitle: T\r\n---\r\nb",  # CRLF: YAML
        "---\ntitle: &a T\n---\nb",  # YAML
        "---\ntitle: T\ntype: {a: b,\n  c: d}\n---\nb",  # YAML
        "---\ntitle: T\ntype: {a: b}\n---\nb",  # a warning
        "---\ntitle: T\ntype:\n  k: v\n---\nb",  # a warning
        "---\ntype: t\n---\n# Heading title\n",  # title from the heading
        "---\ntitle: [a, b]\n---\nb",  # a warning
        "---\ntitle: T\nb",  # not closed: a warning
        "---\ntitle: T\n---\nb\x00",  # NUL
        "---\ntitle: T\n---\nb\udcff",  # invalid UTF-8
        "---\n---\nb",  # empty frontmatter
    ],
)
def test_parse_leaves_the_rest_to_the_pure_parse(text: str) -> None:
    native = _native()
    data = text.encode("utf-8", "surrogateescape")
    assert native.parse("kb/a.md", data, "kb", okf.Document, fm.NOT_SCALAR) is None


def test_parse_leaves_large_frontmatter_to_the_pure_parse() -> None:
    native = _native()
    for size, left in ((fm.MAX_FRONTMATTER_BYTES, False), (fm.MAX_FRONTMATTER_BYTES + 1, True)):
        block = "title: T\n" + "description: " + "d" * (size - 9 - 14) + "\n"
        assert len(block.encode()) == size
        data = f"---\n{block}---\nb".encode()
        got = native.parse("a.md", data, "", okf.Document, fm.NOT_SCALAR)
        assert (got is None) == left
        if got is not None:
            assert got == okf._parse("a.md", data, "")
