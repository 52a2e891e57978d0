"""`update --strict` / `rebuild --strict`: exit 2 naming every file; without
it the text names the first few files and the count (ctindex/commands/update.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, write_config


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    p = make_project("ga4")
    ga4 = p / "okf" / "bundles" / "ga4"
    for n in range(7):
        (ga4 / f"binary{n}.md").write_bytes(b"\x00zq")
    (ga4 / "latin1.md").write_bytes(b"caf\xe9")
    (ga4 / "badfm.md").write_text("---\ntitle: [\n---\nbody\n")
    write_config(p, "okf/bundles/ga4", "okf/bundles/gone", watch=False)
    return p


@pytest.mark.parametrize("verb", ["update", "rebuild"])
def test_strict_failure_lists_every_file(
    project: Path, run_cli: Callable[..., CliResult], verb: str
) -> None:
    r = run_cli("-C", str(project), "-q", verb, "--strict")
    assert r.code == 2, r.out + r.err
    lines = r.err.splitlines()
    named = {line.split(": ")[3] for line in lines if line.startswith("ctindex: strict: ")}
    expected = {f"okf/bundles/ga4/binary{n}.md" for n in range(7)}
    expected |= {"okf/bundles/ga4/latin1.md", "okf/bundles/ga4/badfm.md", "okf/bundles/gone"}
    assert named == expected
    assert lines[-1] == (
        "ctindex: --strict: 8 provider errors, 1 frontmatter warning, "
        "1 missing scope root (the index was still published)"
    )
    assert "Traceback" not in r.err
    # A chosen subset: warnings only.
    sub = run_cli("-C", str(project), "-q", verb, "--strict=warnings")
    assert sub.code == 2
    assert [ln for ln in sub.err.splitlines() if ln.startswith("ctindex: strict: ")] == [
        "ctindex: strict: frontmatter warning: okf/bundles/ga4/badfm.md: "
        + json.loads(run_cli("-C", str(project), "--json", "status", "--verbose").out)["warnings"][
            0
        ]["message"]
    ]
    doc = json.loads(run_cli("-C", str(project), "--json", verb, "--strict=missing-roots").out)
    assert (
        doc["exit_code"] == 2 and doc["problems"]["missing_roots"][0]["path"] == "okf/bundles/gone"
    )


def test_without_strict_the_text_names_the_first_files_and_the_count(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    r = run_cli("-C", str(project), "update")
    assert r.code == 0
    errors = [ln for ln in r.out.splitlines() if ln.startswith("  provider error: ")]
    assert len(errors) == 5 and errors[0].startswith("  provider error: okf/bundles/ga4/binary0.md")
    assert "  ... 3 more provider errors (8 in all; `ctindex status --verbose` lists them)" in r.out
    assert "  frontmatter warning: okf/bundles/ga4/badfm.md: " in r.out
    assert "  missing scope root: okf/bundles/gone: " in r.out


def test_strict_with_an_unknown_kind_is_a_usage_error(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    r = run_cli("-C", str(project), "update", "--strict=typos")
    assert r.code == 2 and r.err.count("\n") == 1 and "'typos'" in r.err
    assert not (project / ".ct" / "okf" / "MANIFEST").exists()  # checked before any work
