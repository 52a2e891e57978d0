"""The okf-markdown provider's concept reading (`read_concept`,
`concept_key`): the document `parse` gives, the whole text and frontmatter,
and the links, with the concept files they name."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctindex.providers import okf_markdown as okf
from ctindex.providers.base import ConceptLink, ConceptText, ProviderError

TEXT = (
    "\ufeff---\ntitle: Orders\ntags: [a, b]\n---\n"
    "See [items](../items.md#cols), [home](index.md), [log](sub/log.md), "
    "[web](https://x.org/a.md), [abs](/root.md), [img](pic.png) "
    '[titled](<other.md> "Other") and [q](deep/q.md?x=1).\n'
)


def test_read_concept_gives_the_parse_the_text_and_the_links() -> None:
    data = TEXT.encode()
    got = okf.read_concept("kb/tables/orders.md", data, "kb")
    assert isinstance(got, ConceptText)
    assert got.document == okf.parse("kb/tables/orders.md", data, "kb")
    assert got.text == TEXT.removeprefix("\ufeff")
    assert got.frontmatter == {"title": "Orders", "tags": ["a", "b"]}
    assert got.warning is None
    assert got.links == (
        ConceptLink("items", "../items.md#cols", "kb/items.md"),
        ConceptLink("home", "index.md", None),  # reserved names are no concepts
        ConceptLink("log", "sub/log.md", None),
        ConceptLink("web", "https://x.org/a.md", None),
        ConceptLink("abs", "/root.md", None),
        ConceptLink("img", "pic.png", None),
        ConceptLink("titled", "other.md", "kb/tables/other.md"),
        ConceptLink("q", "deep/q.md?x=1", "kb/tables/deep/q.md"),
    )


def test_read_concept_warns_as_parse_does_and_refuses_what_parse_refuses() -> None:
    alias = okf.read_concept("a.md", b"---\nx: &a 1\ny: *a\n---\nbody\n", "")
    assert isinstance(alias, ConceptText)
    assert alias.frontmatter == {}
    assert alias.warning == "a.md: frontmatter uses a YAML alias; not shown"
    broken = okf.read_concept("b.md", b"---\ntitle: [x\n---\nbody\n", "")
    assert isinstance(broken, ConceptText)
    assert broken.warning == okf.parse("b.md", b"---\ntitle: [x\n---\nbody\n", "").warning
    assert isinstance(okf.read_concept("c.md", b"\x00", ""), ProviderError)


_segment = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,8}", fullmatch=True)


@given(st.lists(_segment, min_size=1, max_size=4), st.sampled_from(["", "kb", "a/b"]))
def test_concept_key_is_concept_ids_inverse(parts: list[str], root: str) -> None:
    cid = "/".join(parts)
    key = okf.concept_key(cid, root)
    assert okf.concept_id(key, root) == cid
    assert key == (f"{root}/{cid}.md" if root else f"{cid}.md")
