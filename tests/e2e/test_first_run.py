"""A newcomer's first run in a folder of plain Markdown (no OKF root): every
indexing command says why nothing is indexed and how to add a scope, nothing
is written under `.ct/` and no daemon starts; `why` explains that explicit
scopes replace root detection (docs/cli.md, "No scopes")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, _daemons_under
from tests.ctindex.test_schemas import check

Cli = Callable[..., CliResult]
NOTE = "no OKF root found under"
HINT = "ctindex scopes add DIR"


def _tree(root: Path) -> set[str]:
    """Every path under `root`: the oracle is a plain walk, nothing of ctindex."""
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(folder, name), root))
    return found


def _ctindex(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real `ctindex` process, with the daemon's lazy start allowed (no CI)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("search", "hello"), 1),  # not an error: exit as for no match
        (("update",), 0),
        (("rebuild",), 0),
        (("status",), 0),
        (("show", "hello"), 1),
    ],
)
def test_no_scopes_note_names_why_and_how(
    plain: Path, run_cli: Cli, args: tuple[str, ...], code: int
) -> None:
    result = run_cli("-C", str(plain), *args)
    assert result.code == code, result.err
    notes = [line for line in result.err.splitlines() if NOTE in line]
    assert len(notes) == 1, result.err
    assert "index.md" in notes[0] and "depth 0-3" in notes[0] and HINT in notes[0]
    assert 'docs/cli.md, "No scopes"' in notes[0]


def test_no_scopes_note_is_silenced_by_quiet(plain: Path, run_cli: Cli) -> None:
    assert NOTE not in run_cli("-C", str(plain), "-q", "search", "hello").err


@pytest.mark.parametrize(
    ("args", "schema"),
    [(("search", "hello"), "search"), (("status",), "status"), (("update",), "update")],
)
def test_no_scopes_is_a_json_field_not_stderr(
    plain: Path, run_cli: Cli, args: tuple[str, ...], schema: str
) -> None:
    result = run_cli("-C", str(plain), "--json", *args)
    doc = check(schema, result.out)
    assert NOTE in doc["no_scopes"]["message"] and doc["no_scopes"]["hint"] == HINT
    assert NOTE not in result.err


def test_show_without_scopes_is_a_json_error_with_the_field(plain: Path, run_cli: Cli) -> None:
    result = run_cli("-C", str(plain), "--json", "show", "hello")
    doc = check("error", result.out)
    assert result.code == 1 and doc["error"]["no_scopes"]["hint"] == HINT


def test_explicit_empty_scopes_say_detection_is_replaced(plain: Path, run_cli: Cli) -> None:
    (plain / ".ct").mkdir()
    (plain / ".ct" / "index.jsonc").write_text('{"version": 1, "scopes": []}')
    result = run_cli("-C", str(plain), "search", "hello")
    assert result.code == 1 and "explicit scopes replace root detection" in result.err


def test_nothing_to_index_writes_nothing_and_starts_no_daemon(plain: Path, tmp_path: Path) -> None:
    before = _tree(plain)
    for args in (
        ("search", "hello"),
        ("--json", "search", "hello"),
        ("status",),
        ("why", "notes/hello.md"),
        ("scopes",),
    ):
        result = _ctindex(plain, *args)
        assert "Traceback" not in result.stderr, result.stderr
        assert _tree(plain) == before, (args, _tree(plain) - before)
    daemons = _daemons_under(tmp_path)
    for proc in daemons:  # the old code started one: do not leave it running
        proc.kill()
    assert daemons == []


def test_search_answers_zero_of_zero_and_says_why(plain: Path) -> None:
    result = _ctindex(plain, "search", "hello")
    assert result.returncode == 1
    assert "0 of 0 matches" in result.stdout and "no scopes" in result.stdout
    assert NOTE in result.stderr


def test_why_says_explicit_scopes_replace_detection_and_names_the_root(
    plain: Path, run_cli: Cli
) -> None:
    assert run_cli("-C", str(plain), "scopes", "add", "notes").code == 0
    bundle = plain / "kb" / "later"  # a bundle added after the scopes were written
    bundle.mkdir(parents=True)
    (bundle / "index.md").write_text("# Later\n")
    (bundle / "page.md").write_text("# Page\n")
    text = run_cli("-C", str(plain), "why", "kb/later/page.md")
    assert text.code == 1
    assert "explicit scopes" in text.out and "replace OKF root detection" in text.out
    assert "kb/later" in text.out and "ctindex scopes add kb/later" in text.out
    result = run_cli("-C", str(plain), "--json", "why", "kb/later/page.md", "elsewhere.md")
    first, second = json.loads(result.out)["decisions"]
    assert first["reason"] == "outside-scope" and "replace OKF root detection" in first["detail"]
    assert first["hint"] == "ctindex scopes add kb/later"
    assert second["hint"] is None and second["detail"].endswith("does not exist")


def test_why_without_any_scope_points_at_scopes_add(plain: Path, run_cli: Cli) -> None:
    result = run_cli("-C", str(plain), "--json", "why", "notes/hello.md")
    (decision,) = json.loads(result.out)["decisions"]
    assert decision["reason"] == "outside-scope" and decision["hint"] == HINT


def test_scopes_without_any_scope_says_how_to_add_one(plain: Path, run_cli: Cli) -> None:
    result = run_cli("-C", str(plain), "scopes")
    assert result.code == 0 and "ctindex scopes add DIR" in result.out


def test_the_mcp_why_tool_gives_the_clis_document(plain: Path, run_cli: Cli) -> None:
    """The MCP `why` tool (ctindex/mcp_server.py why_answer) answers what
    `why --json` answers, hint included."""
    pytest.importorskip("mcp")
    from ctindex.api import Index
    from ctindex.mcp_server import why_answer

    assert run_cli("-C", str(plain), "scopes", "add", "notes").code == 0
    bundle = plain / "kb" / "later"
    bundle.mkdir(parents=True)
    (bundle / "index.md").write_text("# Later\n")
    (bundle / "page.md").write_text("# Page\n")
    cli = json.loads(run_cli("-C", str(plain), "--json", "why", "kb/later/page.md").out)
    with Index(plain) as index:
        tool = why_answer(index, "kb/later/page.md")
    assert tool == cli and tool["decisions"][0]["hint"] == "ctindex scopes add kb/later"
