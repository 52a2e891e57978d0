"""The daemon's query worker (ctindex/daemon/query.py) answers with the CLI's
`search` it is handed by whoever starts it, and imports no part of the CLI
itself (the CLI is a layer above the daemon: docs/architecture.md)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctindex.daemon.query import DaemonAnswer, Declined, Job, QueryService, SearchCommand


def _job(argv: list[str], cwd: Path) -> Job:
    return Job(None, argv, str(cwd), "digest", 1, "identity", 0.0, float("inf"))  # type: ignore[arg-type]


def test_the_daemon_imports_no_part_of_the_cli() -> None:
    code = (
        "import sys\n"
        "import ctindex.daemon.lifecycle, ctindex.daemon.query, ctindex.daemon.search_op\n"
        "bad = [m for m in sys.modules if m in ('ctindex.cli', 'ctindex.api')"
        " or m.startswith('ctindex.commands')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_without_a_search_command_every_search_is_declined(tmp_path: Path) -> None:
    service = QueryService(tmp_path, tmp_path / "index", lambda: None)
    with pytest.raises(Declined, match="no search command"):
        service._search(_job(["search", "x"], tmp_path))


def test_the_handed_command_parses_and_runs_the_words(tmp_path: Path) -> None:
    ran: list[tuple[list[str], str]] = []

    def parse(argv: list[str]) -> argparse.Namespace:
        if argv[0] != "search":
            raise SystemExit(2)
        return argparse.Namespace(command="search", direct="--direct" in argv, version=False)

    def run(argv: list[str], out: object, err: object, cwd: str, answer: DaemonAnswer) -> int:
        ran.append((argv, cwd))
        out.write("answered\n")  # type: ignore[attr-defined]
        return 3

    def data(project: object, answer: object) -> Any:
        raise AssertionError("no answer was made: no data")

    command = SearchCommand(parse, run, data)
    service = QueryService(tmp_path, tmp_path / "index", lambda: None, command)
    assert service._search(_job(["search", "x"], tmp_path)) == ("answered\n", "", 3)
    assert ran == [(["search", "x"], str(tmp_path))]
    with pytest.raises(Declined, match="usage"):
        service._search(_job(["bogus"], tmp_path))
    with pytest.raises(Declined, match="not an indexed search"):
        service._search(_job(["search", "--direct", "x"], tmp_path))
