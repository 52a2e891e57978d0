"""The why document (ctindex/service/why.py) is `ctindex why --json`'s, for
the CLI and the MCP `why` tool alike, hints included."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.service.why import why_document
from tests.conftest import cli_main, write_config

ASKED = ["okf/bundles/ga4/index.md", "okf/bundles/ga4/tables/events_.md", "notes/x.md", "../up"]


def test_the_document_is_the_cli_document(make_project: Callable[..., Path]) -> None:
    root = make_project("ga4", "acme_retail")
    write_config(root, "okf/bundles/ga4", watch=False)  # acme_retail: detected, not listed
    asked = [*ASKED, "okf/bundles/acme_retail/index.md"]
    printed = cli_main("-C", str(root), "--json", "why", *asked)
    plan = load_plan(Project.at(root))
    doc = why_document(plan, asked, [plan.decide(p, cwd=root) for p in asked])
    assert doc == json.loads(printed.out)
    assert printed.code == 1 and doc["all_included"] is False
    decisions = doc["decisions"]
    assert isinstance(decisions, list)
    assert decisions[-1]["hint"] == "ctindex scopes add okf/bundles/acme_retail"
