"""Concepts by ID (ctindex/service/concepts.py): which file an ID names in
each scope or as a project-relative path, the file read without following a
symlink, its links given the IDs they name, and close matches."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.errors import ConceptNotFound, ConceptUnreadable
from ctindex.policy.plan import Plan, load_plan
from ctindex.policy.project import Project
from ctindex.service.concepts import read_concept, resolve, suggestions
from tests.conftest import write_config


@pytest.fixture
def plan(make_project: Callable[..., Path]) -> Plan:
    root = make_project("ga4", "acme_retail")
    write_config(root, "okf/bundles/ga4", "okf/bundles/acme_retail", watch=False)
    for bundle in ("ga4", "acme_retail"):
        (root / "okf" / "bundles" / bundle / "shared.md").write_text(
            f"# Shared {bundle}\n\n[events](tables/events_.md) [up](../x.md)\n"
        )
    return load_plan(Project.at(root))


def test_an_id_names_a_file_in_each_scope_and_a_path_names_one(plan: Plan) -> None:
    assert resolve(plan, "shared") == [
        ("okf/bundles/ga4", "okf/bundles/ga4/shared.md"),
        ("okf/bundles/acme_retail", "okf/bundles/acme_retail/shared.md"),
    ]
    assert resolve(plan, "shared.md", scope="okf/bundles/acme_retail/") == [
        ("okf/bundles/acme_retail", "okf/bundles/acme_retail/shared.md")
    ]
    assert resolve(plan, "okf/bundles/ga4/tables/events_") == [
        ("okf/bundles/ga4", "okf/bundles/ga4/tables/events_.md")
    ]
    for nothing in ("tables/absent", "", "  ", "../etc/passwd", "index", "a\x00b"):
        assert resolve(plan, nothing) == [], nothing


def test_read_concept_links_within_its_scope_only(plan: Plan) -> None:
    concept = read_concept(plan, "okf/bundles/ga4", "okf/bundles/ga4/shared.md")
    assert (concept.id, concept.title) == ("shared", "Shared ga4")
    assert [(link.target, link.concept_id) for link in concept.links] == [
        ("tables/events_.md", "tables/events_"),
        ("../x.md", None),  # outside the scope
    ]
    assert concept.freshness.mode == "direct"


def test_read_concept_follows_no_symlink_and_reads_no_more_than_a_concept(plan: Plan) -> None:
    ga4 = plan.project.root / "okf" / "bundles" / "ga4"
    os.symlink(ga4 / "shared.md", ga4 / "link.md")
    with pytest.raises(ConceptUnreadable, match="cannot open"):
        read_concept(plan, "okf/bundles/ga4", "okf/bundles/ga4/link.md")
    with pytest.raises(ConceptNotFound):
        read_concept(plan, "okf/bundles/ga4", "okf/bundles/ga4/gone.md")
    (ga4 / "big.md").write_text("x" * (plan.settings.max_file_bytes + 1))
    with pytest.raises(ConceptUnreadable, match="larger than max_file_bytes"):
        read_concept(plan, "okf/bundles/ga4", "okf/bundles/ga4/big.md")


def test_suggestions_put_the_same_last_segment_first(plan: Plan) -> None:
    known = [
        ("tables/orders", "okf/bundles/acme_retail/tables/orders.md"),
        ("tables/order_items", "okf/bundles/acme_retail/tables/order_items.md"),
        ("orderz", "okf/bundles/ga4/orderz.md"),
    ]
    assert suggestions(plan, known, "orders.md", None)[:2] == ("tables/orders", "orderz")
    assert "orderz" not in suggestions(plan, known, "orders", "okf/bundles/acme_retail")
