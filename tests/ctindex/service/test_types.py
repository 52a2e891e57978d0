"""The API's result types (ctindex/service/types.py): one report of an
update, the same for `Index.update()` and `ctindex --json update`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from ctindex.api import Index
from ctindex.indexing import transaction
from ctindex.service.types import UpdateReport, update_report_of
from ctindex.service.update_problems import problems
from tests.conftest import cli_main, write_config

# The indexer's report also carries what only the daemon reads.
DAEMON_ONLY = {"linked", "linked_full", "seen", "identity"}


def test_the_view_has_every_field_of_the_indexers_report() -> None:
    theirs = [f.name for f in fields(transaction.UpdateReport) if f.name not in DAEMON_ONLY]
    ours = [f.name for f in fields(UpdateReport)]
    assert ours == [*theirs, "problems"]  # what it could not take in: the view adds it


def test_update_json_is_the_reports_json(make_project: Callable[..., Path]) -> None:
    root = make_project("ga4")
    write_config(root, "okf/bundles/ga4", "okf/bundles/gone", watch=False)
    (root / "okf" / "bundles" / "ga4" / "nul.md").write_bytes(b"\x00")
    printed = cli_main("-C", str(root), "--json", "update", "--strict=errors")
    assert printed.code == 2
    doc = json.loads(printed.out)
    with Index(root) as index:
        report = index.rebuild()
    expected = report.to_json()
    volatile = ("generation", "rebuilt", "reason", "reconcile_ms", "duration_ms", "notes")
    volatile += ("added", "published", "entries_visited", "dirty")
    for key in volatile:
        expected[key] = doc[key]
    assert doc == {**expected, "strict": ["errors"], "exit_code": 2}
    assert list(doc) == [*expected, "strict", "exit_code"]  # the document's field order
    assert report.problems["missing_roots"][0]["path"] == "okf/bundles/gone"


def test_the_view_copies_the_indexers_report(make_project: Callable[..., Path]) -> None:
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    root = make_project("ga4")
    write_config(root, "okf/bundles/ga4", watch=False)
    project = Project.at(root)
    report = transaction.update(project, load_plan(project))
    view = update_report_of(report, problems(project, report.missing_roots))
    for name in (f.name for f in fields(UpdateReport) if f.name != "problems"):
        theirs = getattr(report, name)
        assert getattr(view, name) == (tuple(theirs) if isinstance(theirs, list) else theirs)
    assert view.documents > 0 and view.published
