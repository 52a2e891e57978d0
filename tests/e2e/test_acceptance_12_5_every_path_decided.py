"""Acceptance: every candidate path has an inspectable decision through
`why`, and the decisions agree with what the index actually holds."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

REASONS = {
    "included",
    "excluded",
    "hard-excluded",
    "outside-scope",
    "unsupported-provider",
    "unsupported-type",
    "too-large",
    "not-regular",
}


def _every_path(project: Path) -> list[str]:
    """Every entry below the project (folders, links, fifos, sockets included),
    without following symlinks, as project-relative keys."""
    keys: list[str] = []
    for folder, dirs, files in os.walk(project, followlinks=False):
        for name in dirs + files:
            keys.append(os.path.relpath(os.path.join(folder, name), project).replace(os.sep, "/"))
    return sorted(keys)


def test_acceptance_12_5_every_candidate_path_has_a_decision(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    project = bundles_project
    (project / ".ct").mkdir()
    (project / ".ct" / "index.jsonc").write_text('{"watch": false}')
    bundle = project / "okf" / "bundles" / "ga4"
    # Odd situations beside the real bundles.
    (bundle / "link.md").symlink_to(bundle / "datasets")
    os.mkfifo(bundle / "pipe.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(bundle / "sock.md"))
    (bundle / "big.md").write_bytes(b"# big\n" + b"x" * (2 * 1024 * 1024))
    (project / "node_modules").mkdir()
    (project / "node_modules" / "dep.md").write_text("# dep\n")
    (bundle / "cache.db").write_bytes(b"SQLite format 3\x00")
    (project / "loose.md").write_text("# not under any OKF root\n")
    os.mkdir(os.fsencode(bundle) + b"/odd-\xff-name")
    (Path(os.fsdecode(os.fsencode(bundle) + b"/odd-\xff-name")) / "doc.md").write_text("# odd\n")
    assert run_cli("-C", str(project), "update").code == 0
    paths = _every_path(project)

    result = run_cli("-C", str(project), "--json", "why", *paths)
    decisions = json.loads(result.out)["decisions"]
    assert [d["path"] for d in decisions] == paths
    assert {d["reason"] for d in decisions} <= REASONS
    assert all(d["reason"] == "included" or d["detail"] for d in decisions)
    by_reason: dict[str, set[str]] = {}
    for d in decisions:
        by_reason.setdefault(d["reason"], set()).add(d["path"])
    # The situations above each meet the rule that decides them.
    assert "okf/bundles/ga4/big.md" in by_reason["too-large"]
    assert {
        "okf/bundles/ga4/link.md",
        "okf/bundles/ga4/pipe.md",
        "okf/bundles/ga4/sock.md",
    } <= by_reason["not-regular"]
    assert {"node_modules/dep.md", "okf/bundles/ga4/cache.db"} <= by_reason["excluded"]
    assert "loose.md" in by_reason["outside-scope"]
    assert any(p.startswith(".ct/okf/") for p in by_reason["hard-excluded"])
    odd = os.fsdecode(b"okf/bundles/ga4/odd-\xff-name/doc.md")
    assert odd in by_reason["included"]

    # What `why` calls included is exactly what the index holds (less the
    # files the provider could not read: none here).
    listed = run_cli(
        "-C", str(project), "--json", "search", "--limit", "100000", "--", "-zzznotaword"
    )
    indexed = {hit["path"] for hit in json.loads(listed.out)["results"]}
    assert indexed == by_reason["included"]
