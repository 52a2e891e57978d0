"""Acceptance: repeated indexed queries over an unchanged healthy scope
perform no full walk (real CLI processes, real daemon)."""

from __future__ import annotations

import json

import pytest

from tests.daemon_support import CliProject


@pytest.mark.needs("peercred")  # no walk is the daemon's promise
def test_acceptance_12_1_repeated_searches_do_no_full_walk(cli_project: CliProject) -> None:
    first = cli_project.check("margin")
    assert first["mode"] == "fallback" and first["reason"] == "no daemon"
    base = cli_project.wait_daemon()
    index_pass = json.loads(cli_project.cli("--json", "status").stdout)["last_reconcile"]
    for query in ("margin", "revenue", "gross margin", "session", "event*", "margin"):
        fresh = cli_project.check(query)
        assert fresh["mode"] == "watcher-clean", fresh
        assert fresh["reconcile_ms"] is None  # the search process walked nothing
        assert fresh["barrier_ms"] is not None
    after = cli_project.status()
    # Neither the daemon (full passes, entries visited, narrowed batches) ...
    assert after["reconciles"] == base["reconciles"] == 1
    assert after["entries_visited_total"] == base["entries_visited_total"]
    assert after["batches"] == base["batches"] == 0
    assert after["instance"] == base["instance"]
    # ... nor any other writer recorded a reconciliation pass.
    assert json.loads(cli_project.cli("--json", "status").stdout)["last_reconcile"] == index_pass
