"""Indexed answers equal the --direct oracle on the four real bundles."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.indexing.transaction import update
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.search.execute import search_direct, search_index
from ctindex.search.query import parse_query

QUERIES = [
    # terms
    "margin",
    "revenue",
    "bitcoin",
    "block",
    "transaction",
    "event",
    "session",
    "user",
    "question",
    "answer",
    "Reputation",
    "BigQuery",
    "gross margin",
    "bitcoin block hash",
    "page_view",
    "fy2026",
    "posts votes",
    "nonexistentword",
    # phrases
    '"gross margin"',
    '"block height"',
    '"revenue recognition"',
    '"stack overflow"',
    '"event name"',
    '"user id"',
    '"margin gross"',
    '"public dataset"',
    # prefixes
    "marg*",
    "trans*",
    "Computation*",
    "block*",
    "sess*",
    "ques*",
    "a*",
    "fin*",
    "rep*",
    "zzq*",
    # negations
    "margin -legacy",
    "revenue -margin",
    "bitcoin -transaction",
    "-margin",
    "event -session",
    '-"gross margin" revenue',
    "posts -answers -questions",
    # OR and grouping
    "bitcoin OR margin",
    "legacy OR deprecated",
    '"gross margin" OR revenue',
    "(bitcoin OR ethereum) transaction",
    "-(margin OR revenue) table",
    "question OR answer OR vote",
    "marg* OR block*",
    # filters
    "type:Metric",
    "type:metric",
    "type:Policy",
    'type:"BigQuery Table"',
    "tag:finance",
    "tag:finance -type:Policy",
    "path:okf/bundles/acme_retail/",
    "path:okf/bundles/ga4/ event",
    "path:okf/bundles/stackoverflow/ question",
    "tag:deprecated OR tag:legacy",
    "type:reference bitcoin",
    "path:okf/bundles/crypto tag:bitcoin",
    '-type:Reference -type:"BigQuery Table"',
]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> tuple[Project, Any]:
    from tests.conftest import copy_bundles

    root = copy_bundles(tmp_path_factory.mktemp("bundles"))
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    project = Project.at(root)
    plan = load_plan(project)
    report = update(project, plan)
    assert report.rebuilt and report.documents == 53
    return project, plan


def test_at_least_fifty_queries() -> None:
    assert len(QUERIES) >= 50


@pytest.mark.parametrize("query", QUERIES)
def test_index_equals_direct(indexed: tuple[Project, Any], query: str) -> None:
    project, plan = indexed
    node = parse_query(query)
    via_index = search_index(project.index_dir, node, limit=5, want_keys=True)
    direct = search_direct(str(project.root), plan, node, limit=5, want_keys=True)
    assert via_index.keys == direct.keys
    assert via_index.total == direct.total == len(direct.keys)
    # Same documents, same corpus statistics: the same scores.
    assert [r.score for r in via_index.results] == [r.score for r in direct.results]


def test_most_queries_find_something(indexed: tuple[Project, Any]) -> None:
    project, _ = indexed
    found = [q for q in QUERIES if search_index(project.index_dir, parse_query(q), 1).total]
    assert len(found) >= len(QUERIES) - 5


def test_cli_json_schema_and_exit_codes(
    indexed: tuple[Project, Any], run_cli: Callable[..., Any]
) -> None:
    project, _ = indexed
    res = run_cli("-C", str(project.root), "--json", "search", "gross margin", "--limit", "2")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["total"] >= 2 and len(doc["results"]) == 2
    hit = doc["results"][0]
    assert set(hit) == {
        "id",
        "scope",
        "path",
        "title",
        "type",
        "tags",
        "score",
        "snippet",
        "match",
        "snippet_text",
        "snippet_matches",
        "ref",
    }
    assert hit["ref"] == hit["id"]  # one scope holds it: the bare ID (ctindex/search/refs.py)
    assert hit["path"].startswith("okf/bundles/acme_retail/") and not hit["id"].endswith(".md")
    assert "«" in hit["snippet"]
    fresh = doc["freshness"]
    assert fresh["mode"] == "reconcile-on-query" and fresh["generation"] >= 1
    assert set(fresh) >= {"mode", "reason", "generation", "barrier_ms", "reconcile_ms"}
    miss = run_cli("-C", str(project.root), "search", "nonexistentword")
    assert miss.code == 1
    bad = run_cli("-C", str(project.root), "search", '"unclosed')
    assert bad.code == 2 and bad.err.count("\n") == 1 and "unterminated quote" in bad.err


def test_direct_never_touches_the_index(
    indexed: tuple[Project, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins
    import os

    project, plan = indexed
    index = str(project.index_dir)
    real_open, real_os_open = builtins.open, os.open

    def guard(path: Any, *args: Any, **kwargs: Any) -> Any:
        assert not os.fspath(path).startswith(index), f"--direct opened {path}"
        return real_open(path, *args, **kwargs)

    def guard_os(path: Any, *args: Any, **kwargs: Any) -> Any:
        assert not os.fspath(path).startswith(index), f"--direct opened {path}"
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guard)
    monkeypatch.setattr(os, "open", guard_os)
    got = search_direct(str(project.root), plan, parse_query("margin"), 3, want_keys=True)
    assert got.total > 0


def test_update_lock_timeout_is_one_clear_line(indexed: tuple[Project, Any]) -> None:
    from ctindex.errors import IndexWriteError
    from ctindex.store.lock import update_lock

    project, plan = indexed
    with update_lock(project.index_dir), pytest.raises(IndexWriteError) as info:
        update(project, plan, lock_timeout=0.2)
    assert "update.lock" in str(info.value) and "another writer" in str(info.value)
