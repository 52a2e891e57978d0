"""Robustness, resource bounds (docs/reliability.md, "Resource bounds"):
A real daemon stays bounded. After 10,000 file events and
1,000 barriers its open descriptors and resident memory are stable (first
third vs last third of the run), and its CPU use returns to ~0 when idle.

The 1,000 searches are barrier requests sent straight over the socket (the
part of a search that touches the daemon): 1,000 CLI processes would take
minutes on two cores and measure Python start-up, not the daemon."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ctindex.client.daemon_requests import barrier
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from tests.daemon_support import CliProject

EVENTS = 10_000
BARRIERS = 1_000
ROUNDS = 30  # samples over the run


@pytest.fixture
def project(make_cli_project: Callable[..., CliProject]) -> CliProject:
    return make_cli_project(bundles=("ga4",))


def test_robust_resources_fds_rss_and_idle_cpu_are_bounded(project: CliProject) -> None:
    import psutil

    project.check("event")
    pid = project.wait_daemon()["pid"]
    proc = psutil.Process(pid)
    digest = load_plan(Project.at(project.root)).digest()
    churn = project.root / "ga4" / "churn"
    churn.mkdir()
    project.check("event")  # churn/ is watched from here on
    samples: list[tuple[int, int]] = []
    events = barriers = 0
    per_round_files = 40
    for r in range(ROUNDS):
        # Each round: create, rewrite and delete files (several events each).
        while events < EVENTS * (r + 1) // ROUNDS:
            for i in range(per_round_files):
                f = churn / f"r{r % 3}-{i}.md"
                f.write_text(f"# C {r} {i}\n\nchurnword round{r}\n")
                events += 2  # create/modify + close_write
                if i % 2:
                    f.unlink()
                    events += 1
        while barriers < BARRIERS * (r + 1) // ROUNDS:
            barrier(project.paths, digest, 10_000)
            barriers += 1
        samples.append((proc.num_fds(), proc.memory_info().rss))
    print(f"fds/rss samples: {samples}")
    third = ROUNDS // 3
    first, last = samples[:third], samples[-third:]
    fds_first, fds_last = max(s[0] for s in first), max(s[0] for s in last)
    rss_first, rss_last = max(s[1] for s in first), max(s[1] for s in last)
    # No descriptor leak: a handful more at most (a new watch per folder).
    assert fds_last <= fds_first + 8, samples
    # RSS: generous bound on growth (allocator noise, caches warming up).
    assert rss_last <= rss_first * 1.5 + (16 << 20), samples
    # The daemon's index agrees with the files after all this.
    assert project.check("churnword")["mode"] in ("watcher-clean", "fallback")
    # Idle: after the burst settles (debounce, deferred gc/malloc_trim), CPU
    # over a 2 s window is ~0 (heartbeat only).
    time.sleep(1.5)
    before = proc.cpu_times()
    time.sleep(2.0)
    after = proc.cpu_times()
    busy = (after.user - before.user) + (after.system - before.system)
    print(f"idle cpu over 2 s: {busy:.3f} s")
    assert busy < 0.2, busy  # seconds of CPU in 2 s of wall time
    assert proc.is_running() and proc.pid == project.wait_daemon()["pid"]
