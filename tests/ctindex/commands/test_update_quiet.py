"""`update -q` and `rebuild -q` print nothing when they succeed (for cron),
and still name what `--strict` fails on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult, write_config


def test_update_and_rebuild_q_print_nothing_on_success(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult]
) -> None:
    project = make_project("ga4")
    bad = project / "okf" / "bundles" / "ga4" / "badfm.md"
    bad.write_text("---\ntitle: [unclosed\n---\nbody\n")
    write_config(project, "okf/bundles/ga4", watch=False)
    for verb in ("update", "rebuild", "update"):
        assert run_cli("-C", str(project), "-q", verb) == CliResult(0, "", "")
    strict = run_cli("-C", str(project), "-q", "update", "--strict")
    assert strict.code == 2 and strict.out == ""
    assert strict.err.startswith("ctindex: strict: frontmatter warning: okf/bundles/ga4/badfm.md: ")
    # without -q the summary is there
    assert run_cli("-C", str(project), "update").out.startswith("up to date: generation ")
