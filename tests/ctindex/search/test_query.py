"""The query parser: shapes and one-line errors."""

from __future__ import annotations

import pytest

from ctindex.providers.okf_markdown import FACET_TAG, FACET_TYPE, FACET_TYPE_WORD
from ctindex.search.query import (
    And,
    Facet,
    IdWord,
    Not,
    Or,
    PathPrefix,
    Phrase,
    Prefix,
    QueryError,
    Term,
    parse_query,
)


@pytest.mark.parametrize(
    ("query", "tree"),
    [
        ("Margins", Term("margin")),
        ("gross margin", And((Term("gross"), Term("margin")))),
        ('"Gross Margins"', Phrase(("gross", "margin"))),
        ("gross-margin", Phrase(("gross", "margin"))),
        ("marg*", Prefix(("marg",))),
        ("Computation*", Prefix(("computation", "comput"))),
        ("-legacy", Not(Term("legaci"))),
        ("a OR b c", And((Or((Term("a"), Term("b"))), Term("c")))),
        ("a or b", And((Term("a"), Term("or"), Term("b")))),
        # One word: the whole type or any word of it (docs/search.md).
        ("type:Metric", Or((Facet(FACET_TYPE + "metric"), Facet(FACET_TYPE_WORD + "metric")))),
        ('type:"BigQuery  Table"', Facet(FACET_TYPE + "bigquery table")),
        ("tag:Finance", Facet(FACET_TAG + "finance")),
        ("path:./acme_retail/metrics", PathPrefix("acme_retail/metrics")),
        ("-(a OR b) c", And((Not(Or((Term("a"), Term("b")))), Term("c")))),
        ("12:30", Phrase(("12", "30"))),  # not NAME-shaped before the colon: a word
        ("http://x.org", IdWord(("http", "x", "org"))),  # a value starting with / is text
    ],
)
def test_parse(query: str, tree: object) -> None:
    assert parse_query(query) == tree


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "empty query"),
        ("   ", "empty query"),
        ('"unclosed', "unterminated quote at column 1"),
        ("a OR", "'OR' at column 3 needs a term on both sides"),
        ("OR a", "'OR' at column 1"),
        ("a - b", "'-' must be followed by a term (column 3)"),
        ("(a b", "never closed"),
        ("a b)", "unmatched ')' at column 4"),
        ("()", "empty parentheses"),
        ("type:", "'type:' needs a value"),
        ("gross-mar*", "must be one word"),
        ('"..."', "holds no searchable word"),
        ("*", "must be one word"),
    ],
)
def test_errors_are_one_line_usage_errors(query: str, message: str) -> None:
    with pytest.raises(QueryError) as info:
        parse_query(query)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_parsed_queries_are_kept_within_a_bound_and_errors_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctindex.search import query as query_module

    monkeypatch.setattr(query_module, "_parsed", {})
    monkeypatch.setattr(query_module, "PARSED_MAX", 3)
    first = parse_query('"gross margin" OR revenue*')
    assert parse_query('"gross margin" OR revenue*') is first  # kept
    for _ in range(2):
        with pytest.raises(QueryError):
            parse_query('"unclosed')
    assert '"unclosed' not in query_module._parsed
    for q in ("a", "b", "c", "d"):
        parse_query(q)
    assert len(query_module._parsed) <= 3
    assert parse_query('"gross margin" OR revenue*') == first  # parsed again, the same
