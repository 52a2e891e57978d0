"""`ctindex watch`: systemctl's exit codes for `status`, a malformed
configuration, and the refusal to start a daemon under CI (docs/cli.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, write_config
from tests.daemon_support import CliProject

BROKEN = "{version: 1, wach: true}"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "index.md").write_text("# Docs\n")
    write_config(project, "docs", watch=True)
    return project


def test_status_without_a_daemon_exits_3(docs: Path, run_cli: Callable[..., CliResult]) -> None:
    text = run_cli("-C", str(docs), "watch", "status")
    assert text.code == 3 and text.err == "" and "not running" in text.out
    doc = run_cli("-C", str(docs), "--json", "watch", "status")
    assert doc.code == 3 and json.loads(doc.out)["running"] is False


def test_status_on_a_broken_config_shows_the_daemon_and_exits_2(
    docs: Path, run_cli: Callable[..., CliResult]
) -> None:
    (docs / ".ct" / "index.jsonc").write_text(BROKEN)
    text = run_cli("-C", str(docs), "watch", "status")
    assert text.code == 2 and "not running" in text.out
    assert text.err.count("\n") == 1
    assert "wach: unknown key; did you mean 'watch'?" in text.err
    assert text.err.endswith("(the daemon's state above does not depend on it)\n")
    doc = run_cli("-C", str(docs), "--json", "watch", "status")
    assert doc.code == 2 and json.loads(doc.out)["running"] is False


def test_stop_never_reads_the_config(docs: Path, run_cli: Callable[..., CliResult]) -> None:
    (docs / ".ct" / "index.jsonc").write_text(BROKEN)
    assert run_cli("-C", str(docs), "watch", "stop") == CliResult(0, "daemon not running\n", "")


def test_start_under_ci_refuses_with_one_line(
    docs: Path, run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    refused = run_cli("-C", str(docs), "watch", "start")
    assert refused == CliResult(
        2,
        "",
        "ctindex: watch start: CI is set and a daemon would outlive the job; "
        "pass --force (or set CTINDEX_WATCH=1) to start one anyway\n",
    )
    assert not (docs / ".ct" / "okf").exists()  # nothing was started or written
    # --force passes the refusal: with `watch: false` the start is declined
    # for that reason instead (exit 1), still without a daemon.
    write_config(docs, "docs", watch=False)
    forced = run_cli("-C", str(docs), "watch", "start", "--force")
    assert forced.code == 1 and "watch: false" in forced.out


@pytest.mark.needs("peercred")
def test_status_exits_0_while_a_daemon_runs_and_3_after_stop(
    make_cli_project: Callable[..., CliProject],
) -> None:
    project = make_cli_project(config={"watch": True})
    assert project.cli("watch", "start").returncode == 0
    project.wait_daemon()
    assert project.cli("watch", "status").returncode == 0
    assert project.cli("watch", "stop").returncode == 0
    status = subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(project.root), "watch", "status"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert status.returncode == 3, status
