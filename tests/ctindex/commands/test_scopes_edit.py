"""`ctindex scopes add DIR` / `scopes remove DIR` (ctindex/commands/scopes_edit.py):
the store is created or edited keeping its comments, and every refusal is
one line with exit 2 that leaves the file as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


def _roots(project: Path) -> list[str]:
    return [s.root for s in load_plan(Project.at(project)).scopes]


def test_scopes_add_creates_the_store_with_the_scope(
    plain: Path, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "1")  # the search below starts no daemon (ctindex/query/cimode.py)
    result = run_cli("-C", str(plain), "scopes", "add", "notes")
    assert result.code == 0, result.err
    assert "added scope notes" in result.out
    assert _roots(plain) == ["notes"]
    text = (plain / ".ct" / "index.jsonc").read_text()
    assert text.startswith("// ") and "explicit scopes replace" in text.lower()
    found = run_cli("-C", str(plain), "search", "hello")
    assert found.code == 0 and "notes/hello.md" in found.out


def test_scopes_add_keeps_the_detected_roots(
    make_project: Callable[..., Path], run_cli: Cli
) -> None:
    project = make_project("ga4")
    (project / "notes").mkdir()
    before = _roots(project)
    assert run_cli("-C", str(project), "scopes", "add", "notes").code == 0
    assert _roots(project) == [*before, "notes"]


def test_scopes_add_then_remove_keeps_comments_and_layout(plain: Path, run_cli: Cli) -> None:
    (plain / "kb").mkdir()
    store = plain / ".ct" / "index.jsonc"
    store.parent.mkdir()
    original = (
        '// my project\n{\n  "version": 1, // one\n  "scopes": [\n'
        '    {"root": "kb", "provider": "okf-markdown"} // the kb\n  ],\n}\n'
    )
    store.write_text(original)
    assert run_cli("-C", str(plain), "scopes", "add", "notes").code == 0
    edited = store.read_text()
    assert "// my project" in edited and "// one" in edited and "// the kb" in edited
    assert _roots(plain) == ["kb", "notes"]
    removed = run_cli("-C", str(plain), "--json", "scopes", "remove", "notes")
    assert removed.code == 0 and json.loads(removed.out)["scopes"] == ["kb"]
    assert store.read_text() == original


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("add", "notes/hello.md"), "is not a folder"),
        (("add", "missing"), "does not exist"),
        (("add", "/"), "is outside the project"),
        (("add", "notes", "--provider", "pdf"), "unknown provider"),
        (("remove", "notes"), "not a scope"),
        (("add",), "DIR is required"),
        (("add", ".ct/okf"), "inside the index storage"),
        (("add", "linked"), "linked: is a symbolic link to notes (scopes never follow one"),
    ],
)
def test_scopes_add_refuses_with_one_line_and_exit_2(
    plain: Path, run_cli: Cli, args: tuple[str, ...], problem: str
) -> None:
    if ".ct/okf" in args:
        (plain / ".ct" / "okf").mkdir(parents=True)
    if "linked" in args:
        (plain / "linked").symlink_to("notes")
    result = run_cli("-C", str(plain), "scopes", *args)
    assert result.code == 2 and result.err.count("\n") == 1 and problem in result.err
    assert "Traceback" not in result.err and not (plain / ".ct" / "index.jsonc").exists()


def test_scopes_add_refuses_a_scope_twice(plain: Path, run_cli: Cli) -> None:
    assert run_cli("-C", str(plain), "scopes", "add", "notes").code == 0
    store = plain / ".ct" / "index.jsonc"
    before = store.read_bytes()
    again = run_cli("-C", str(plain), "scopes", "add", "./notes/")
    assert again.code == 2 and "already a scope" in again.err and again.err.count("\n") == 1
    assert store.read_bytes() == before


def test_scopes_add_inside_an_earlier_scope_says_it_decides_nothing(
    plain: Path, run_cli: Cli
) -> None:
    """The first scope containing a file decides it: a scope added inside
    one listed before it would index nothing, and the command says so."""
    (plain / "notes" / "deep").mkdir()
    (plain / "notes" / "deep" / "d.md").write_text("# D\n\ndeep\n")
    assert run_cli("-C", str(plain), "scopes", "add", "notes").code == 0
    inner = run_cli("-C", str(plain), "--json", "scopes", "add", "notes/deep")
    assert inner.code == 0, inner.err
    assert json.loads(inner.out)["shadowed_by"] == "notes"
    assert "notes/deep lies inside the scope notes, listed before it" in inner.err
    plan = load_plan(Project.at(plain))
    found = plan.find_scope("notes/deep/d.md")
    assert found is not None and found[0].root == "notes"  # what the note says
    # An outer scope added after an inner one shadows nothing: no note.
    (plain / ".ct" / "index.jsonc").unlink()
    assert run_cli("-C", str(plain), "scopes", "add", "notes/deep").code == 0
    outer = run_cli("-C", str(plain), "--json", "scopes", "add", "notes")
    assert outer.code == 0 and outer.err == "" and json.loads(outer.out)["shadowed_by"] is None


def test_scopes_edit_leaves_a_malformed_store_alone(plain: Path, run_cli: Cli) -> None:
    store = plain / ".ct" / "index.jsonc"
    store.parent.mkdir()
    store.write_text('{"scopes": [ // unfinished\n')
    result = run_cli("-C", str(plain), "scopes", "add", "notes")
    assert result.code == 2 and result.err.count("\n") == 1
    assert store.read_text() == '{"scopes": [ // unfinished\n'


def test_scopes_remove_of_a_detected_root_says_how(
    make_project: Callable[..., Path], run_cli: Cli
) -> None:
    project = make_project("ga4")
    result = run_cli("-C", str(project), "scopes", "remove", "okf/bundles/ga4")
    assert result.code == 2 and "detected OKF root" in result.err and "init --write" in result.err
