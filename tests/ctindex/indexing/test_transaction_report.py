"""ctindex/indexing/transaction.py UpdateReport: one frozen type for one pass."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project

# The `ctindex --json update` fields (docs/cli.md), less what the command adds.
JSON_FIELDS = [
    "generation", "published", "refreshed", "rebuilt", "reason", "added", "changed",
    "removed", "renamed", "metadata_only", "dirty", "documents", "errors", "warnings",
    "merged_segments", "missing_roots", "reserved", "entries_visited", "reconcile_ms",
    "duration_ms", "notes",
]  # fmt: skip


def _project(root: Path, scopes: list[str]) -> Project:
    (root / ".git").mkdir(parents=True)
    (root / ".ct").mkdir()
    config = {
        "version": 1,
        "watch": False,
        "scopes": [{"root": s, "provider": "okf-markdown"} for s in scopes],
    }
    (root / ".ct" / "index.jsonc").write_text(json.dumps(config))
    (root / "kb").mkdir()
    (root / "kb" / "a.md").write_text("# a\nalpha\n")
    (root / "kb" / "bad.md").write_bytes(b"# bad\n\xff\xfe not utf-8\n")
    return Project.at(root)


def test_report_is_frozen_and_its_json_keeps_the_documented_fields(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", ["kb", "gone"])
    report = transaction.update(project, load_plan(project))
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.generation = 7  # type: ignore[misc]
    doc = report.as_dict()
    assert list(doc) == JSON_FIELDS
    assert doc["missing_roots"] == ["gone"] and isinstance(doc["notes"], list)
    assert report.published and report.added == 2 and report.errors == 1
    assert report.seen is not None and set(report.seen) == {"kb/a.md", "kb/bad.md"}
    assert report.identity


def test_a_nothing_changed_pass_reports_the_generation_it_built_on(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", ["kb"])
    first = transaction.update(project, load_plan(project))
    again = transaction.update(project, load_plan(project))
    assert not again.published and not again.content_changed
    assert (again.generation, again.identity, again.documents) == (
        first.generation,
        first.identity,
        first.documents,
    )
