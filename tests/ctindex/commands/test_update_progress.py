"""`update` / `rebuild` show their progress bar on a terminal, but not under
--json: the JSON reader gets one document, the terminal no redraws."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.ctindex.commands.test_search_progress import BAR, run_with_tty_stderr


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    p = make_project("ga4")
    write_config(p, "okf/bundles/ga4", watch=False)
    return p


@pytest.mark.parametrize("command", ["update", "rebuild"])
def test_progress_on_a_terminal_but_not_under_json(project: Path, command: str) -> None:
    code, _out, shown = run_with_tty_stderr(project, command)
    assert code == 0 and BAR in shown
    code, out, shown = run_with_tty_stderr(project, "--json", "rebuild")
    assert code == 0 and out.lstrip().startswith("{") and BAR not in shown
