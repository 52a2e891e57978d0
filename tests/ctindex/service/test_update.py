"""Where update and rebuild run (ctindex/service/update.py): the
report an answer carries is taken field by field, and the generation it
names must be what the client's own view of the store shows. The whole
exchange runs on the real share rig (tests/e2e/test_netshare_host.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ctindex.client.share import WriteAnswered
from ctindex.indexing import transaction as indexer
from ctindex.ipc.share_channel import LOCAL_WRITES_ENV
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.service import update as route
from ctindex.store.generation import read_manifest
from tests.conftest import CORPUS


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "proj"
    shutil.copytree(CORPUS / "acme_retail", root / "okf" / "bundles" / "acme_retail")
    (root / ".git").mkdir()
    return Project(root)


def _report_doc(project: Project) -> dict[str, Any]:
    report = indexer.update(project, load_plan(project))
    return report.as_dict()


def test_a_report_is_taken_field_by_field(project: Project) -> None:
    doc = _report_doc(project)
    taken = route.report_of(doc)
    assert taken is not None and taken.as_dict() == doc
    assert route.report_of({**doc, "extra": "ignored"}) is not None
    for broken in (
        {k: v for k, v in doc.items() if k != "generation"},
        {**doc, "generation": "7"},
        {**doc, "added": -1},
        {**doc, "published": 1},
        {**doc, "notes": ["ok", 3]},
        {**doc, "reason": ["x"]},
        {**doc, "duration_ms": True},
    ):
        assert route.report_of(broken) is None, broken


def _answer(project: Project, **changes: Any) -> WriteAnswered:
    m = read_manifest(Path(project.index_dir))
    assert m is not None
    base = {"host": "h", "report": {"generation": m.generation}, "plan": m.plan_digest}
    return WriteAnswered(**{**base, "identity": m.identity, "elapsed_ms": 1.0, **changes})


def test_the_named_generation_must_be_the_one_found(project: Project) -> None:
    _report_doc(project)
    digest = load_plan(project).digest()
    index_dir = Path(project.index_dir)
    assert route._not_found(index_dir, digest, _answer(project)) is None
    why = route._not_found(index_dir, digest, _answer(project, identity="another"))
    assert why is not None and why.endswith("not found through this mount")
    why = route._not_found(index_dir, "x" * 64, _answer(project))
    assert why is not None and why.endswith("built under another plan")
    # A generation published on top of the named one is fine.
    named = _answer(project)
    (project.root / "okf" / "bundles" / "acme_retail" / "zz.md").write_text("# Z\n\nzz\n")
    assert indexer.update(project, load_plan(project)).published
    assert route._not_found(index_dir, digest, named) is None


def test_off_a_share_or_told_so_it_runs_here(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    routed = route.run(project, load_plan(project), "update")
    assert routed.share_host is None and routed.report.published
    assert not any("share" in n for n in routed.report.notes)  # nothing to say off a share
    monkeypatch.setenv(LOCAL_WRITES_ENV, "1")
    routed = route.run(project, load_plan(project), "rebuild")
    assert routed.share_host is None and routed.report.rebuilt
