"""Query fields (docs/search.md, "Fields"): what each parses to, which
words with a colon are text, and the one-line errors (UnknownField names the
closest field)."""

from __future__ import annotations

import pytest

from ctindex.errors import QueryError, UnknownField
from ctindex.providers.fields import EXACT_ID, FACET_TAG, FACET_TYPE, FACET_TYPE_WORD
from ctindex.search.query import (
    FIELDS,
    And,
    Facet,
    Field,
    IdWord,
    Not,
    Or,
    PathPrefix,
    Phrase,
    Prefix,
    Term,
    parse_query,
)


@pytest.mark.parametrize(
    ("query", "tree"),
    [
        ("title:Margins", Field("title", ("margin",))),
        ('TITLE:"Gross  Margins"', Field("title", ("gross", "margin"))),
        ("title:gross-margin", Field("title", ("gross", "margin"))),
        ("description:café", Field("description", ("cafe",))),
        ("tags:Finance", Facet(FACET_TAG + "finance")),
        ("tag:Finance", Facet(FACET_TAG + "finance")),
        ('tags:"Crème  Brûlée"', Facet(FACET_TAG + "creme brulee")),
        ("id:Tables/Transactions", Facet(EXACT_ID + "tabl transact")),
        (
            "type:Métrique",
            Or((Facet(FACET_TYPE + "metrique"), Facet(FACET_TYPE_WORD + "metrique"))),
        ),
        ("path:okf/a", PathPrefix("okf/a")),
        ("-title:x y", And((Not(Field("title", ("x",))), Term("y")))),
        # Words with a colon that are not NAME:value.
        ("12:30", Phrase(("12", "30"))),
        ("http://example.org/x", IdWord(("http", "exampl", "org", "x"))),
        ("std::vector", Phrase(("std", "vector"))),
        (":x", Term("x")),
        ('"note:x"', Phrase(("note", "x"))),
        # Query words fold like document words.
        ("Café", Term("cafe")),
        ("naïve*", Prefix(("naive", "naiv"))),
        ("re\u0301sume\u0301", Term("resum")),
        ('"ﬁle ½"', Phrase(("file", "1", "2"))),
    ],
)
def test_shapes(query: str, tree: object) -> None:
    assert parse_query(query) == tree


@pytest.mark.parametrize(
    ("query", "field", "suggestion"),
    [
        ("tgs:finance", "tgs", "tags"),
        ("Titel:margin", "Titel", "title"),
        ("descripton:x", "descripton", "description"),
        ("margin typ:Metric", "typ", "type"),
        ("url:thing", "url", None),
        ("note: x", "note", None),
        ('pth:"a b"', "pth", "path"),
    ],
)
def test_an_unknown_field_names_the_closest(query: str, field: str, suggestion: str | None) -> None:
    with pytest.raises(UnknownField) as got:
        parse_query(query)
    message = str(got.value)
    assert isinstance(got.value, QueryError) and got.value.field == field
    assert message.startswith(f"query: unknown field {field!r} at column ")
    assert "fields: description, id, path, tag, tags, title, type" in message
    assert "\n" not in message
    if suggestion is None:
        assert got.value.suggestions == () and "did you mean" not in message
    else:
        assert got.value.suggestions[0] == suggestion
        assert f"; did you mean {suggestion!r}? fields: " in message


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("title:", "'title:' needs a value"),
        ('title:""', "'title:' needs a value"),
        ("title:marg*", "'title:' at column 1 takes words, not a prefix"),
        ("description:--", "'description:' at column 1 holds no searchable word"),
        ("id:...", "'id:' at column 1 holds no searchable word"),
        ('title:"open', "unterminated quote"),
    ],
)
def test_bad_field_values(query: str, fragment: str) -> None:
    with pytest.raises(QueryError, match=fragment):
        parse_query(query)


def test_every_field_is_documented() -> None:
    from pathlib import Path

    from ctindex.cli import _QUERY_SYNTAX

    docs = (Path(__file__).resolve().parents[3] / "docs" / "search.md").read_text()
    for name in FIELDS:
        assert f"  {name}:" in _QUERY_SYNTAX or f"({name}: is the same)" in _QUERY_SYNTAX, name
        assert f"`{name}:" in docs, name
    assert "ctindex search '\"gross margin\" OR revenue*'" in _QUERY_SYNTAX
