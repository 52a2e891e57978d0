"""Acceptance: at most one daemon holds a project's lock; 20 concurrent first
searches start exactly one; after SIGKILL a later search starts a replacement."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.daemon_support import CliProject, wait_for


def starts(cli_project: CliProject) -> int:
    return sum(" start " in line for line in cli_project.log_lines())


@pytest.mark.slow
def test_acceptance_12_8_concurrent_first_searches_start_one_daemon(
    cli_project: CliProject,
) -> None:
    command = [
        sys.executable,
        "-m",
        "ctindex",
        "-C",
        str(cli_project.root),
        "--json",
        "search",
        "margin",
        "--limit",
        "1000",
    ]
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(20)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    direct = cli_project.hits(cli_project.search("margin", direct=True))
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert cli_project.hits(json.loads(out)) == direct
    first = cli_project.wait_daemon()
    time.sleep(1.0)  # a second daemon, had one been launched, would be up by now
    assert cli_project.daemon_pids() == [first["pid"]]
    assert starts(cli_project) == 1

    os.kill(first["pid"], signal.SIGKILL)
    wait_for(lambda: first["pid"] not in cli_project.daemon_pids())
    fresh = cli_project.check("margin")
    assert fresh["mode"] == "fallback" and fresh["reason"] == "no daemon"
    second = cli_project.wait_daemon()
    assert second["pid"] != first["pid"] and second["instance"] != first["instance"]
    assert cli_project.check("margin")["mode"] == "watcher-clean"
    assert cli_project.daemon_pids() == [second["pid"]]
    assert starts(cli_project) == 2
