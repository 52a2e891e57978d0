"""`ctindex mcp` (ctindex/mcp_server.py, docs/mcp.md) driven over stdio by the
official SDK's client: the tools are listed with their descriptions, bounds,
annotations and output schemas (the shipped ones), each is called and its
result validated against its declared schema, bad arguments give one clean
line, `list_concepts` pages cover every concept once, and a file changed
underneath the running server is in its next answer (against
tests/oracle.py), with watching off and with a daemon."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex import schemas
from tests import oracle
from tests.daemon_support import CliProject

mcp = pytest.importorskip("mcp")
jsonschema = pytest.importorskip("jsonschema")

MARK = "zqxv7mcpmark"
TIMEOUT_S = 120  # a hang guard only


async def _session(root: Path, expect_mode: str) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctindex", "-C", str(root), "mcp"]
    )
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == set(SCHEMAS)
        for tool in tools.values():
            _check_declared(tool)

        async def call(name: str, **arguments: Any) -> dict[str, Any]:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result.content
            doc: dict[str, Any] = result.structured_content  # type: ignore[assignment]
            assert doc == json.loads(result.content[0].text)  # type: ignore[union-attr]
            jsonschema.validate(doc, tools[name].output_schema)  # type: ignore[arg-type]
            jsonschema.validate(doc, schemas.load(SCHEMAS[name]), registry=schemas.registry())
            return doc

        await _refusals(client)
        pages = await _every_page(call, limit=4)
        listed = [(c["id"], c["path"]) for c in pages]
        assert listed == sorted(listed)  # ID order, each concept once
        assert len(pages) == len(set(listed)) and {c["path"] for c in pages} == set(
            oracle.indexed_files(root)
        )

        async def hits() -> set[str]:
            doc = await call("search", query=MARK, limit=100)
            assert doc["freshness"]["mode"] == expect_mode, doc["freshness"]
            return {r["path"] for r in doc["results"]}

        first = await call("search", query="event", limit=3)
        assert first["results"] and first["freshness"]["generation"] is not None
        assert await hits() == oracle.containing(root, MARK) == set()

        concept = root / "ga4" / "tables" / "mcp_made.md"
        concept.write_text(
            f"---\ntitle: Made for MCP\ntype: Fresh\ntags: [mcp]\n---\n{MARK} here\n"
        )
        assert await hits() == oracle.containing(root, MARK) == {"ga4/tables/mcp_made.md"}
        listed = await call("list_concepts", tag="mcp")
        assert [c["id"] for c in listed["concepts"]] == ["tables/mcp_made"]
        assert listed["total"] == 1 and listed["next_offset"] is None
        got = await call("get_concept", id="tables/mcp_made")
        assert got["title"] == "Made for MCP" and got["frontmatter"]["tags"] == ["mcp"]
        assert got["freshness"]["mode"] == "direct"

        concept.write_text("---\ntitle: Edited\n---\nno marker now\n")
        assert await hits() == oracle.containing(root, MARK) == set()
        assert (await call("get_concept", id="tables/mcp_made"))["title"] == "Edited"

        listed = await call("list_concepts", prefix="tables/mcp", type="fresh")
        assert [c["id"] for c in listed["concepts"]] == []  # the edit dropped the type
        why = await call("why", path="ga4/tables/mcp_made.md")
        assert why["decisions"][0]["reason"] == "included" and why["all_included"] is True
        status = await call("status")
        assert status["documents"] > 0 and "watcher" in status

        missing = await client.call_tool("get_concept", {"id": "tables/mcp_mad"})
        assert missing.is_error and "tables/mcp_made" in missing.content[0].text  # type: ignore[union-attr]
        bad = await client.call_tool("search", {"query": '"unterminated'})
        assert bad.is_error and "unterminated quote" in bad.content[0].text  # type: ignore[union-attr]
        unknown = await client.call_tool("search", {"query": "tgs:ga4"})
        text = unknown.content[0].text  # type: ignore[union-attr]
        assert unknown.is_error and "\n" not in text and "Traceback" not in text
        assert "query: unknown field 'tgs' at column 1; did you mean 'tags'?" in text
        fielded = await call("search", query="title:event", limit=100)
        assert fielded["results"] and all(
            "event" in r["title"].casefold() for r in fielded["results"]
        )
        assert (await call("search", query="event", limit=1))["results"]  # still serving


SCHEMAS = {
    "search": "search",
    "get_concept": "show",
    "list_concepts": "concepts",
    "why": "why",
    "status": "status",
}


def _check_declared(tool: Any) -> None:
    """What a model reads before calling: clean descriptions, every argument
    described and bounded, read-only annotations, the shipped output schema."""
    assert tool.description and "\n " not in tool.description and "  " not in tool.description
    annotations = tool.annotations
    assert annotations.read_only_hint is True and annotations.idempotent_hint is True
    assert annotations.destructive_hint is False and annotations.title
    for name, prop in tool.input_schema["properties"].items():
        assert prop.get("description"), (tool.name, name)
        if prop.get("type") == "integer":
            assert "minimum" in prop, (tool.name, name)
    if tool.name in ("search", "list_concepts"):
        assert tool.input_schema["properties"]["limit"]["maximum"] >= 1
    assert tool.output_schema == schemas.bundled(SCHEMAS[tool.name])
    assert tool.output_schema["additionalProperties"] is False  # no catch-all


async def _refusals(client: Any) -> None:
    """Arguments outside the input schema: one line naming the tool, the
    argument and the rule; no pydantic report, no URL; the server goes on."""
    for name, arguments, said in (
        ("search", {"query": "event", "limit": 0}, "search: limit: "),
        ("search", {"query": "event", "limit": 10_000}, "search: limit: "),
        ("search", {}, "search: query: "),
        ("list_concepts", {"offset": -1}, "list_concepts: offset: "),
        ("list_concepts", {"limit": "many"}, "list_concepts: limit: "),
        ("get_concept", {"id": ""}, "get_concept: id: "),
        ("why", {"path": 3}, "why: path: "),
    ):
        result = await client.call_tool(name, arguments)
        text = result.content[0].text
        assert result.is_error and text.startswith(said), (name, arguments, text)
        assert "\n" not in text and "http" not in text and "Error executing" not in text


async def _every_page(call: Any, limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = await call("list_concepts", offset=offset, limit=limit)
        assert page["offset"] == offset and len(page["concepts"]) <= limit
        out += page["concepts"]
        offset = page["next_offset"]
    return out


def _run(root: Path, mode: str) -> None:
    import anyio

    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT_S * 2):  # a hang guard, not a performance bound
            await _session(root, mode)

    anyio.run(bounded)


def test_mcp_over_stdio_watch_off(make_cli_project: Callable[..., CliProject]) -> None:
    cp = make_cli_project(bundles=("ga4",), config={"watch": False})
    _run(cp.root, "reconcile-on-query")


def test_mcp_over_stdio_with_a_daemon(make_cli_project: Callable[..., CliProject]) -> None:
    cp = make_cli_project(bundles=("ga4",))
    cp.cli("watch", "start")
    cp.wait_daemon()
    _run(cp.root, "watcher-clean")


def test_mcp_without_the_sdk_is_one_line(tmp_path: Path) -> None:
    """Without the extra: exit 2 and one line naming it, no traceback."""
    import subprocess

    (tmp_path / ".git").mkdir()
    blocker = tmp_path / "shadow"
    blocker.mkdir()
    (blocker / "mcp.py").write_text("raise ImportError('no SDK here', name='mcp')\n")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(blocker)!r}); "
            "from ctindex.cli import main; "
            f"sys.exit(main(['-C', {str(tmp_path)!r}, 'mcp']))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "ctindex[mcp]" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
