"""Acceptance: an unwritable runtime folder produces no daemon spawn, and no
repeated spawn attempt: the failure is cached where possible (here in the
per-user fallback folder, since the runtime folder itself is unusable)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon_support import CliProject


def assert_no_spawn_and_no_retry(cli_project: CliProject) -> None:
    first = cli_project.check("margin")
    assert first["mode"] == "fallback"
    assert first["reason"].startswith("spawn failed"), first
    assert cli_project.daemon_pids() == []
    paths = cli_project.paths
    cache = paths.failed if paths.failed.exists() else paths.fallback_failed
    recorded = cache.stat().st_mtime_ns
    second = cli_project.check("margin")  # right after: no second attempt
    assert second["mode"] == "fallback" and second["reason"] == "spawn failure cached"
    assert cache.stat().st_mtime_ns == recorded
    assert not cli_project.paths.claim.exists()
    assert cli_project.daemon_pids() == []
    status = cli_project.status()
    assert status["lane"] == "unavailable" and status["spawn_failure"] is not None


@pytest.mark.needs("peercred")  # asserts the spawn's own failure
def test_acceptance_12_7_runtime_folder_cannot_be_created(cli_project: CliProject) -> None:
    # Root ignores permission bits, so make creation itself fail: a regular
    # file where the runtime folder belongs (mkdir fails for every user).
    cli_project.paths.dir.parent.mkdir(parents=True)
    cli_project.paths.dir.write_text("")
    assert_no_spawn_and_no_retry(cli_project)


@pytest.mark.skipif(os.geteuid() == 0, reason="permission bits do not stop root")
def test_acceptance_12_7_read_only_runtime_folder(cli_project: CliProject) -> None:
    cli_project.paths.dir.mkdir(parents=True, mode=0o700)
    cli_project.paths.dir.chmod(0o500)
    try:
        assert_no_spawn_and_no_retry(cli_project)
    finally:
        cli_project.paths.dir.chmod(0o700)


def _can_mount_read_only(probe: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe.mkdir()
    script = f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.needs("peercred")  # asserts the spawn's own failure
def test_acceptance_12_7_read_only_mount(cli_project: CliProject, tmp_path: Path) -> None:
    """As root: a real read-only (EROFS) runtime folder through a bind mount in
    a private mount namespace; both searches run inside it."""
    if not _can_mount_read_only(tmp_path / "probe"):
        pytest.skip("needs root and `unshare -m` to bind-mount a read-only folder")
    runtime = cli_project.paths.dir
    runtime.mkdir(parents=True, mode=0o700)
    search = [
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
    cmd = " ".join(shlex.quote(a) for a in search)
    outs = [tmp_path / "first.json", tmp_path / "second.json"]
    script = (
        f"mount --bind {runtime} {runtime} && mount -o remount,bind,ro {runtime} && "
        f"{cmd} > {outs[0]} && {cmd} > {outs[1]}"
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # What the two searches left in the read-only folder, read before the
    # --direct search below: that one runs outside the namespace, where the
    # folder is writable and it may cache roots.json (docs/decisions/policy.md).
    left = os.listdir(runtime)
    first, second = (json.loads(o.read_text()) for o in outs)
    direct = cli_project.hits(cli_project.search("margin", direct=True))
    assert cli_project.hits(first) == cli_project.hits(second) == direct
    assert first["freshness"]["reason"].startswith("spawn failed")
    assert "Read-only file system" in first["freshness"]["reason"]
    assert second["freshness"]["reason"] == "spawn failure cached"
    assert cli_project.paths.fallback_failed.exists()  # cached outside the read-only folder
    assert cli_project.daemon_pids() == []
    assert left == []
