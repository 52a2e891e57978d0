"""Which project a command works on (docs/cli.md "Project").

The project is the nearest folder at or above the starting folder holding
`.ct/` or `.git`; `-C DIR` only changes the starting folder (like `git -C`).
Outside any project, commands that would write `.ct/okf/` or start a daemon
refuse with exit 2 and one line; read-only ones still describe the folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests import oracle
from tests.conftest import CliResult, write_config

MARKER = "zqxv7marker"
NOT_A_PROJECT = "no ctindex project at or above"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_search_outside_any_project_refuses_and_writes_nothing(tmp_path: Path) -> None:
    loose = tmp_path / "loose" / "notes"
    loose.mkdir(parents=True)
    (loose / "index.md").write_text("# Notes\n")
    (loose / "a.md").write_text(f"# A\n\n{MARKER}\n")
    for args in (("search", MARKER), ("update",), ("rebuild",), ("watch", "start")):
        done = _cli(*args, cwd=loose)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and NOT_A_PROJECT in lines[0], lines
        assert "Traceback" not in done.stderr and done.stdout == ""
        assert "ctindex init --write" in lines[0] and "-C" in lines[0]
    # Nothing was created anywhere: no .ct/, no daemon runtime folder.
    assert not any(p.name == ".ct" for p in tmp_path.rglob("*"))
    # -C into the same non-project folder resolves the same way.
    done = _cli("-C", str(loose), "search", MARKER, cwd=tmp_path)
    assert done.returncode == 2 and NOT_A_PROJECT in done.stderr
    # -C named the folder already: the hint is `init` there, not "pass -C".
    assert f"ctindex -C {loose} init --write" in done.stderr
    assert "pass -C" not in done.stderr
    # Read-only answers still work (and write nothing); --direct reads the files.
    assert _cli("why", "a.md", cwd=loose).returncode in (0, 1)
    direct = _cli("--json", "search", "--direct", MARKER, cwd=loose)
    assert direct.returncode == 0, direct.stderr
    assert not (loose / ".ct").exists()
    # `init --write` makes it a project; then search works.
    assert _cli("init", "--write", cwd=loose).returncode == 0
    write_config(loose, "", watch=False)
    found = json.loads(_cli("--json", "search", MARKER, cwd=loose).stdout)
    assert sorted(r["path"] for r in found["results"]) == sorted(oracle.containing(loose, MARKER))


def test_dash_c_into_a_bundle_uses_the_enclosing_project(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult]
) -> None:
    project = make_project("acme_retail", "ga4")
    write_config(project, "okf/bundles/acme_retail", "okf/bundles/ga4", watch=False)
    bundle = project / "okf" / "bundles" / "acme_retail"
    (bundle / "metrics" / "marked.md").write_text(f"# Marked\n\n{MARKER}\n")
    expected = sorted(oracle.containing(project, MARKER))
    assert expected == ["okf/bundles/acme_retail/metrics/marked.md"]

    scopes = json.loads(run_cli("-C", str(bundle), "--json", "scopes").out)
    assert scopes["project"] == str(project)
    found = run_cli("-C", str(bundle), "--json", "search", MARKER)
    assert found.code == 0, found.err
    assert sorted(r["path"] for r in json.loads(found.out)["results"]) == expected
    assert not (bundle / ".ct").exists()  # no nested project, no second index
    assert (project / ".ct" / "okf" / "MANIFEST").exists()
    # The same from a working directory inside the bundle, with and without -C.
    from_cwd = run_cli("--json", "search", MARKER, cwd=bundle / "metrics")
    assert sorted(r["path"] for r in json.loads(from_cwd.out)["results"]) == expected
    # As with `git -C`, relative PATHs are taken from DIR, not from the root.
    why = run_cli("-C", str(bundle), "why", "metrics/marked.md")
    assert why.code == 0 and "okf/bundles/acme_retail/metrics/marked.md: included" in why.out


def test_git_file_marks_a_project(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    """A worktree or submodule has a `.git` *file*: that folder is the project."""
    top = tmp_path / "top"
    inner = top / "sub"
    (inner / "kb").mkdir(parents=True)
    (top / ".git").mkdir()
    (inner / ".git").write_text("gitdir: ../.git/modules/sub\n")
    (inner / "kb" / "index.md").write_text("# KB\n")
    doc = json.loads(run_cli("-C", str(inner / "kb"), "--json", "scopes").out)
    assert doc["project"] == str(inner)
    assert os.path.isdir(top / ".git")
