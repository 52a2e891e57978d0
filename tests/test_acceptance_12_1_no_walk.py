"""Spec §12.1: repeated indexed queries over an unchanged healthy scope
perform no full walk (real CLI processes, real daemon)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_support import CliProject


@pytest.fixture
def project(tmp_path: Path) -> Iterator[CliProject]:
    p = CliProject(tmp_path / "proj")
    try:
        yield p
    finally:
        p.kill_daemons()


def test_acceptance_12_1_repeated_searches_do_no_full_walk(project: CliProject) -> None:
    first = project.check("margin")
    assert first["mode"] == "fallback" and first["reason"] == "no daemon"
    base = project.wait_daemon()
    index_pass = json.loads(project.cli("--json", "status").stdout)["last_reconcile"]
    for query in ("margin", "revenue", "gross margin", "session", "event*", "margin"):
        fresh = project.check(query)
        assert fresh["mode"] == "watcher-clean", fresh
        assert fresh["reconcile_ms"] is None  # the search process walked nothing
        assert fresh["barrier_ms"] is not None
    after = project.status()
    # Neither the daemon (full passes, entries visited, narrowed batches) ...
    assert after["reconciles"] == base["reconciles"] == 1
    assert after["entries_visited_total"] == base["entries_visited_total"]
    assert after["batches"] == base["batches"] == 0
    assert after["instance"] == base["instance"]
    # ... nor any other writer recorded a reconciliation pass.
    assert json.loads(project.cli("--json", "status").stdout)["last_reconcile"] == index_pass
