"""CI mode (ctindex/query/cimode.py): with `CI` set, a search starts no daemon
unless `CTINDEX_WATCH=1` forces it; the answer is still fresh (reconciled)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import oracle
from tests.conftest import _daemons_under
from tests.daemon_support import CliProject

MARK = "zqxv7marker"


def _search(root: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctindex",
            "-C",
            str(root),
            "--json",
            "search",
            "--limit",
            "100",
            MARK,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


@pytest.mark.needs("peercred")  # "CI: no daemon started" presumes one could be
def test_ci_true_leaves_no_daemon_process(make_cli_project: Callable[..., CliProject]) -> None:
    project = make_cli_project(config={"watch": True})
    target = next(p for p in (project.root / "ga4").rglob("*.md") if p.name != "index.md")
    env = {k: v for k, v in os.environ.items() if k != "CTINDEX_WATCH"}
    env["CI"] = "true"
    for n in range(3):
        target.write_text(f"{MARK} edit {n}\n" + target.read_text())
        doc = _search(project.root, env)
        # The spawn (Popen) would have returned before the search exits: a
        # daemon started by it would be in the process table by now.
        assert _daemons_under(project.root) == []
        assert doc["freshness"]["mode"] == "fallback"
        assert doc["freshness"]["reason"].startswith("CI: no daemon started")
        expected = oracle.containing(project.root, MARK)
        assert expected and {r["path"] for r in doc["results"]} == expected
    assert not project.paths.claim.exists()

    # `CTINDEX_WATCH=1` forces the lazy start in CI (and shows the check above
    # would have seen a daemon).
    _search(project.root, {**env, "CTINDEX_WATCH": "1"})
    assert len(_daemons_under(project.root)) == 1
    # A running daemon is used in CI too.
    project.wait_daemon()
    doc = _search(project.root, env)
    assert doc["freshness"]["mode"] == "watcher-clean"
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARK)
