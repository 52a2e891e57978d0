"""The search fast path (ctindex/policy/plan_record.py): a healthy daemon's answer
without loading the plan, and every doubt sending the query down the slow
path with the same answer (real CLI processes, real daemon)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ctindex.indexing import transaction
from ctindex.policy import plan_record
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.search.execute import PlanMismatch, Vouched, search_index
from ctindex.search.query import parse_query
from tests.daemon_support import CliProject

PROBE = (
    "import json, sys\n"
    "from ctindex.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stderr.write(json.dumps({'plan_loaded': 'ctindex.policy.plan' in sys.modules}))\n"
    "raise SystemExit(code)\n"
)


@pytest.fixture
def project(cli_project: CliProject) -> CliProject:
    p = cli_project
    # Stats within the racy window are never recorded: age what the plan
    # depends on (the config, the folders root detection lists).
    for path in (p.root / ".ct" / "index.jsonc", p.root, *p.root.iterdir()):
        _age(path)
    return p


def _age(path: Path) -> None:
    """Make a file older than the racy window, so its stat can be trusted."""
    old = time.time() - 30
    os.utime(path, (old, old))


def probe(p: CliProject, query: str) -> tuple[dict[str, Any], bool]:
    """(search JSON, whether the process loaded the plan)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            "-C",
            str(p.root),
            "--json",
            "search",
            "--limit",
            "1000",
            query,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout), json.loads(done.stderr.splitlines()[-1])["plan_loaded"]


def record(p: CliProject) -> Path:
    return p.root / ".ct" / "okf" / "runtime" / plan_record.RECORD_NAME


@pytest.mark.needs("peercred")  # the fast path is the daemon's record
def test_fast_path_answers_without_the_plan_and_sees_changes(project: CliProject) -> None:
    p = project
    assert p.check("margin")["reason"] == "no daemon"
    p.wait_daemon()
    p.wait_plan_record()
    doc, loaded = probe(p, "margin")
    assert not loaded and doc["freshness"]["mode"] == "watcher-clean"
    assert p.hits(doc) == p.hits(p.search("margin", direct=True))
    target = next(f for f in (p.root / "ga4").rglob("*.md") if f.name != "index.md")
    with open(target, "a", encoding="utf-8") as fh:
        fh.write("\nzanzibarword\n")
    doc, loaded = probe(p, "zanzibarword")
    assert not loaded and [r["path"] for r in doc["results"]] == [
        target.relative_to(p.root).as_posix()
    ]


@pytest.mark.needs("peercred")  # the fast path is the daemon's record
def test_fields_and_their_errors_on_the_fast_path(project: CliProject) -> None:
    """A daemon-answered search knows the fields and refuses an unknown one
    with the same line (exit 2) as the slow path (docs/search.md, "Fields")."""
    p = project
    p.check("margin")
    p.wait_daemon()
    p.wait_plan_record()
    doc, loaded = probe(p, "title:event OR tags:ga4")
    assert not loaded and doc["freshness"]["mode"] == "watcher-clean" and doc["results"]
    direct = p.search("title:event OR tags:ga4", direct=True)
    assert [(r["path"], r["score"]) for r in doc["results"]] == [
        (r["path"], r["score"]) for r in direct["results"]
    ]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "-C", str(p.root), "search", "titel:event"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line, plan_loaded = done.stderr.splitlines()
    assert done.returncode == 2 and not json.loads(plan_loaded)["plan_loaded"]
    assert line.startswith("ctindex: query: unknown field 'titel' at column 1; did you mean")


def test_a_changed_config_takes_the_slow_path(project: CliProject) -> None:
    p = project
    p.check("margin")
    p.wait_daemon()
    p.wait_plan_record()
    cfg = json.loads((p.root / ".ct" / "index.jsonc").read_text())
    p.write_config({**cfg, "exclude": ["ga4/**"]})
    doc, loaded = probe(p, "event OR margin")
    assert loaded  # the recorded config stat no longer matches
    assert p.hits(doc) == p.hits(p.search("event OR margin", direct=True))
    assert not any(path.startswith("ga4/") for path in p.hits(doc))


def test_a_wrong_record_only_costs_the_slow_path(project: CliProject) -> None:
    p = project
    p.check("margin")
    p.wait_daemon()
    p.wait_plan_record()
    good = json.loads(record(p).read_text())
    record(p).write_text(json.dumps({**good, "digest": "0" * 64}))
    doc, loaded = probe(p, "margin")
    assert loaded and doc["freshness"]["mode"] == "watcher-clean"
    assert p.hits(doc) == p.hits(p.search("margin", direct=True))
    assert json.loads(record(p).read_text())["digest"] == good["digest"]  # rewritten
    record(p).write_text("{not json")
    doc, loaded = probe(p, "margin")
    assert loaded and p.hits(doc) == p.hits(p.search("margin", direct=True))


def test_search_refuses_a_generation_of_another_plan(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "index.md").write_text("# kb\n")
    (tmp_path / "kb" / "a.md").write_text("# A\n\nword\n")
    project = Project.at(tmp_path)
    plan = load_plan(project)
    report = transaction.update(project, plan)
    node = parse_query("word")
    vouched = Vouched(plan.digest(), report.generation, report.identity)
    got = search_index(project.index_dir, node, 10, expect=vouched)
    assert got.total == 1
    with pytest.raises(PlanMismatch):
        search_index(project.index_dir, node, 10, expect=vouched._replace(plan_digest="0" * 64))
    with pytest.raises(PlanMismatch):
        search_index(project.index_dir, node, 10, expect=vouched._replace(identity="0" * 32))


def test_the_code_stamp_finds_every_module_it_names() -> None:
    """The record is stamped with the modules that compute the plan digest;
    one missing (a module moved, ctindex/policy/) means no record is ever
    written and every search silently takes the slow path."""
    assert plan_record._code_stamp() is not None


def test_the_code_stamp_covers_the_policy_and_every_provider() -> None:
    """A module added to ctindex/policy/ or ctindex/providers/ can change what
    the plan decides; the record must be invalidated when its code changes.
    And every listed module must exist: one that does not makes every record
    fail to be written, silently (the fast path then never answers)."""
    package = Path(plan_record.__file__).parents[1]  # ctindex/, as _CODE is written
    found = {
        f"{folder}/{p.name}"
        for folder in ("policy", "providers")
        for p in (package / folder).glob("*.py")
    }
    assert found == set(plan_record._CODE)
    assert plan_record._code_stamp() is not None
