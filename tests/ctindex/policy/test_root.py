"""ctindex/policy/root.py: the one root rule of the console fast path and the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctindex import fast_entry
from ctindex.policy import project, root


def test_nearest_ct_folder_or_git_marker_wins(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "a" / "inner"
    deep = inner / "b" / "c"
    deep.mkdir(parents=True)
    (outer / ".git").mkdir()
    assert root.find_root(str(deep)) == str(outer)
    (inner / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git file counts
    assert root.find_root(str(deep)) == str(inner)
    (inner / "b" / ".ct").mkdir()
    assert root.find_root(str(deep)) == str(inner / "b")


def test_a_ct_file_is_not_a_project(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / ".ct").write_text("not a folder")
    found = root.find_root(str(tmp_path / "x"))
    assert found != str(tmp_path / "x")


def test_quick_and_project_discovery_share_the_rule() -> None:
    # The same function object, not a copy that could drift.
    assert fast_entry.find_root is root.find_root
    assert project.find_root is root.find_root


def test_the_rule_imports_nothing_of_ctindex_but_itself() -> None:
    code = (
        "import sys; before = set(sys.modules); import ctindex.policy.root; "
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('ctindex')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['ctindex', 'ctindex.policy', 'ctindex.policy.root']"
