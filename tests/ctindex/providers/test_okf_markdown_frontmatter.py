"""The YAML-free frontmatter reader must agree with libyaml on whatever it accepts.

`okf_markdown._fast_frontmatter` reads simple `key: value` frontmatter
without PyYAML (the rebuild's hot path); anything it is unsure of goes to
`_load_yaml`. These tests hold it to exactly the same result.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.providers import okf_markdown as okf

# Mostly characters the fast path accepts, with every YAML indicator and
# line-break oddity it must refuse mixed in.
_SAFE = "abXY09 _é.,;()/'+-"
_RISKY = ':#[]{}"~&*!?|>%@`\t\r\u2028\x85\uff41'
_chars = st.sampled_from(_SAFE * 6 + _RISKY)
_word = st.one_of(
    st.text(_chars, max_size=10),
    st.sampled_from(
        ["null", "Null", "NULL", "~", "yes", "2026", "Foo Bar ", "a'b", "x, y", " #c", "a: b"]
    ),
)
_flow = st.builds(
    lambda opener, sep, items, closer: opener + sep.join(items) + closer,
    st.sampled_from(["[", "[ ", "[["]),
    st.sampled_from([",", ", ", " , ", ",,"]),
    st.lists(_word, max_size=4),
    st.sampled_from(["]", " ]", "],", ""]),
)
_key = st.sampled_from(
    ["title", "type", "description", "tags", "other", "x-y", "Title", "9a", "_k", "tags ", " title"]
)
_line = st.one_of(
    st.builds(
        lambda k, colon, v: k + colon + v,
        _key,
        st.sampled_from([": ", ":  ", ":"]),
        st.one_of(_word, _flow),
    ),
    st.sampled_from(["", "  x", "- a", "# c", "---x"]),
)


def _yaml(block: str) -> object:
    got = okf._load_yaml(block)
    assert not isinstance(got, dict) or not any(isinstance(v, okf._NotScalar) for v in got.values())
    return got


@settings(max_examples=600, deadline=None)
@given(st.lists(_line, max_size=6), st.sampled_from(["\n", "", "\n\n"]))
def test_fast_frontmatter_agrees_with_libyaml(lines: list[str], end: str) -> None:
    block = "\n".join(lines) + end
    fast = okf._fast_frontmatter(block)
    if fast is not None:
        assert fast == _yaml(block), block  # and YAML must not reject it either


def test_fast_frontmatter_takes_the_common_shape_and_refuses_the_rest() -> None:
    common = (
        "title: Kazo Ripra\ntype: Metric\ndescription: the ratio of a, b (per day)\n"
        "tags: [votes, posts , null]\nowner: data-team\n"
    )
    assert okf._fast_frontmatter(common) == {
        "title": "Kazo Ripra",
        "type": "Metric",
        "description": "the ratio of a, b (per day)",
        "tags": ["votes", "posts", None],
    }
    assert okf._fast_frontmatter(common) == okf._load_yaml(common)
    for other in (
        "title: a: b\n",
        "title: x # note\n",
        "title: 'quoted'\n",
        "tags:\n- a\n",
        "title: a\n  continued\n",
        "tags: [a, b,]\n",
        "title: x\r\n",
        "\n",
    ):
        assert okf._fast_frontmatter(other) is None, other


def test_parse_is_the_same_with_and_without_the_fast_path() -> None:
    text = (
        b"---\ntitle: Null\ntype: Table\ntags: [a_b, c, c]\ndescription: x\n---\n"
        b"# Heading\nbody words\n"
    )
    fast = okf.parse("kb/x.md", text, "kb")
    saved = okf._fast_frontmatter
    try:
        okf._fast_frontmatter = lambda block: None  # type: ignore[assignment]
        slow = okf.parse("kb/x.md", text, "kb")
    finally:
        okf._fast_frontmatter = saved  # type: ignore[assignment]
    assert fast == slow
    assert fast.title == "Heading" and fast.tags == ("a_b", "c")  # type: ignore[union-attr]


def _closing_line_oracle(text: str) -> tuple[int, int] | None:
    """(start, end) of the closing line, found line by line: the definition
    the provider's single regex search must agree with."""
    pos = text.index("\n") + 1
    while pos <= len(text):
        nl = text.find("\n", pos)
        line_end = len(text) if nl < 0 else nl
        if text[pos:line_end].rstrip("\r") in ("---", "..."):
            return pos, line_end
        if nl < 0:
            return None
        pos = nl + 1
    return None


@settings(max_examples=400, deadline=None)
@given(
    opening=st.sampled_from(["---\n", "---\r\n"]),
    rest=st.lists(st.sampled_from(["---", "...", "\r", "\n", "a: b", " ", "--", "."]), max_size=14),
)
def test_the_closing_line_is_found_as_line_by_line(opening: str, rest: list[str]) -> None:
    text = opening + "".join(rest)
    found = okf._CLOSING.search(text, text.index("\n") + 1)
    assert (None if found is None else (found.start(), found.end())) == _closing_line_oracle(text)
