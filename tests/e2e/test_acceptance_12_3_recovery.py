"""Acceptance: killing the daemon, dropping events (overflow while it is
stopped) or deleting / corrupting runtime state still yields correct results
through reconciliation, and the output says so (fallback, or reconciled)."""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest

from tests.daemon_support import CliProject, wait_for


def started(cli_project: CliProject) -> int:
    cli_project.check("margin")
    pid: int = cli_project.wait_daemon()["pid"]
    return pid


def says_fallback_or_reconciled(fresh: dict) -> bool:
    return fresh["mode"] == "fallback" or (fresh["reason"] or "").startswith("reconciled")


def eventually_clean(cli_project: CliProject, query: str) -> None:
    """Later searches are served by a (possibly replacement) daemon again."""

    def clean() -> bool:
        return cli_project.check(query)["mode"] == "watcher-clean"

    wait_for(clean, timeout=30, step=0.3)


def test_acceptance_12_3_sigkill(cli_project: CliProject) -> None:
    pid = started(cli_project)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: pid not in cli_project.daemon_pids())
    doc = cli_project.root / "acme_retail" / "metrics" / "kiwi.md"
    doc.write_text("# Kiwi\n\nkiwiword\n")
    fresh = cli_project.check("kiwiword")
    assert fresh["mode"] == "fallback" and fresh["reason"] == "no daemon"
    direct = cli_project.search("kiwiword", direct=True)
    assert cli_project.hits(direct) == ["acme_retail/metrics/kiwi.md"]
    eventually_clean(cli_project, "kiwiword")


@pytest.mark.slow
def test_acceptance_12_3_overflow_while_stopped(cli_project: CliProject) -> None:
    pid = started(cli_project)
    metrics = cli_project.root / "acme_retail" / "metrics"
    bulk = cli_project.root / "acme_retail" / "bulk"
    bulk.mkdir()
    assert cli_project.check("margin")["mode"] == "watcher-clean"  # bulk/ is watched now
    os.kill(pid, signal.SIGSTOP)
    try:
        for i in range(20_000):  # more events than max_queued_events (16384)
            (bulk / f"f{i}.txt").write_bytes(b"")
        (bulk / "hidden.md").write_text("# Hidden\n\nlyrebirdword\n")
        (metrics / "revenue.md").write_text("# Revenue\n\ncassowaryword\n")
        (metrics / "gross-margin.md").unlink()
    finally:
        os.kill(pid, signal.SIGCONT)
    fresh = cli_project.check("lyrebirdword OR cassowaryword")
    assert says_fallback_or_reconciled(fresh), fresh
    assert cli_project.hits(cli_project.search("lyrebirdword OR cassowaryword")) == [
        "acme_retail/bulk/hidden.md",
        "acme_retail/metrics/revenue.md",
    ]
    assert cli_project.check("gross margin") is not None  # equal to --direct after the delete
    status = wait_for(lambda: (s := cli_project.status())["reconciles"] >= 2 and s)
    assert status["pid"] == pid  # the same daemon recovered by itself
    assert any(
        r in (status["last_reconcile"]["reason"] or "")
        for r in ("overflow", "heartbeat-gap", "cookie-timeout")
    )
    eventually_clean(cli_project, "lyrebirdword")


def test_acceptance_12_3_runtime_files_deleted(cli_project: CliProject) -> None:
    old = started(cli_project)
    shutil.rmtree(cli_project.paths.dir)
    (cli_project.root / "acme_retail" / "metrics" / "emu.md").write_text("# Emu\n\nemuword\n")
    fresh = cli_project.check("emuword")
    assert fresh["mode"] == "fallback", fresh
    # The old daemon notices its lock file is gone and steps aside.
    wait_for(lambda: old not in cli_project.daemon_pids())
    eventually_clean(cli_project, "emuword")
    assert len(cli_project.daemon_pids()) == 1


def test_acceptance_12_3_runtime_files_corrupted(cli_project: CliProject) -> None:
    started(cli_project)
    runtime = cli_project.paths.dir
    for path in sorted(runtime.rglob("*"), reverse=True):
        if path.is_symlink() or path.is_file() or path.is_socket():
            if not path.is_file():
                path.unlink()
            path.write_bytes(b"\x00garbage{\xff")
        elif path.is_dir():
            shutil.rmtree(path)
            path.write_bytes(b"\x00garbage{\xff")
    for name in ("spawn.failed", "spawn.claim", "status.json"):
        (runtime / name).write_bytes(b"\x00garbage{\xff")
    os.utime(runtime / "spawn.claim", (time.time() - 60, time.time() - 60))
    (cli_project.root / "acme_retail" / "metrics" / "rhea.md").write_text("# Rhea\n\nrheaword\n")
    # The answer must be right (check() compares it with --direct) whoever
    # gives it: the client, falling back past the garbage, or the daemon,
    # if its heartbeat already put its runtime files back (on a loaded
    # machine it may have: then its barrier proves the answer current).
    fresh = cli_project.check("rheaword")
    assert fresh["mode"] in ("fallback", "watcher-clean"), fresh
    assert cli_project.hits(cli_project.search("rheaword")) == ["acme_retail/metrics/rhea.md"]
    eventually_clean(cli_project, "rheaword")
    assert len(cli_project.daemon_pids()) == 1
