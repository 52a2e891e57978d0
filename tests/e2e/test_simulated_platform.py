"""The CLI with Linux-only primitives hidden (docs/decisions/portability.md):
no traceback, a daemon only where its peers can be authenticated, and the
same answers as the direct walk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctindex.ipc.spawn_failure import spawn_failure
from ctindex.reconciler import platform_features
from tests.daemon_support import CliProject

# Removes SO_PEERCRED from the socket modules before ctindex runs: what a
# macOS interpreter looks like to feature detection (works on old code too,
# which reads no CTINDEX_SIMULATE).
HIDE_PEERCRED = (
    "import _socket, socket\n"
    "for m in (_socket, socket):\n"
    "    if hasattr(m, 'SO_PEERCRED'):\n"
    "        delattr(m, 'SO_PEERCRED')\n"
)


def _env(tmp_path: Path, simulate: str | None, hide_peercred: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != platform_features.SIMULATE_ENV}
    if simulate:
        env[platform_features.SIMULATE_ENV] = simulate
    if hide_peercred:
        site = tmp_path / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(HIDE_PEERCRED)
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return env


def _search(
    project: CliProject, env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ctindex",
            "-C",
            str(project.root),
            "--json",
            "search",
            "margin",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.mark.parametrize("how", ["switch", "hidden-attribute"])
def test_without_so_peercred_search_falls_back_with_a_reason_and_no_daemon(
    cli_project: CliProject, tmp_path: Path, how: str
) -> None:
    env = (
        _env(tmp_path, "no-peercred")
        if how == "switch"
        else _env(tmp_path, None, hide_peercred=True)
    )
    for _ in range(2):  # the second search would meet the daemon the first one spawned
        done = _search(cli_project, env)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        doc = json.loads(done.stdout)
        assert doc["freshness"]["mode"] == "fallback"
        assert doc["freshness"]["reason"].startswith("daemon disabled: no peer credential check")
    direct = json.loads(_search(cli_project, env, "--direct").stdout)
    assert cli_project.hits(doc) == cli_project.hits(direct)
    assert cli_project.daemon_pids() == []


def test_a_daemon_that_cannot_authenticate_peers_refuses_in_one_line(
    cli_project: CliProject, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctindex.daemon", "--project", str(cli_project.root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_env(tmp_path, "no-peercred"),
    )
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        "ctindex daemon: daemon disabled: no peer credential check on this platform"
        " (SO_PEERCRED, getpeereid)"
    ]
    failure = spawn_failure(cli_project.paths)
    assert failure is not None and "no peer credential check" in str(failure.get("error"))


def test_without_dir_fd_the_index_answers_like_the_direct_walk(
    cli_project: CliProject, tmp_path: Path
) -> None:
    env = _env(tmp_path, "no-dir-fd,no-peercred,no-mountinfo,no-prctl,no-sighup,no-getuid")
    first = _search(cli_project, env)
    assert first.returncode == 0, first.stderr
    (cli_project.root / "acme_retail" / "fresh-margin.md").write_text(
        "---\nid: fresh-margin\ntitle: Fresh margin\n---\nmargin margin\n"
    )
    again = _search(cli_project, env)
    direct = _search(cli_project, env, "--direct")
    assert again.returncode == direct.returncode == 0, again.stderr + direct.stderr
    assert "Traceback" not in again.stderr + direct.stderr
    hits = cli_project.hits(json.loads(again.stdout))
    assert hits == cli_project.hits(json.loads(direct.stdout))
    assert "acme_retail/fresh-margin.md" in hits
