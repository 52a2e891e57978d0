"""`ctindex why`: any path gets a decision, in text and JSON, with exit 0 only
when every path is included."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult

EVENTS = "okf/bundles/ga4/tables/events_.md"


def why_json(
    run_cli: Callable[..., CliResult], root: Path, *paths: str, cwd: Path | None = None
) -> tuple[int, dict[str, Any]]:
    result = run_cli("-C", str(root), "why", "--json", *paths, cwd=cwd)
    return result.code, json.loads(result.out)


def test_included_path_text_and_exit_0(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    result = run_cli("-C", str(bundles_project), "why", EVENTS)
    assert result.code == 0
    assert result.out.splitlines() == [
        f"{EVENTS}: included",
        "  scope okf/bundles/ga4, pattern **/*.md, origin derived, provider okf-markdown",
    ]


def test_json_schema(bundles_project: Path, run_cli: Callable[..., CliResult]) -> None:
    code, doc = why_json(run_cli, bundles_project, EVENTS, "okf/bundles/ga4/viz.html")
    assert code == 1
    assert doc["project"] == str(bundles_project) and doc["all_included"] is False
    first, second = doc["decisions"]
    assert first == {
        "input": EVENTS,
        "path": EVENTS,
        "reason": "included",
        "scope": "okf/bundles/ga4",
        "pattern": "**/*.md",
        "origin": "derived",
        "provider": "okf-markdown",
        "detail": "",
        "hint": None,
    }
    assert second["reason"] == "outside-scope" and second["scope"] == "okf/bundles/ga4"


def test_relative_paths_are_taken_from_the_working_directory_or_dash_c(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    tables = bundles_project / "okf/bundles/ga4/tables"
    result = run_cli("why", "--json", "events_.md", "../../../../.git", cwd=tables)
    assert result.code == 1
    doc = json.loads(result.out)
    assert [d["path"] for d in doc["decisions"]] == [EVENTS, ".git"]
    # -C DIR runs as if started in DIR (like git -C).
    code, doc = why_json(run_cli, bundles_project, EVENTS, cwd=tables)
    assert code == 0 and doc["decisions"][0]["path"] == EVENTS


def test_discovery_walks_up_to_the_git_folder(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    result = run_cli("why", "events_.md", cwd=bundles_project / "okf/bundles/ga4/tables")
    assert result.code == 0 and result.out.startswith(f"{EVENTS}: included")


def test_outside_the_project(
    bundles_project: Path, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    code, doc = why_json(run_cli, bundles_project, "/etc/hostname", str(tmp_path / "x.md"))
    assert code == 1
    for decision, expected in zip(
        doc["decisions"], ["/etc/hostname", str(tmp_path / "x.md")], strict=True
    ):
        assert (decision["reason"], decision["path"], decision["scope"]) == (
            "outside-scope",
            expected,
            None,
        )
        assert "outside the project" in decision["detail"]


def test_nonexistent_path_gets_its_path_level_decision(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    code, doc = why_json(
        run_cli,
        bundles_project,
        "okf/bundles/ga4/tables/new.md",
        "okf/bundles/ga4/gone/index.md",
        "okf/bundles/ga4/tables/events_.md/x",
    )
    assert [(d["reason"], d["detail"]) for d in doc["decisions"]] == [
        ("included", "does not exist"),
        ("unsupported-type", "index.md is reserved by okf-markdown; does not exist"),
        # gitignore semantics: "**/*.md" also matches a folder named *.md and its
        # contents, so the provider is what refuses "x".
        (
            "unsupported-provider",
            "okf-markdown does not accept this file type "
            "(no registered provider claims it); does not exist",
        ),
    ]
    assert code == 1  # an index.md is never included


def test_directory(bundles_project: Path, run_cli: Callable[..., CliResult]) -> None:
    code, doc = why_json(run_cli, bundles_project, "okf/bundles/ga4", ".", "okf/bundles/ga4/")
    assert code == 1
    assert [(d["path"], d["reason"], d["detail"]) for d in doc["decisions"]] == [
        ("okf/bundles/ga4", "not-regular", "a directory"),
        (".", "not-regular", "a directory"),
        ("okf/bundles/ga4", "not-regular", "a directory"),
    ]


def test_symlinks_are_never_followed(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    ga4 = bundles_project / "okf/bundles/ga4"
    os.symlink("tables/events_.md", ga4 / "alias.md")
    os.symlink("tables", ga4 / "linked")
    os.symlink("/etc", ga4 / "etc")
    os.symlink(bundles_project / "okf/bundles/acme_retail/tables", ga4 / "deep")
    code, doc = why_json(
        run_cli,
        bundles_project,
        "okf/bundles/ga4/alias.md",
        "okf/bundles/ga4/linked/events_.md",
        "okf/bundles/ga4/etc/hostname",
        "okf/bundles/ga4/deep/../datasets/ga4_obfuscated_sample_ecommerce.md",
    )
    assert code == 1
    alias, through, escape, dotdot = doc["decisions"]
    assert (alias["reason"], alias["origin"]) == ("not-regular", "hard")
    assert "symbolic link" in alias["detail"]
    for decision in (through, escape):
        assert (decision["reason"], decision["origin"]) == ("hard-excluded", "hard")
        assert "is a symbolic link" in decision["detail"]
    # Lexically a ga4 dataset, but the OS resolves deep/.. to okf/bundles/acme_retail.
    assert dotdot["reason"] == "hard-excluded" and "'..'" in dotdot["detail"]


def test_fifo(bundles_project: Path, run_cli: Callable[..., CliResult]) -> None:
    os.mkfifo(bundles_project / "okf/bundles/ga4/pipe.md")
    code, doc = why_json(run_cli, bundles_project, "okf/bundles/ga4/pipe.md")
    assert code == 1
    assert (doc["decisions"][0]["reason"], doc["decisions"][0]["detail"]) == (
        "not-regular",
        "a fifo",
    )


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses non-UTF-8 names")
def test_non_utf8_name_round_trips(
    bundles_project: Path, run_cli: Callable[..., CliResult], run_cli_subprocess: Callable[..., Any]
) -> None:
    raw = os.fsencode(bundles_project / "okf/bundles/ga4/tables") + b"/caf\xe9.md"
    with open(raw, "wb") as handle:
        handle.write(b"# cafe\n")
    name = os.fsdecode(raw)
    code, doc = why_json(run_cli, bundles_project, name)
    assert code == 0
    decision = doc["decisions"][0]
    assert decision["reason"] == "included"
    assert os.fsencode(decision["path"]) == b"okf/bundles/ga4/tables/caf\xe9.md"
    # A real process shows the byte escaped in text (ctindex/base/printable.py:
    # an undecodable byte could be a terminal's C1 control) and as the same
    # \udcXX escape in JSON.
    text = run_cli_subprocess("-C", str(bundles_project), "why", name)
    assert text.returncode == 0
    first_line = text.stdout.splitlines()[0]
    assert first_line == "okf/bundles/ga4/tables/caf\\udce9.md: included"
    out = run_cli_subprocess("-C", str(bundles_project), "--json", "why", name).stdout
    assert "caf\\udce9.md" in out


def test_quiet_prints_nothing(bundles_project: Path, run_cli: Callable[..., CliResult]) -> None:
    assert run_cli("-C", str(bundles_project), "-q", "why", EVENTS) == CliResult(0, "", "")
    assert run_cli("-C", str(bundles_project), "why", "-q", "okf").code == 1


def test_exit_0_only_when_every_path_is_included(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    good = "okf/bundles/ga4/datasets/ga4_obfuscated_sample_ecommerce.md"
    assert run_cli("-C", str(bundles_project), "why", EVENTS, good).code == 0
    assert run_cli("-C", str(bundles_project), "why", EVENTS, "okf/bundles/ga4/index.md").code == 1


def test_a_file_beneath_no_scope_gets_the_command_that_scopes_its_folder(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    (bundles_project / "notes").mkdir()
    (bundles_project / "notes" / "a.md").write_text("# A\n")
    (bundles_project / "top.md").write_text("# Top\n")
    code, doc = why_json(run_cli, bundles_project, "notes/a.md", "top.md", "nowhere/x.md")
    assert code == 1
    hints = [d["hint"] for d in doc["decisions"]]
    assert hints == ["ctindex scopes add notes", "ctindex scopes add .", None]  # absent: none
