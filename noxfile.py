"""Developer sessions: `nox -s tests lint typecheck bench` (the first three by default)."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The README's test command in a fresh environment."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".", *session.posargs)


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".", "mypy>=1.10", "types-PyYAML", "types-psutil")
    session.run("mypy", *session.posargs)  # packages come from pyproject.toml


@nox.session
def bench(session: nox.Session) -> None:
    """Run every bench/bench_*.py and write docs/benchmarks.md."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "bench.run", *session.posargs)
