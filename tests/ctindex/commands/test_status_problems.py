"""Provider errors and frontmatter warnings as `status --verbose` and
`update` show them: the path once, PyYAML's line and column in the message."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult, write_config

BAD = "okf/bundles/ga4/badfm.md"
PROBLEM = (
    "malformed YAML frontmatter at line 3, column 5: mapping values are not allowed "
    "in this context; indexed as plain text"
)


def test_the_path_is_said_once_and_the_line_and_column_are_kept(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult]
) -> None:
    project = make_project("ga4")
    (project / BAD).write_text("---\ntitle: a\nb: c: d\n---\nbody\n")
    (project / "okf/bundles/ga4/nul.md").write_bytes(b"# x\x00\n")
    write_config(project, "okf/bundles/ga4", watch=False)
    update = run_cli("-C", str(project), "update")
    assert f"  frontmatter warning: {BAD}: {PROBLEM}\n" in update.out
    assert "  provider error: okf/bundles/ga4/nul.md: contains a NUL byte" in update.out
    doc = json.loads(run_cli("-C", str(project), "--json", "status", "--verbose").out)
    assert doc["warnings"] == [{"path": BAD, "message": PROBLEM}]
    assert doc["errors"][0]["message"].startswith("contains a NUL byte")
    text = run_cli("-C", str(project), "status", "--verbose").out
    assert f"  warning  {BAD}: {PROBLEM}\n" in text
    assert text.count(BAD) == 1
    problems = json.loads(run_cli("-C", str(project), "--json", "update").out)["problems"]
    assert problems["warnings"] == [{"path": BAD, "message": PROBLEM}]
