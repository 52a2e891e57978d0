"""The okf-markdown provider: parsing, frontmatter, fields, tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctindex.providers import PROVIDERS
from ctindex.providers import okf_markdown as okf
from ctindex.providers.frontmatter import MAX_FRONTMATTER_BYTES


def doc(data: bytes, key: str = "kb/notes/thing.md", root: str = "kb") -> okf.Document:
    got = okf.parse(key, data, root)
    assert isinstance(got, okf.Document), got
    return got


def test_versions_come_from_the_registry() -> None:
    info = PROVIDERS["okf-markdown"]
    assert (info.version, info.tokenizer_version) == (okf.PROVIDER_VERSION, okf.TOKENIZER_VERSION)


def test_fields_from_frontmatter() -> None:
    d = doc(
        b"---\ntitle: Gross Margin\ntype: Metric\ndescription: Revenue minus COGS\n"
        b"tags: [finance, margin]\n---\n# Heading\nBody text.\n"
    )
    assert (d.title, d.type, d.description, d.tags) == (
        "Gross Margin",
        "Metric",
        "Revenue minus COGS",
        ("finance", "margin"),
    )
    assert d.body == "# Heading\nBody text.\n"
    assert d.concept_id == "notes/thing"
    assert d.warning is None


def test_comma_separated_tags_and_scalar_coercion() -> None:
    d = doc(b"---\ntags: a, b ,a\ntitle: 2026\n---\nx")
    assert d.tags == ("a", "b")
    assert d.title == "2026"


def test_title_falls_back_to_heading_then_file_stem() -> None:
    assert doc(b"intro\n```\n# not this\n```\n# Real Title #\n").title == "Real Title"
    assert doc(b"no heading here\n## level two\n").title == "thing"


def test_no_frontmatter_whole_text_is_body() -> None:
    d = doc(b"plain text")
    assert d.body == "plain text" and d.warning is None


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"---\ntitle: [unclosed\n---\nbody", "malformed YAML"),
        (b"---\n- a list\n---\nbody", "not a mapping"),
        (b"---\ntitle: x\nno closing line\n", "no closing"),
    ],
)
def test_bad_frontmatter_is_a_warning_and_text_is_indexed(data: bytes, fragment: str) -> None:
    d = doc(data)
    assert d.warning is not None and fragment in d.warning
    assert d.warning.startswith("kb/notes/thing.md: ")
    assert d.body == data.decode()  # the whole text, frontmatter included


def test_alias_bombs_cost_nothing() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)]
    data = ("---\n" + "\n".join(lines) + "\ntags: *a11\ntitle: *a0\n---\nbody").encode()
    d = doc(data)  # 10**12 leaves if expanded: must return at once
    assert d.tags == () and d.title == "thing"
    assert d.warning is not None and "'title' is not a scalar" in d.warning


def test_scalars_keep_their_text() -> None:
    d = doc(b"---\ntitle: 2026\ntype: yes\ndescription: ~\ntags: [1.0, null, x]\n---\n")
    assert (d.title, d.type, d.description, d.tags) == ("2026", "yes", "", ("1.0", "x"))


def test_huge_frontmatter_is_not_parsed() -> None:
    big = b"---\nkey: " + b"x" * (MAX_FRONTMATTER_BYTES + 10) + b"\n---\nbody"
    d = doc(big)
    assert d.warning is not None and "larger than" in d.warning


def test_non_scalar_field_is_warned_and_ignored() -> None:
    d = doc(b"---\ntitle: {a: 1}\n---\n# From Heading\n")
    assert d.title == "From Heading"
    assert d.warning is not None and "'title'" in d.warning


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"abc\x00def", "NUL byte"),
        (b"caf\xe9", "invalid UTF-8 at byte 3"),
        (b"\xef\xbb\xbfok\xff", "invalid UTF-8 at byte 5"),
    ],
)
def test_read_errors(data: bytes, fragment: str) -> None:
    got = okf.parse("a/b.md", data)
    assert isinstance(got, okf.ProviderError)
    assert fragment in got.message and got.message.startswith("a/b.md: ")


def test_bom_is_stripped() -> None:
    d = doc(b"\xef\xbb\xbf---\ntitle: T\n---\nbody")
    assert d.title == "T" and d.body == "body"


def test_tokenizer_folds_casefolds_stems_and_splits_underscores() -> None:
    assert okf.terms("Running gross_margin CAFÉS Straße") == [
        "run",
        "gross",
        "margin",
        "cafe",
        "strass",
    ]
    assert okf.normalize_term("Margins") == "margin"


def test_analysis_separates_fields_and_weights_them() -> None:
    d = doc(
        b"---\ntitle: Alpha beta\ntags: [gamma delta]\ndescription: beta\ntype: Metric\n---\n"
        b"beta epsilon"
    )
    a = okf.analyze(d)
    sep = okf.SEP
    assert a.tokens == ["alpha", "beta", sep, "gamma", "delta", sep, "beta", sep, "beta", "epsilon"]
    w = dict(zip(okf.FIELDS, okf.WEIGHTS, strict=True))
    assert a.tfw["beta"] == w["title"] + w["description"] + w["body"]
    assert a.tfw[okf.FACET_TYPE + "metric"] == 1
    assert a.tfw[okf.FACET_TAG + "gamma delta"] == 1
    assert a.length == 2 * w["title"] + 2 * w["tags"] + w["description"] + 2 * w["body"]


def test_every_bundle_document_parses(corpus: Path) -> None:
    parsed = 0
    for path in corpus.rglob("*.md"):
        if path.name in ("index.md", "log.md"):
            continue
        key = str(path.relative_to(corpus))
        d = doc(path.read_bytes(), key, key.split("/")[0])
        assert d.title and d.warning is None, key
        parsed += 1
    assert parsed >= 50
