"""Every command's --json output validates against the schema shipped in
ctindex/schemas (docs/cli.md), errors included, with the references between
schemas resolved by `ctindex.schemas.registry()` as a user would."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from ctindex import schemas
from ctindex.cli import COMMANDS
from tests.conftest import CliResult, write_config
from tests.daemon_support import CliProject

NAMES = schemas.NAMES


def check(name: str, text: str, seen: set[str] | None = None) -> dict[str, Any]:
    """`text` parsed and validated against the schema `name` (noted in `seen`)."""
    doc: dict[str, Any] = json.loads(text)
    jsonschema.validate(doc, schemas.load(name), registry=schemas.registry())
    Draft202012Validator(schemas.bundled(name)).validate(doc)  # the same without references
    if seen is not None:
        seen.add(name)
    return doc


def test_the_schemas_are_valid_json_schemas() -> None:
    files = {p.stem for p in Path(schemas.__file__).parent.glob("*.json")}
    assert files == set(NAMES)
    for name in NAMES:
        Draft202012Validator.check_schema(schemas.load(name))
        assert schemas.load(name)["$id"] == f"{name}.json"
        assert '"$ref"' not in json.dumps(schemas.bundled(name)), name


def test_every_command_has_a_schema() -> None:
    assert set(schemas.COMMANDS) == set(COMMANDS)
    for command, names in schemas.COMMANDS.items():
        # mcp speaks JSON-RPC; help and completion print text for people and shells
        assert names or command in ("mcp", "help", "completion"), command
        assert set(names) <= set(NAMES)
    used = {n for names in schemas.COMMANDS.values() for n in names}
    assert set(NAMES) - used == {"concepts", "error"}  # the MCP list_concepts tool; any error


def test_the_enumerations_are_the_codes() -> None:
    from ctindex.policy.config import SETTING_KEYS
    from ctindex.policy.decide import REASONS

    why = schemas.load("why")["properties"]["decisions"]["items"]["properties"]
    assert why["reason"]["enum"] == list(REASONS)
    settings = schemas.load("scopes")["properties"]["settings"]["properties"]
    assert list(settings) == list(SETTING_KEYS)


def test_status_resolves_watch_status_through_the_registry() -> None:
    """Without the registry the reference is unresolvable; with it, a
    watcher document breaking watch-status.json breaks status.json."""
    from referencing.exceptions import Unresolvable

    doc = {"index": "x", "exists": False, "watcher": {"lane": 7}}
    with pytest.raises(Unresolvable):
        jsonschema.validate(doc, schemas.load("status"))
    with pytest.raises(jsonschema.ValidationError) as caught:
        jsonschema.validate(doc, schemas.load("status"), registry=schemas.registry())
    assert "watcher" in caught.value.absolute_path or caught.value.validator == "required"


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

    seen: set[str] = set()
    init = check("init", cli("init").out, seen)
    assert init["written"] is False and init["config"]["scopes"]
    scopes = check("scopes", cli("scopes").out, seen)
    assert "settings" not in scopes
    assert "settings" in check("scopes", cli("scopes", "--effective").out)
    (project / "extra").mkdir()
    added = check("scopes-edit", cli("scopes", "add", "extra").out, seen)
    assert added["action"] == "add" and "extra" in added["scopes"]
    removed = check("scopes-edit", cli("scopes", "remove", "extra").out, seen)
    assert removed["provider"] is None and "extra" not in removed["scopes"]
    why = check("why", cli("why", "okf/bundles/ga4/bad.md", "README.md", "nowhere/x.md").out, seen)
    assert [d["input"] for d in why["decisions"]] == [
        "okf/bundles/ga4/bad.md",
        "README.md",
        "nowhere/x.md",
    ]
    check("status", cli("status").out)  # no index yet
    check("update", cli("update").out, seen)
    check("update", cli("rebuild", "--strict").out)
    check("update", cli("update").out)  # nothing changed
    check("status", cli("status", "--verbose").out, seen)
    check("watch-status", cli("watch", "status").out, seen)
    check("verify", cli("verify").out, seen)
    hit = check("search", cli("search", "event").out, seen)["results"][0]
    check("search", cli("search", "--direct", "event").out)
    assert check("show", cli("show", hit["path"]).out, seen)["id"] == hit["id"]
    next(
        p for p in (project / "okf" / "bundles" / "ga4").rglob("*.md") if p.name != "index.md"
    ).write_text("drift\n")
    doc = check("verify", cli("verify", "--repair").out)
    assert doc["repaired"]["action"] == "update" and doc["after"]["clean"]
    check("watch-control", cli("watch", "start").out, seen)  # watch off: refused, still the schema
    check("watch-control", cli("watch", "stop").out)
    wanted = {n for command in COMMANDS for n in schemas.COMMANDS[command]}
    assert seen == wanted


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


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["update", "--no-such-flag"], "--no-such-flag"),
        (["search", "--limit", "0", "x"], "--limit"),
        (["watch", "restart"], "restart"),
        ([], "a command is required"),
    ],
)
def test_usage_errors_under_json_carry_their_message(
    args: list[str], said: str, run_cli: Callable[..., CliResult]
) -> None:
    usage = run_cli("--json", *args)
    error = check("error", usage.out)["error"]
    assert usage.code == error["exit_code"] == 2 and error["kind"] == "UsageError"
    assert said in error["message"] and "\n" not in error["message"]
    assert error["message"] in usage.err.replace("\n", " ")  # the line on stderr, too


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
