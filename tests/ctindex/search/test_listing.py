"""`Index.concepts` (ctindex/search/listing.py): pages cover every concept
exactly once, in ID order, whatever the page size; the type and tag filters
select what the same `type:`/`tag:` search selects; the page read from the
files equals the page read from the index."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctindex
from ctindex.search.listing import filters, list_direct, list_snapshot
from ctindex.store.snapshot import with_snapshot


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ctindex.Index]:
    from tests.conftest import copy_bundles

    root = tmp_path_factory.mktemp("listing") / "project"
    root.mkdir()
    copy_bundles(root, ("ga4", "stackoverflow", "acme_retail"), True)
    bundles = root / "okf" / "bundles"
    (bundles / "stackoverflow" / "tables" / "events_.md").write_text("---\ntype: Twin\n---\nx\n")
    (bundles / "acme_retail" / "tables").mkdir(exist_ok=True)
    (bundles / "acme_retail" / "tables" / "events_.md").write_text("same ID, third scope\n")
    with ctindex.Index(root) as opened:
        yield opened


def _every(index: ctindex.Index, limit: int, **filters: str) -> list[ctindex.ConceptSummary]:
    out: list[ctindex.ConceptSummary] = []
    offset: int | None = 0
    while offset is not None:
        page = index.concepts(offset=offset, limit=limit, **filters)
        assert page.offset == offset and len(page.concepts) <= limit
        assert page.freshness.generation is not None
        out += page.concepts
        offset = page.next_offset
    return out


@settings(max_examples=15, deadline=None)
@given(limit=st.integers(min_value=1, max_value=40))
def test_pages_cover_every_concept_once_in_id_order(index: ctindex.Index, limit: int) -> None:
    listed = _every(index, limit)
    assert sorted(c.id for c in listed) == index.ids()
    paths = [c.path for c in listed]
    assert len(paths) == len(set(paths)) == index.concepts(limit=1).total
    assert [(c.id, c.path) for c in listed] == sorted((c.id, c.path) for c in listed)


def test_duplicate_ids_are_listed_once_per_scope(index: ctindex.Index) -> None:
    ids = index.ids()
    twice = {i for i in ids if ids.count(i) > 1}
    assert "tables/events_" in twice  # three scopes hold it (the fixture)
    listed = _every(index, 1000)
    for cid in twice:
        assert len({c.scope for c in listed if c.id == cid}) == ids.count(cid)


@pytest.mark.parametrize(
    ("kind", "value"),
    [("type", "BigQuery Table"), ("type", "table"), ("tag", "ga4"), ("tag", "nothing-has-it")],
)
def test_filters_select_what_the_search_filter_selects(
    index: ctindex.Index, kind: str, value: str
) -> None:
    wanted = {h.path for h in index.search(f'{kind}:"{value}"', limit=1000).hits}
    got = _every(index, 7, **{kind: value})
    assert {c.path for c in got} == wanted and len(got) == len(wanted)


def test_prefix_and_filters_combine(index: ctindex.Index) -> None:
    everything = _every(index, 1000)
    tables = _every(index, 5, prefix="tables/", tag="ga4")
    tagged = {h.path for h in index.search("tag:ga4", limit=1000).hits}
    assert tables == [c for c in everything if c.id.startswith("tables/") and c.path in tagged]
    assert tables


def test_the_files_give_the_same_page_as_the_index(index: ctindex.Index) -> None:
    # Under xdist this test may be the first of the module on its worker:
    # a query builds the index that the snapshot reader below opens.
    index.concepts(limit=1)
    plan = index.plan()
    for node, prefix in ((None, ""), (filters("table", None), ""), (None, "tables/")):
        by_index = with_snapshot(
            Path(index.project.index_dir),
            partial(list_snapshot, plan=plan, node=node, prefix=prefix, offset=2, limit=9),
        )
        by_files = list_direct(str(index.root), plan, node, prefix, 2, 9)
        assert by_index.concepts == by_files.concepts and by_index.total == by_files.total


@pytest.mark.parametrize(
    "bad", [{"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": True}, {"offset": 1.5}]
)
def test_bad_pages_are_usage_errors(index: ctindex.Index, bad: dict[str, object]) -> None:
    with pytest.raises(ctindex.UsageError):
        index.concepts(**bad)  # type: ignore[arg-type]


def test_past_the_end_is_an_empty_last_page(index: ctindex.Index) -> None:
    total = index.concepts(limit=1).total
    page = index.concepts(offset=total + 5)
    assert page.concepts == () and page.total == total and page.next_offset is None


def test_a_new_file_is_in_the_next_listing(
    make_project: Callable[..., Path],
) -> None:
    root = make_project("ga4")
    with ctindex.Index(root) as index:
        before = index.concepts(prefix="tables/").total
        (root / "okf" / "bundles" / "ga4" / "tables" / "listed_now.md").write_text(
            "---\ntype: Fresh\n---\nhi\n"
        )
        page = index.concepts(type="fresh")
        assert [c.id for c in page.concepts] == ["tables/listed_now"]
        assert index.concepts(prefix="tables/").total == before + 1
