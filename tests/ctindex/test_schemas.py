"""Every command's --json output validates against the schema shipped in
ctindex/schemas (docs/cli.md), errors included."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.conftest import CliResult, write_config
from tests.daemon_support import CliProject

NAMES = ("status", "watch-status", "update", "verify", "search", "watch-control", "error")


def _schemas() -> dict[str, dict[str, Any]]:
    return {n: json.loads((files("ctindex.schemas") / f"{n}.json").read_text()) for n in NAMES}


def check(name: str, text: str) -> dict[str, Any]:
    schemas = _schemas()
    registry = Registry().with_resources(
        (f"{n}.json", Resource.from_contents(s)) for n, s in schemas.items()
    )
    doc = json.loads(text)
    Draft202012Validator(schemas[name], registry=registry).validate(doc)
    return doc


def test_the_schemas_are_valid_json_schemas() -> None:
    for schema in _schemas().values():
        Draft202012Validator.check_schema(schema)


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    p = make_project("ga4")
    (p / "okf" / "bundles" / "ga4" / "bad.md").write_bytes(b"\x00")
    write_config(p, "okf/bundles/ga4", "okf/bundles/gone", watch=False)
    return p


def test_every_command_json_validates_daemon_off(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    def cli(*args: str) -> CliResult:
        return run_cli("-C", str(project), "--json", *args)

    check("status", cli("status").out)  # no index yet
    check("update", cli("update").out)
    check("update", cli("rebuild", "--strict").out)
    check("update", cli("update").out)  # nothing changed
    check("status", cli("status", "--verbose").out)
    check("watch-status", cli("watch", "status").out)
    check("verify", cli("verify").out)
    check("search", cli("search", "event").out)
    check("search", cli("search", "--direct", "event").out)
    next(
        p for p in (project / "okf" / "bundles" / "ga4").rglob("*.md") if p.name != "index.md"
    ).write_text("drift\n")
    doc = check("verify", cli("verify", "--repair").out)
    assert doc["repaired"]["action"] == "update" and doc["after"]["clean"]
    check("watch-control", cli("watch", "start").out)  # watch off: refused, still the schema
    check("watch-control", cli("watch", "stop").out)


def test_errors_under_json_are_a_json_object_on_stdout(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    (project / ".ct" / "index.jsonc").write_text("{version: 1, watch: 3}")
    for args in (["update"], ["search", "x"], ["verify"], ["rebuild"]):
        r = run_cli("-C", str(project), "--json", *args)
        assert r.code == 2 and r.err.count("\n") == 1, args
        doc = check("error", r.out)
        assert doc["error"]["exit_code"] == 2 and doc["error"]["message"] in r.err
    status = run_cli("-C", str(project), "--json", "status")  # shows what it can instead
    assert status.code == 2 and check("status", status.out)["config_error"]
    usage = run_cli("--json", "update", "--no-such-flag")
    assert usage.code == 2 and check("error", usage.out)["error"]["kind"] == "UsageError"


@pytest.mark.needs("peercred")
def test_json_with_a_daemon_validates(make_cli_project: Callable[..., CliProject]) -> None:
    project = make_cli_project(config={"watch": True})
    assert project.cli("watch", "start").returncode == 0
    project.wait_daemon()
    check("search", project.cli("--json", "search", "order").stdout)
    check("status", project.cli("--json", "status").stdout)
    doc = check("watch-status", project.cli("--json", "watch", "status").stdout)
    assert doc["running"] and doc["started_unix_ms"] and doc["last_heartbeat_unix_ms"]
    check("watch-control", project.cli("--json", "watch", "start").stdout)
    check("watch-control", project.cli("--json", "watch", "stop").stdout)
