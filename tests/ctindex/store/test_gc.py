"""Retired generations are collected by every writing command (store/gc.py);
`status` splits live/retired bytes, keeps the last full reconciliation apart
from the last narrowed pass, exits non-zero on a reported problem, and shows
what it can with a malformed configuration."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, write_config


def _manifest(project: Path) -> dict:
    data = (project / ".ct" / "okf" / "MANIFEST").read_bytes()
    return json.loads(data.rstrip(b"\n").rpartition(b"\n")[0])


def _store_files(project: Path) -> set[str]:
    return {
        p.name
        for p in (project / ".ct" / "okf").iterdir()
        if p.name.startswith(("seg-", "del-", "files-", "diag-"))
    }


def _referenced(m: dict) -> set[str]:
    names = {s["name"] for s in m["segments"]} | {s["dels"] for s in m["segments"] if s["dels"]}
    return names | {n for n in (m["files"], m["diag"]) if n}


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    p = make_project("ga4", "acme_retail")
    write_config(p, "okf/bundles/ga4", "okf/bundles/acme_retail", watch=False)
    return p


def test_seven_rebuilds_leave_one_live_generation_plus_the_grace_window(
    project: Path, run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctindex.store import gc
    from ctindex.store.writer import GRACE_NS

    for _ in range(7):
        assert run_cli("-C", str(project), "-q", "rebuild").code == 0
    m = _manifest(project)
    live = _referenced(m)
    now = time.time_ns()
    within_grace = {name for name, at in m["retired"] if now - at < GRACE_NS}
    # Everything on disk is the live generation or retired within the grace
    # period (a reader of an older MANIFEST may still be opening it).
    assert _store_files(project) <= live | within_grace
    status = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert status["index_retired_bytes"] > 0
    assert status["index_bytes"] == status["index_live_bytes"] + status["index_retired_bytes"]

    # Once the grace period has passed, a writing command that changes
    # nothing still collects them.
    monkeypatch.setattr(gc, "clock_ns", lambda: time.time_ns() + GRACE_NS + 1)
    r = run_cli("-C", str(project), "update")
    assert r.code == 0 and r.out.startswith("up to date"), r.out
    assert _store_files(project) == live
    status = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert status["index_retired_bytes"] == 0
    text = run_cli("-C", str(project), "status").out
    assert "retired 0 B awaiting collection" in text


def test_status_keeps_the_last_full_reconciliation_apart_from_narrowed_passes(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    from ctindex.indexing import transaction
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    assert run_cli("-C", str(project), "update").code == 0
    p = Project.at(project)
    target = next(
        f for f in (project / "okf" / "bundles" / "ga4").rglob("*.md") if f.name != "index.md"
    )
    target.write_text(target.read_text() + "\nmore\n")
    transaction.update_paths(p, load_plan(p), [target.relative_to(project).as_posix()])
    status = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert status["last_reconcile"]["kind"] == "narrowed"
    assert status["last_full_reconcile"]["kind"] == "rebuild"  # the first update built it
    assert status["last_full_reconcile"]["at_unix_ms"] <= status["last_reconcile"]["at_unix_ms"]
    assert run_cli("-C", str(project), "update").code == 0
    transaction.update_paths(p, load_plan(p), [target.relative_to(project).as_posix()])
    status = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert (status["last_reconcile"]["kind"], status["last_full_reconcile"]["kind"]) == (
        "narrowed",
        "full",
    )
    text = run_cli("-C", str(project), "status").out
    assert "last reconciliation: narrowed" in text and "last full reconciliation: full" in text


def test_status_exit_code_reflects_a_reported_problem(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    assert run_cli("-C", str(project), "status").code == 0  # no index yet: not a problem
    assert run_cli("-C", str(project), "-q", "update").code == 0
    assert run_cli("-C", str(project), "status").code == 0
    seg = project / ".ct" / "okf" / _manifest(project)["segments"][0]["name"]
    with open(seg, "r+b") as fh:  # the header: the cheap check sees it
        fh.write(b"XXXX")
    r = run_cli("-C", str(project), "status")
    assert r.code == 1 and r.out.startswith("problem: ")
    doc = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert doc["problem"] and doc["exit_code"] == 1


def test_status_with_a_malformed_config_shows_what_it_can(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    assert run_cli("-C", str(project), "-q", "update").code == 0
    config = project / ".ct" / "index.jsonc"
    config.write_text('{"version": 1, "watch": "yes"}')
    r = run_cli("-C", str(project), "--json", "status")
    assert r.code == 2
    doc = json.loads(r.out)
    assert "watch" in doc["config_error"] and str(config) in doc["config_error"]
    assert doc["documents"] > 0 and doc["segments"] == 1 and doc["index_live_bytes"] > 0
    assert doc["stale"] is None and "policy metrics unavailable" in doc["problem"]
    assert doc["watcher"]["lane"] == "unavailable"
    text = run_cli("-C", str(project), "status")
    assert text.code == 2 and "documents in 1 segment" in text.out
    assert text.out.startswith("problem: ") and "watch" in text.out.splitlines()[0]
