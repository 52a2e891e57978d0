"""Developer sessions: `nox -s tests lint typecheck bench soak` (the first three by default)."""

from __future__ import annotations

import subprocess
import sys

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The README's test command in a fresh environment."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-n", "auto", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.17,<0.18")
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".", "mypy>=1.10", "types-PyYAML", "types-psutil")
    session.run("bash", ".ci/typecheck", "mypy", *session.posargs, external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """Run every bench/bench_*.py and write docs/benchmarks.md."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "bench.run", *session.posargs)


@nox.session
def soak(session: nox.Session) -> None:
    """The differential soak (tests/soak_harness.py) against the independent
    oracle: 3000 random file operations, a query batch every ~4, a few
    minutes; prints its seed. Replay: `nox -s soak -- --seed N`; a long run:
    `nox -s soak -- --ops 100000 --check-every 50 --direct-every 8`
    (docs/reliability.md)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "tests.soak_harness", "--ops", "3000", *session.posargs)


@nox.session(name="share-soak")
def share_soak(session: nox.Session) -> None:
    """The share's soak (tests/e2e/test_netshare_soak.py) at length: 5,000
    random steps on the sshfs rig (host and client edits, the host's daemon
    stopped, killed and restarted, clients of two versions), every
    watcher-clean answer checked against the oracle. Needs root, FUSE,
    sshfs and sshd, as the suite's share tests do; about 45 minutes.
    Another length or seed: CTINDEX_SHARE_SOAK_OPS, CTINDEX_SHARE_SOAK_SEED."""
    session.install("-e", ".[test]")
    session.env.setdefault("CTINDEX_SHARE_SOAK_OPS", "5000")
    session.env.setdefault("CTINDEX_RIG_LIFETIME_S", "7200")  # the rig's own bound
    session.run(
        "python", "-m", "pytest", "-q", "-s", "tests/e2e/test_netshare_soak.py", *session.posargs
    )


@nox.session
def relevance(session: nox.Session) -> None:
    """Known-item relevance, ctindex vs SQLite FTS5 bm25() vs Tantivy
    (bench/relevance.py): installs its larger corpus with npm at run time and
    rewrites the relevance section of docs/benchmarks.md."""
    session.install("-e", ".[dev]")
    session.run(
        "python", "-m", "bench.relevance", "--write", "docs/benchmarks.md", *session.posargs
    )


@nox.session(name="search-speed")
def search_speed(session: nox.Session) -> None:
    """Query cost, Index.search vs FTS5 vs Tantivy in process and a process
    per query vs an FTS5 script (bench/search_speed.py): rewrites its section
    of docs/benchmarks.md."""
    session.install("-e", ".[dev]")
    session.run(
        "python", "-m", "bench.search_speed", "--write", "docs/benchmarks.md", *session.posargs
    )


@nox.session
def scale(session: nox.Session) -> None:
    """ctindex beside SQLite FTS5 at scale (bench/scale.py): the tldr pages
    copied K times. `nox -s scale -- --tldr PAGES.tar.gz [--copies 4]`."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "bench.scale", *session.posargs)


@nox.session
def stress(session: nox.Session) -> None:
    """The suite three times in a row while two CPUs are kept busy, as on a
    loaded machine: a test that guesses how long something takes, rather
    than waiting for it to happen, fails here. Takes a while."""
    session.install("-e", ".[test]")
    # Two busy loops, children of this process (any Python spins as well).
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for _ in range(3):  # a failing run fails the session (and ends it)
            session.run("python", "-m", "pytest", "-q", "-n", "auto", *session.posargs)
    finally:  # the loops never outlive the session
        for proc in busy:
            proc.kill()
            proc.wait()
