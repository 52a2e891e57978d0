"""Text that can name no file (a NUL byte, a surrogate that stands for no
byte, an over-long name) given as an ID, a path, a scope or a query: every
entry point answers with its documented outcome, never another exception
(docs/api.md "Errors", docs/cli.md "Exit codes", docs/mcp.md).

The property tests feed arbitrary text, the hostile characters mixed in, to
the Python API, the CLI's `main` (in process: a real argv cannot hold a
NUL) and the MCP tools through the SDK's in-memory client, which also
proves every answer encodes as the wire's UTF-8 JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ctindex
from ctindex.api import Index
from ctindex.cli import main
from ctindex.errors import ConceptNotFound, CtindexError
from ctindex.policy.decide import Decision
from ctindex.policy.project import unrepresentable
from tests.conftest import write_config

HANG_GUARD_S = 120  # a hang, not a speed limit
HOSTILE = ["\x00", "\ud800", "\udfff", "\udcff", "\n", "/", "..", ".md", "\\", "*", '"']
EXIT_CODES = {0, 1, 2}  # a decision, no hit, a refusal (docs/cli.md)

names = st.one_of(
    st.lists(st.one_of(st.characters(), st.sampled_from(HOSTILE)), min_size=0, max_size=40).map(
        "".join
    ),
    st.builds(lambda n, c: c * n, st.integers(250, 5000), st.sampled_from(["a", "a/", "\x00"])),
)
PROPERTY = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / ".git").mkdir()
    (root / "docs" / "tables").mkdir(parents=True)
    (root / "docs" / "tables" / "orders.md").write_text("# Orders\n\nzqxv7marker orders\n")
    write_config(root, "docs", watch=False)
    return root


@pytest.fixture(scope="module")
def index(project: Path) -> Iterator[Index]:
    with Index(project) as opened:
        yield opened


# -- the boundary ---------------------------------------------------------------------


def test_the_boundary_names_each_kind() -> None:
    assert unrepresentable("docs/a.md") is None
    assert unrepresentable("caf\u00e9\udcff") is None  # an undecodable byte, escaped: a name
    assert unrepresentable("a\x00b") == "a NUL byte"
    assert unrepresentable("a\ud800b") == "a character no file name can hold"


@pytest.mark.parametrize("text", ["a\x00b", "tables/orders\x00", "tables/orders\ud800", "\x00"])
def test_get_of_an_unrepresentable_id_is_concept_not_found(index: Index, text: str) -> None:
    with pytest.raises(ConceptNotFound) as caught:
        index.get(text)
    message = str(caught.value)
    assert message.isprintable() and ": no such concept" in message, message
    assert caught.value.concept_id == text


@pytest.mark.parametrize("text", ["a\x00b", "docs/tables/orders.md\ud800"])
def test_why_of_an_unrepresentable_path_is_a_hard_exclusion(index: Index, text: str) -> None:
    decision = index.why(text)
    assert decision.reason == "hard-excluded" and not decision.included
    assert decision.detail is not None and decision.detail.startswith("cannot name a file")
    assert index.why("docs/tables/orders.md", cwd="a\x00b").reason == "hard-excluded"


# -- properties -----------------------------------------------------------------------


@PROPERTY
@given(text=names)
def test_the_api_answers_any_text_with_its_documented_outcomes(index: Index, text: str) -> None:
    try:
        concept = index.get(text)
        assert concept.path == "docs/tables/orders.md"  # the one concept there is
    except CtindexError:
        pass
    with pytest.raises(ConceptNotFound):
        index.get("tables/nothing-here", scope=text)
    decision = index.why(text)
    assert isinstance(decision, Decision)
    assert isinstance(index.why("docs/tables/orders.md", cwd=text), Decision)
    for query in (text, f"path:{text}"):
        with contextlib.suppress(ctindex.QueryError):  # a malformed query: documented
            index.search(query)
    with contextlib.suppress(ctindex.UsageError):  # no project there: documented
        Index(text).close()


@PROPERTY
@given(text=names)
@example(text='"\r"')  # found by CI: a quoted carriage return, echoed in the query error
@example(text="a\nb:")
@pytest.mark.slow
def test_the_cli_main_answers_any_text_with_one_line(project: Path, text: str) -> None:
    for argv in (
        ["show", text],
        ["--json", "show", text],
        ["show", "--scope", text, "tables/orders"],
        ["why", text],
        ["--json", "why", text],
        ["search", text],
        ["--json", "search", f"path:{text}"],
        ["-C", text, "status"],
    ):
        out, err = io.StringIO(), io.StringIO()
        code = main(argv, stdout=out, stderr=err, cwd=project)
        assert code in EXIT_CODES, (argv, code, err.getvalue())
        if code == 2 or (code == 1 and argv[-2] == "show"):
            lines = err.getvalue().splitlines()
            # "ctindex: ..." or, for a usage error, "ctindex COMMAND: ..." (docs/cli.md)
            one = re.match(r"ctindex(?: [a-z]+)?: ", lines[0]) if len(lines) == 1 else None
            assert one is not None, (argv, lines)
        if argv[0] == "--json":
            json.loads(out.getvalue())  # one document, whatever happened


mcp = pytest.importorskip("mcp")


@PROPERTY
@given(text=names)
@pytest.mark.slow
def test_every_mcp_tool_answers_any_text_cleanly(project: Path, text: str) -> None:
    import anyio
    from mcp import Client

    from ctindex.mcp_server import build

    server, opened = build(project)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_concept", {"id": text}),
        ("get_concept", {"id": "tables/orders", "scope": text}),
        ("why", {"path": text}),
        ("search", {"query": text}),
        ("search", {"query": f"path:{text}"}),
        ("list_concepts", {"prefix": text}),
        ("list_concepts", {"type": text, "tag": text}),
    ]

    async def session() -> None:
        with anyio.fail_after(HANG_GUARD_S):  # a hang guard only
            await calling()

    async def calling() -> None:
        async with Client(server) as client:
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                if result.is_error:  # one clean line: the CLI's, or the refused argument
                    line = result.content[0].text  # type: ignore[union-attr]
                    assert line and "\n" not in line and line.isprintable(), (name, line)
                    assert not line.startswith("Error executing tool"), (name, line)
                else:
                    assert result.structured_content is not None, (name, result)

    try:
        anyio.run(session)
    finally:
        opened.close()


# -- real processes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "tables/\udcff"],
        ["why", "docs/\udcff.md"],
        ["show", "a" * 5000],
        ["why", "a/" * 3000],
        ["-C", "a" * 5000, "status"],
        ["search", "path:" + "a" * 5000],
    ],
    ids=["show-undecodable", "why-undecodable", "show-long", "why-long", "C-long", "search-long"],
)
def test_a_real_process_answers_odd_arguments(project: Path, argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", *argv],
        cwd=project,
        capture_output=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode in EXIT_CODES and "Traceback" not in err, (argv, err)
    if done.returncode == 2 or argv[0] == "show":
        assert len(err.splitlines()) == 1, (argv, err)
