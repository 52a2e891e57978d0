"""CLI plumbing: entry points, global flags, exit codes, lightness."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex import cli
from tests.conftest import REPO, CliResult

HEAVY = (
    "ctindex.store",
    "ctindex.search",
    "ctindex.daemon",
    "ctindex.indexing.transaction",
    "Stemmer",
    "yaml",
)
EVENTS = "okf/bundles/ga4/tables/events_.md"


def test_version_and_help(run_cli_subprocess: Callable[..., Any]) -> None:
    version = run_cli_subprocess("--version")
    assert version.returncode == 0 and version.stdout.startswith("ctindex ")
    helped = run_cli_subprocess("--help")
    assert helped.returncode == 0
    for command in cli.COMMANDS:
        assert command in helped.stdout


def test_missing_command_and_bad_flag_are_usage_errors(run_cli: Callable[..., CliResult]) -> None:
    assert run_cli().code == 2
    bad = run_cli("scopes", "--frobnicate")
    assert bad == CliResult(2, "", "ctindex scopes: unknown option '--frobnicate'\n")
    assert run_cli("search", "x", "--limit", "0").code == 2


def test_global_flags_before_or_after_the_command(
    bundles_project: Path, run_cli: Callable[..., CliResult]
) -> None:
    root = str(bundles_project)
    spellings = [
        ("-C", root, "--json", "why", EVENTS),
        ("why", "-C", root, "--json", EVENTS),
        ("--json", "why", EVENTS, "--project", root),
        (f"--project={root}", "why", "--json", EVENTS),
    ]
    docs = []
    for args in spellings:
        result = run_cli(*args)
        assert result.code == 0, (args, result)
        docs.append(json.loads(result.out))
    assert all(doc == docs[0] for doc in docs)


def test_missing_project_folder(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("-C", str(tmp_path / "nope"), "scopes")
    assert result.code == 2
    assert (
        result.err == f"ctindex: {tmp_path / 'nope'}: project folder does not exist "
        "or is not a folder\n"
    )


def test_subprocess_smoke(bundles_project: Path, run_cli_subprocess: Callable[..., Any]) -> None:
    scopes = run_cli_subprocess("-C", str(bundles_project), "scopes")
    assert scopes.returncode == 0 and scopes.stderr == ""
    assert scopes.stdout.count("scope okf/bundles/") == 4
    doc = json.loads(
        run_cli_subprocess("-C", str(bundles_project), "scopes", "--effective", "--json").stdout
    )
    assert [s["root"] for s in doc["scopes"]] == [
        "okf/bundles/acme_retail",
        "okf/bundles/crypto_bitcoin",
        "okf/bundles/ga4",
        "okf/bundles/stackoverflow",
    ]
    assert len(doc["digest"]) == 64
    why = run_cli_subprocess("why", EVENTS, cwd=bundles_project)
    assert why.returncode == 0 and why.stdout.startswith(f"{EVENTS}: included")
    init = run_cli_subprocess("init", cwd=bundles_project)
    assert init.returncode == 0 and '"okf/bundles/ga4"' in init.stdout


def test_ct_alias(bundles_project: Path, run_cli_subprocess: Callable[..., Any]) -> None:
    direct = run_cli_subprocess("-C", str(bundles_project), "why", "--json", EVENTS)
    for args in (
        ("okf", "index", "why", "--json", EVENTS),
        ("-C", str(bundles_project), "okf", "index", "why", "--json", EVENTS),
        ("okf", "--json", "index", "why", EVENTS),
    ):
        aliased = run_cli_subprocess(*args, cwd=bundles_project, program="ct")
        assert aliased.returncode == 0, aliased.stderr
        assert json.loads(aliased.stdout) == json.loads(direct.stdout)
    refused = run_cli_subprocess("okf", "frob", program="ct")
    assert refused.returncode == 2 and "ct okf index" in refused.stderr


def test_ct_search_maps_to_search(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(cli, "main", lambda argv: seen.append(argv) or 0)
    assert cli.ct_main(["okf", "search", "bitcoin", "--limit", "3"]) == 0
    assert cli.ct_main(["-C", "x", "okf", "index", "status"]) == 0
    assert seen == [["search", "bitcoin", "--limit", "3"], ["-C", "x", "status"]]


def test_policy_error_is_one_line_without_traceback(
    tmp_path: Path, run_cli_subprocess: Callable[..., Any]
) -> None:
    (tmp_path / ".ct").mkdir()
    (tmp_path / ".ct/index.jsonc").write_text('{scopes: [{root: "okf", provider: "pdf"}]}')
    result = run_cli_subprocess("scopes", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"ctindex: {tmp_path}/.ct/index.jsonc: scopes[0].provider: "
        "unknown provider 'pdf' (known: okf-markdown)\n"
    )


def test_command_missing_from_this_build(
    tmp_path: Path, run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes the import fail as if the module did not exist.
    monkeypatch.setitem(sys.modules, "ctindex.commands.watch", None)
    result = run_cli("-C", str(tmp_path), "watch", "status")
    assert result == CliResult(2, "", "ctindex: 'watch' is not available in this build\n")


def test_interrupt_exits_130(
    tmp_path: Path, run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctindex.commands import why

    def interrupted(*_args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(why, "run", interrupted)
    assert run_cli("-C", str(tmp_path), "why", "x").code == 130


def test_broken_pipe_is_one_line_and_exit_74(bundles_project: Path) -> None:
    """The reader leaves before anything is written (found when the process
    starts or when it writes: either way): the output is lost, which is
    exit 74 and one line, never a quiet exit a script reads as success
    (ctindex/base/streams.py)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ctindex", "-C", str(bundles_project), "scopes", "--effective"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader goes away before anything is written
    error = process.stderr.read()
    assert process.wait(timeout=60) == 74
    assert error == b"ctindex: cannot write the output: Broken pipe\n"


def test_a_write_that_breaks_outside_emit_is_the_same_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BrokenPipeError from any write of a command, not only emit()'s."""
    from ctindex.commands import why

    def breaks(*_args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(why, "run", breaks)
    err = io.StringIO()
    assert cli.main(["-C", str(tmp_path), "why", "x"], stdout=io.StringIO(), stderr=err) == 74
    assert err.getvalue() == "ctindex: cannot write the output: Broken pipe\n"


def test_main_without_stdout_or_stderr_is_exit_74(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the interpreter leaves them when descriptor 1 or 2 was closed."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", None)
    assert cli.main(["-C", str(tmp_path), "why", "x"], stderr=err) == 74
    assert err.getvalue() == "ctindex: cannot write the output: stdout is closed\n"
    monkeypatch.setattr(sys, "stderr", None)
    assert cli.main(["-C", str(tmp_path), "why", "x"], stdout=io.StringIO()) == 74


@pytest.mark.parametrize(
    "command", [["why", EVENTS, "okf"], ["scopes", "--effective"], ["scopes", "--json"]]
)
def test_policy_commands_stay_light(bundles_project: Path, command: list[str]) -> None:
    probe = textwrap.dedent(f"""
        import io, json, sys
        from ctindex.cli import main
        main({["-C", str(bundles_project), *command]!r}, stdout=io.StringIO())
        print(json.dumps(sorted(sys.modules)))
    """)
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(result.stdout)
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]
    assert heavy == []
    assert "ctindex.policy.plan" in loaded  # the probe did run the command


def test_readme_sample_project(run_cli: Callable[..., CliResult]) -> None:
    sample = REPO / "fixtures" / "sample"
    doc = json.loads(run_cli("-C", str(sample), "--json", "scopes").out)
    assert [s["root"] for s in doc["scopes"]] == [
        "okf/bundles/acme_retail",
        "okf/bundles/crypto_bitcoin",
    ]
    result = run_cli(
        "-C",
        str(sample),
        "why",
        "okf/bundles/crypto_bitcoin/tables/transactions.md",
        "okf/bundles/crypto_bitcoin/viz.html",
    )
    assert result.code == 1
    assert "transactions.md: included" in result.out and "viz.html: outside-scope" in result.out


def test_human_units() -> None:
    from ctindex.base.output import human_bytes, human_count, human_ms, table

    assert [human_bytes(n) for n in (0, 1023, 1536, 2 * 1024 * 1024, 3 << 40)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "2.0 MiB",
        "3.0 TiB",
    ]
    assert [human_ms(v) for v in (None, 0.42, 12.4, 3200, 303_000, 7_500_000)] == [
        "-",
        "0.4 ms",
        "12 ms",
        "3.2 s",
        "5 min 3 s",
        "2 h 5 min",
    ]
    assert (human_count(1, "document"), human_count(12345, "document")) == (
        "1 document",
        "12,345 documents",
    )
    assert table([["a", "bb", "c"], ["ddd", "e", "f"]]) == "a    bb  c\nddd  e   f\n"


# -- usage errors: one line, the argument as written, close matches ----------

COMMAND_LIST = (
    "init, scopes, why, status, update, rebuild, verify, search, show, watch, mcp, help, completion"
)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("serch", "x"),
            f"ctindex: unknown command 'serch'; did you mean 'search'? (commands: {COMMAND_LIST})",
        ),
        (("frobnicate",), f"ctindex: unknown command 'frobnicate' (commands: {COMMAND_LIST})"),
        (
            ("search", "x", "--limt", "3"),
            "ctindex search: unknown option '--limt'; did you mean '--limit'?",
        ),
        # no prefix of an option is the option (allow_abbrev=False)
        (
            ("search", "x", "--lim", "3"),
            "ctindex search: unknown option '--lim'; did you mean '--limit'?",
        ),
        (("search", "x", "--js"), "ctindex search: unknown option '--js'; did you mean '--json'?"),
        (
            ("status", "--verb"),
            "ctindex status: unknown option '--verb'; did you mean '--verbose'?",
        ),
        (
            ("search", "x", "--limit=x"),
            "ctindex search: --limit: expected a positive integer, got 'x'",
        ),
        (
            ("search", "x", "--limit", "0"),
            "ctindex search: --limit: expected a positive integer, got '0'",
        ),
        (
            ("watch", "stat"),
            "ctindex watch: ACTION: invalid choice 'stat'; did you mean 'start', 'status'? "
            "(choose from status, start, stop)",
        ),
        (
            ("scopes", "ad"),
            "ctindex scopes: ACTION: invalid choice 'ad'; did you mean 'add'? "
            "(choose from add, remove)",
        ),
        (("why",), "ctindex why: the following arguments are required: PATH"),
        (("status", "extra"), "ctindex status: unexpected argument 'extra'"),
    ],
)
def test_usage_errors_are_one_line_naming_what_the_user_wrote(
    run_cli: Callable[..., CliResult], args: tuple[str, ...], line: str
) -> None:
    result = run_cli(*args)
    assert result == CliResult(2, "", line + "\n")
    assert "_positive" not in result.err and "argument action" not in result.err


def test_a_json_usage_error_carries_its_message(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("--json", "search", "x", "--limt", "3")
    assert result.code == 2
    assert json.loads(result.out) == {
        "error": {
            "message": "search: unknown option '--limt'; did you mean '--limit'?",
            "kind": "UsageError",
            "exit_code": 2,
        }
    }


# A valid command line of each command, before an option is appended.
VALID = {
    "init": [],
    "scopes": [],
    "why": ["x"],
    "status": [],
    "update": [],
    "rebuild": [],
    "verify": [],
    "search": ["x"],
    "show": ["x"],
    "watch": ["status"],
    "mcp": [],
    "help": [],
    "completion": ["bash"],
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    return cli.build_parser().commands


def test_every_parser_refuses_abbreviations_and_every_prefix_is_an_error() -> None:
    top = cli.build_parser()
    assert set(VALID) == set(cli.COMMANDS) == set(top.commands)
    assert not top.allow_abbrev and not any(p.allow_abbrev for p in top.commands.values())
    for name, parser in top.commands.items():
        options = {o for a in parser._actions for o in a.option_strings}
        for option in sorted(o for o in options if o.startswith("--")):
            for cut in range(3, len(option)):
                prefix = option[:cut]
                if prefix in options:
                    continue
                with pytest.raises(cli.UsageExit) as refused:
                    cli.parse([name, *VALID[name], prefix])
                assert f"unknown option {prefix!r}" in refused.value.line, (name, prefix)


def test_every_argument_has_help_text() -> None:
    missing = [
        f"{name} {action.dest}"
        for name, parser in _commands().items()
        for action in parser._actions
        if not action.help or action.help == argparse.SUPPRESS
    ]
    assert missing == []
    helped = {name: " ".join(parser.format_help().split()) for name, parser in _commands().items()}
    assert "every provider error" in helped["status"] and "query words" in helped["search"]
    assert "3 not running" in helped["watch"] and "relative to the working folder" in helped["why"]


def test_ct_help_exits_0(run_cli_subprocess: Callable[..., Any]) -> None:
    helped = run_cli_subprocess("--help", program="ct")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: ct okf index COMMAND")
    assert helped.stderr == ""
    wrong = run_cli_subprocess("frob", program="ct")
    assert wrong.returncode == 2 and wrong.stdout == ""


def test_mcp_refuses_json(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    (tmp_path / ".git").mkdir()
    result = run_cli("-C", str(tmp_path), "--json", "mcp")
    assert result.code == 2
    assert (
        result.err == "ctindex: mcp: --json does not apply (the server speaks JSON-RPC on stdout)\n"
    )
    assert json.loads(result.out)["error"]["kind"] == "UsageError"
