"""Files skipped for a reserved name (okf-markdown: index.md, log.md at any
level) are counted and named by every full pass, whichever walk ran it
(serial, the native scan, the parallel walk), and `update` and `status`
say so; a narrowed pass names none (it did not look everywhere)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from tests.conftest import CliResult, copy_bundles


def _reserved_on_disk(root: Path) -> list[str]:
    """The oracle: every index.md and log.md beneath a bundle, by a plain walk."""
    found = []
    for folder, _dirs, files in os.walk(root / "okf" / "bundles"):
        for name in files:
            if name in ("index.md", "log.md"):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return sorted(found)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = copy_bundles(tmp_path / "p", ("ga4", "acme_retail"))
    deep = root / "okf" / "bundles" / "ga4" / "tables" / "deeper"
    deep.mkdir()
    (deep / "log.md").write_text("# a log, reserved\n")
    (deep / "page.md").write_text("# a page, indexed\n")
    return root


@pytest.mark.parametrize("threads", ["0", "4"], ids=["serial", "parallel"])
def test_a_full_pass_names_every_reserved_file(
    project: Path, threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTINDEX_WALK_THREADS", threads)
    p = Project.at(project)
    built = transaction.rebuild(p, load_plan(p))
    want = _reserved_on_disk(project)
    assert want and list(built.reserved) == want
    again = transaction.update(p, load_plan(p))  # nothing changed: the table's pass
    assert list(again.reserved) == want
    narrowed = transaction.update_paths(p, load_plan(p), ["okf/bundles/ga4/tables"])
    assert narrowed.reserved == ()


def test_update_and_status_count_them_and_name_them_with_verbose(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    want = _reserved_on_disk(project)
    text = run_cli("-C", str(project), "update")
    assert (
        f"reserved: {len(want)} (index.md and log.md are never indexed; paths with --verbose)"
        in (text.out)
    )
    verbose = run_cli("-C", str(project), "update", "--verbose").out
    assert [line.split()[-1] for line in verbose.splitlines() if "  reserved  " in line] == want
    doc = json.loads(run_cli("-C", str(project), "--json", "update").out)
    assert doc["reserved"] == want
    status = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert status["last_full_reconcile"]["reserved"] == len(want)
    assert status["last_full_reconcile"]["reserved_paths"] == want
    plain = run_cli("-C", str(project), "status").out
    assert f"reserved: {len(want)} (" in plain
