"""A stdout that cannot be written (`> /dev/full`) ends every command with
exit 74 and one line on stderr, with `--json` as in text, in process and
when the daemon answers (docs/cli.md, "Exit codes")."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.client.daemon_requests import request
from tests.conftest import write_config
from tests.daemon_support import CliProject, require_daemon, wait_for

Make = Callable[..., CliProject]
HANG_GUARD_S = 120  # a hang, not a speed limit
FULL_LINE = "ctindex: cannot write the output: No space left on device"

COMMANDS = (
    ("init",),
    ("scopes",),
    ("scopes", "--effective"),
    ("why", "docs/a.md"),
    ("status",),
    ("update",),
    ("rebuild",),
    ("verify",),
    ("search", "zqxv7marker"),
    ("search", "--direct", "zqxv7marker"),
    ("show", "a"),
    ("watch", "status"),
)
# Errors whose text form writes nothing to stdout: that form keeps their own
# exit code; `--json` writes their error document, and losing it is exit 74.
ERRORS = {("search", '"unterminated'): 2, ("show", "zqxv7absent"): 1}


def _into_full(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-m", "ctindex", *args],
            cwd=cwd,
            stdout=full.fileno(),
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=HANG_GUARD_S,
            check=False,
        )


@pytest.mark.parametrize("watch", [False, True], ids=["no-daemon", "daemon"])
@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
@pytest.mark.slow
def test_every_command_into_a_full_stdout_exits_74_with_one_line(
    tmp_path: Path, json_flag: tuple[str, ...], watch: bool
) -> None:
    if watch:
        require_daemon()
    project = tmp_path / "p"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "a.md").write_text("# A\n\nzqxv7marker here\n")
    (project / "docs" / "index.md").write_text("# Docs\n")
    write_config(project, "docs", watch=watch)
    try:
        for command in COMMANDS:
            got = _into_full("-C", str(project), *json_flag, *command)
            assert got.returncode == 74, (command, got.returncode, got.stderr)
            assert got.stderr.splitlines() == [FULL_LINE], (command, got.stderr)
        for command, code in ERRORS.items():
            got = _into_full("-C", str(project), *json_flag, *command)
            assert got.returncode == (74 if json_flag else code), (command, got.stderr)
            # The error's own line, once; no second line for the lost document.
            lines = got.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("ctindex: "), (command, got.stderr)
            assert "Traceback" not in got.stderr and lines[0] != FULL_LINE, (command, got.stderr)
    finally:
        subprocess.run(
            [sys.executable, "-m", "ctindex", "-C", str(project), "watch", "stop"],
            capture_output=True,
            timeout=HANG_GUARD_S,
            check=False,
        )


def test_a_daemon_answered_json_search_into_a_full_stdout(make_cli_project: Make) -> None:
    """The fast path (ctindex/fast_entry.py) prints the daemon's answer itself."""
    project = make_cli_project()
    project.cli("search", "margin")  # starts the daemon
    project.wait_daemon()

    def answered() -> subprocess.CompletedProcess[str] | None:
        before = request(project.paths, {"op": "status"}, 2.0)["status"]["queries"]
        got = _into_full("--json", "search", "margin", cwd=project.root)
        after = request(project.paths, {"op": "status"}, 2.0)["status"]["queries"]
        return got if after["answered"] == before["answered"] + 1 else None

    got = wait_for(answered, HANG_GUARD_S, 0.1)
    assert got.returncode == 74, got.stderr
    assert got.stderr.splitlines() == [FULL_LINE], got.stderr
