"""ctindex/mcp_documents.py in process: pages of a search are the ranking
cut in order, a body read in pages is the body, every document fits its
declared schema, and the refusals are one line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctindex
from ctindex import mcp_documents as docs
from tests.conftest import copy_bundles, write_config

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> ctindex.Index:
    root = copy_bundles(tmp_path_factory.mktemp("mcpdocs") / "p", ("ga4", "stackoverflow"))
    write_config(root, "okf/bundles/ga4", "okf/bundles/stackoverflow", watch=False)
    return ctindex.Index(root)


@settings(max_examples=10, deadline=None)
@given(limit=st.integers(1, 7))
def test_search_pages_are_the_ranking_in_order(index: ctindex.Index, limit: int) -> None:
    whole = docs.search(index, "table", 40, 0, False)
    jsonschema.validate(whole, docs.SEARCH)
    pages: list[object] = []
    offset: object = 0
    while isinstance(offset, int) and offset < 40:
        page = docs.search(index, "table", limit, offset, False)
        jsonschema.validate(page, docs.SEARCH)
        assert isinstance(page["results"], list)
        pages += page["results"]
        offset = page["next_offset"]
    assert pages[:40] == whole["results"]


def test_a_body_read_in_pages_is_the_body(index: ctindex.Index) -> None:
    hit = index.search("events").hits[0]
    c = index.get(hit.ref)
    parts, offset = [], 0
    while True:
        doc = docs.concept(c, offset, 97)
        jsonschema.validate(doc, docs.CONCEPT)
        parts.append(doc["body"])
        if doc["next_offset"] is None:
            break
        assert doc["truncated"] is True
        offset = doc["next_offset"]  # type: ignore[assignment]
    assert "".join(map(str, parts)) == c.body
    whole = docs.concept(c, 0, len(c.body) + 1)
    assert whole["truncated"] is False and whole["body_chars"] == len(c.body)


def test_scopes_related_status_and_the_depth_bound(index: ctindex.Index) -> None:
    scopes = docs.scopes(index)
    jsonschema.validate(scopes, docs.SCOPES)
    assert [s["root"] for s in scopes["scopes"]] == [  # type: ignore[union-attr, index]
        "okf/bundles/ga4",
        "okf/bundles/stackoverflow",
    ]
    assert scopes["documents"] == len(index.ids())
    tagged = next(c for c in index.concepts(limit=200).concepts if c.tags)
    near = docs.related(index, tagged.id, tagged.scope, 5)
    jsonschema.validate(near, docs.RELATED)
    jsonschema.validate(docs.status(index), docs.STATUS)
    with pytest.raises(ctindex.UsageError, match="offset \\+ limit must be at most 1000"):
        docs.search(index, "table", 100, 950, False)
