"""The status document (ctindex/service/status.py) is what `ctindex --json
status` prints and what `Index.status` carries, computed from the project
alone: no CLI context, no output stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.policy.project import Project
from ctindex.service.status import collect, exit_code, status_json, status_of
from tests.conftest import cli_main, write_config


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    root = make_project("ga4")
    write_config(root, "okf/bundles/ga4", watch=False)
    (root / "okf" / "bundles" / "ga4" / "bad.md").write_text("---\ntitle: [unclosed\n---\nx\n")
    assert cli_main("-C", str(root), "update").code == 0
    return root


def _volatile(doc: dict[str, object]) -> dict[str, object]:
    """Without what changes between two reads: the runtime folder's bytes
    (a status writes records there) and the watcher's clocks."""
    return {k: v for k, v in doc.items() if k not in ("runtime_bytes", "watcher")}


@pytest.mark.parametrize("verbose", [False, True])
def test_the_service_document_is_the_cli_document(project: Path, verbose: bool) -> None:
    words = ["-C", str(project), "--json", "status"] + (["--verbose"] if verbose else [])
    printed = cli_main(*words)
    doc = collect(Project.at(project), verbose)
    assert _volatile(status_json(doc)) == _volatile(json.loads(printed.out))
    assert exit_code(doc) == printed.code == 0
    assert doc["frontmatter_warnings"] == 1
    assert ("warnings" in doc) is verbose  # the paths only when asked for


def test_exit_codes_and_the_api_view(project: Path) -> None:
    (project / ".ct" / "okf" / "MANIFEST").write_bytes(b"not a manifest")
    doc = collect(Project.at(project), False)
    assert doc["problem"] and exit_code(doc) == 1
    status = status_of(doc)
    assert (status.problem, status.exit_code) == (doc["problem"], 1)
    assert status.document["exit_code"] == 1
    (project / ".ct" / "index.jsonc").write_text("{ not json")
    broken = collect(Project.at(project), False)
    assert broken["config_error"] and exit_code(broken) == 2
    assert status_of(broken).config_error == broken["config_error"]
