"""Acceptance: scope, timing and storage metrics are available in text and
JSON (`scopes`, `status`), JSON with raw counts, bytes and milliseconds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult


def test_acceptance_12_6_scope_timing_storage_metrics_in_text_and_json(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult]
) -> None:
    project = make_project("acme_retail", "ga4")
    (project / ".ct").mkdir()
    (project / ".ct" / "index.jsonc").write_text('{"watch": false}')
    assert run_cli("-C", str(project), "update").code == 0
    (project / "okf" / "bundles" / "ga4" / "tables" / "events_.md").unlink()
    assert run_cli("-C", str(project), "update").code == 0  # a tombstone

    scopes = json.loads(run_cli("-C", str(project), "--json", "scopes", "--effective").out)
    assert {s["root"] for s in scopes["scopes"]} == {"okf/bundles/acme_retail", "okf/bundles/ga4"}
    for scope in scopes["scopes"]:
        assert scope["provider"] == "okf-markdown" and scope["provider_version"] == 1
        assert scope["include"] == ["**/*.md"] and scope["origin"] == "derived"
    scopes_text = run_cli("-C", str(project), "scopes", "--effective").out
    assert "okf/bundles/acme_retail" in scopes_text and "max_file_bytes" in scopes_text

    status = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert status["generation"] == 2
    # 18 concept documents in the two bundles; one removed by a tombstone in
    # the same (single) segment: the segment is immutable.
    assert (status["documents"], status["segments"], status["tombstones"]) == (17, 1, 1)
    assert isinstance(status["source_bytes"], int) and status["source_bytes"] > 0
    assert isinstance(status["index_bytes"], int) and status["index_bytes"] > 0
    assert isinstance(status["runtime_bytes"], int)
    last = status["last_reconcile"]
    assert isinstance(last["duration_ms"], float | int) and last["entries_visited"] > 0
    watcher = status["watcher"]
    for key in (
        "lane",
        "memory_ceiling_bytes",
        "physical_memory_bytes",
        "spawn_failure",
        "last_heartbeat_unix_ms",
        "dirty_paths",
        "pending",
        "last_batch",
        "rss_bytes",
    ):
        assert key in watcher

    text = run_cli("-C", str(project), "status").out
    # Human units, without dropping the raw document and segment counts.
    assert f"{status['documents']} documents in {status['segments']} segment" in text
    assert f"{status['source_bytes']:,} bytes" in text
    assert "KiB" in text and "ms" in text and "entries visited" in text
