"""`ctindex init` says what to do next (ctindex/commands/init.py): outside
a project, that `--write` makes one; without scopes, how to add one; in a
project with bundles, nothing; -q and --json keep stdout/stderr clean."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult


def test_outside_a_project_init_names_the_next_step(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    got = run_cli("-C", str(tmp_path), "init")
    assert got.code == 0 and got.out.lstrip().startswith("//")
    lines = got.err.splitlines()
    assert "is no project yet" in lines[0] and "`ctindex init --write`" in lines[0]
    assert "no scopes" in lines[1] and "ctindex scopes add DIR" in lines[1]
    assert run_cli("-C", str(tmp_path), "-q", "init").err == ""
    doc = run_cli("-C", str(tmp_path), "--json", "init")
    assert json.loads(doc.out)["written"] is False


def test_in_a_project_with_bundles_init_says_nothing_more(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    got = run_cli("-C", str(bundles_project), "init")
    assert got.code == 0 and got.err == ""
