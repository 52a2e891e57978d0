"""The first indexing inside `search` (and `update`/`rebuild`) shows progress
on stderr when stderr is a terminal, never under --json and never when
stderr is piped. The terminal is a real pseudo-terminal (`os.openpty`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import write_config

BAR = "\r"  # Progress redraws its one line with a carriage return (ctindex/indexing/transaction.py)


def run_with_tty_stderr(project: Path, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, what the terminal on stderr showed)."""
    main, child = os.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctindex", "-C", str(project), *args],
            stdout=subprocess.PIPE,
            stderr=child,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    finally:
        os.close(child)
    shown = bytearray()
    while True:  # read until the child closes the terminal (EIO on Linux)
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(main)
    return proc.returncode, out.decode(), shown.decode(errors="replace")


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    p = make_project("ga4")
    write_config(p, "okf/bundles/ga4", watch=False)  # no daemon: the search indexes itself
    return p


def test_first_search_shows_progress_on_a_terminal(project: Path) -> None:
    code, out, shown = run_with_tty_stderr(project, "search", "event")
    assert code == 0 and "matches" in out
    assert BAR in shown and ("reading" in shown or "indexing" in shown), shown


def test_first_search_shows_no_progress_under_json(project: Path) -> None:
    code, out, shown = run_with_tty_stderr(project, "--json", "search", "event")
    assert code == 0 and out.lstrip().startswith("{")
    assert BAR not in shown and "indexing" not in shown


def test_first_search_shows_no_progress_when_stderr_is_piped(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
    result = subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(project), "search", "event"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and BAR not in result.stderr


def test_later_searches_build_nothing_and_show_no_bar(project: Path) -> None:
    run_with_tty_stderr(project, "search", "event")
    code, _out, shown = run_with_tty_stderr(project, "search", "event")
    assert code == 0 and "indexing" not in shown
