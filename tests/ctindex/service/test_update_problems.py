"""What an update could not take in (ctindex/service/update_problems.py):
read from the published generation's diagnostics, by kind, sorted by path,
the same for `update --json` and `Index.update().problems`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ctindex.api import Index
from ctindex.policy.project import Project
from ctindex.service.update_problems import PROBLEM_KINDS, json_problems, problems
from tests.conftest import cli_main, write_config


def test_problems_name_every_file_by_kind(make_project: Callable[..., Path]) -> None:
    root = make_project("ga4")
    write_config(root, "okf/bundles/ga4", "okf/bundles/gone", watch=False)
    ga4 = root / "okf" / "bundles" / "ga4"
    (ga4 / "z_nul.md").write_bytes(b"a\x00b")
    (ga4 / "a_nul.md").write_bytes(b"\x00")
    (ga4 / "bad.md").write_text("---\ntitle: [unclosed\n---\nx\n")
    printed = json.loads(cli_main("-C", str(root), "--json", "update").out)
    found = problems(Project.at(root), printed["missing_roots"])
    assert tuple(found) == PROBLEM_KINDS
    assert [p["path"] for p in found["errors"]] == [
        "okf/bundles/ga4/a_nul.md",
        "okf/bundles/ga4/z_nul.md",
    ]
    assert [p["path"] for p in found["warnings"]] == ["okf/bundles/ga4/bad.md"]
    assert found["missing-roots"] == [
        {"path": "okf/bundles/gone", "message": "scope root missing, a symlink or not a folder"}
    ]
    assert json_problems(found) == printed["problems"]
    with Index(root) as index:
        assert index.update().problems == printed["problems"]


def test_no_index_no_problems(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    assert problems(Project.at(tmp_path), []) == {kind: [] for kind in PROBLEM_KINDS}
