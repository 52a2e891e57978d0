"""The indexed search written once (ctindex/service/search.py): the answer
it finishes is the oracle's, indexed and from the files alike; it states
the generation read and IDs unique across scopes; and the CLI's and the
API's answers are its answer."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.query import freshness
from ctindex.search.query import parse_query
from ctindex.service.search import Searched, search
from ctindex.store.generation import read_manifest
from tests import oracle
from tests.conftest import write_config

SCOPES = ("okf/bundles/ga4", "okf/bundles/acme_retail")


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Project:
    root = make_project("ga4", "acme_retail")
    write_config(root, *SCOPES, watch=False)
    for bundle in ("ga4", "acme_retail"):  # one ID in both scopes
        (root / "okf" / "bundles" / bundle / "shared.md").write_text(
            f"# Shared {bundle}\n\nzqxv7both scopes hold it\n"
        )
    return Project.at(root)


def _search(project: Project, words: str, *, direct: bool = False, limit: int = 50) -> Searched:
    return search(
        project,
        lambda: load_plan(project),
        parse_query(words),
        limit,
        freshness.Options(direct=direct),
    )


def test_indexed_and_from_the_files_answer_alike_and_as_the_oracle(project: Project) -> None:
    for word in ("zqxv7both", "event", "revenue"):
        indexed = _search(project, word)
        direct = _search(project, word, direct=True)
        if word.startswith("zqx"):  # (the oracle matches whole words: no stems)
            expected = oracle.containing(project.root, word)
            assert {r.path for r in indexed.outcome.results} == expected, word
        assert indexed.outcome.results
        assert [r.path for r in indexed.outcome.results] == [r.path for r in direct.outcome.results]
        manifest = read_manifest(project.index_dir)
        assert manifest is not None
        # The generation stated is the one read; None for the files.
        assert indexed.freshness.generation == manifest.generation
        assert direct.freshness.generation is None
        assert indexed.read_s > 0


def test_ids_held_by_two_scopes_are_named_with_their_scope(project: Project) -> None:
    refs = sorted(r.ref for r in _search(project, "zqxv7both").outcome.results)
    assert refs == [f"{scope}:shared" for scope in sorted(SCOPES)]


def test_the_cli_and_the_api_show_the_service_s_answer(project: Project) -> None:
    import ctindex

    mine = _search(project, "event", limit=10)
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(project.root), "--json", "search", "event"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    cli = json.loads(done.stdout)
    with ctindex.Index(project.root) as index:
        api = index.search("event", limit=10)
    expected = [(r.ref, r.score) for r in mine.outcome.results]
    assert [(r["ref"], r["score"]) for r in cli["results"]] == expected
    assert [(h.ref, h.score) for h in api.hits] == expected
    assert cli["freshness"]["generation"] == api.freshness.generation
