"""`ctindex help CMD` and shell completion (ctindex/cli.py, argcomplete):
help needs no project and prints what `CMD --help` prints; each shell's
script is argcomplete's; a Tab asks the real console entry (the fast path
included) and gets commands, options and choices back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctindex.cli import SHELLS


def _ctindex(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_help_of_a_command_is_its_help_and_needs_no_project(tmp_path: Path) -> None:
    helped = _ctindex("help", "search", cwd=tmp_path)
    direct = _ctindex("search", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and helped.stdout == direct.stdout and "--limit" in helped.stdout
    overall = _ctindex("help", cwd=tmp_path)
    assert overall.returncode == 0 and "completion" in overall.stdout and "search" in overall.stdout
    wrong = _ctindex("help", "serch", cwd=tmp_path)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) <= 2


@pytest.mark.parametrize("shell", SHELLS)
def test_each_shell_gets_argcomplete_s_script(tmp_path: Path, shell: str) -> None:
    done = _ctindex("completion", shell, cwd=tmp_path)
    assert done.returncode == 0 and "ctindex" in done.stdout and "_ARGCOMPLETE" in done.stdout


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ctindex sea", {"search"}),
        ("ctindex search --li", {"--limit"}),
        ("ctindex watch s", {"status", "start", "stop"}),
        ("ctindex completion ", set(SHELLS)),
        ("ctindex --col", {"--color"}),
    ],
)
def test_a_tab_is_answered_by_the_console_entry(
    tmp_path: Path, line: str, expected: set[str]
) -> None:
    out = tmp_path / "completions"
    env = {
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
    }
    done = subprocess.run(
        [sys.executable, "-c", "from ctindex.fast_entry import console; console()"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    got = {w.strip() for w in out.read_text().split("\n") if w.strip()}
    # After a space every option is offered too; after a prefix, just what fits.
    assert expected <= got if line.endswith(" ") else got == expected, got
