"""`ctindex mcp`: ctindex as a Model Context Protocol server over stdio
(docs/mcp.md), built with the official Python SDK (`mcp`, the optional
extra `ctindex[mcp]`).

The server holds one long-lived ``ctindex.Index`` for the project, so an
agent's queries reuse the open generation, and every answer still goes
through the freshness step of the CLI (spec §7): a file changed underneath
the server is in the next answer. Each tool's result is the JSON document
of the matching CLI command (`search --json`, `show --json`, `why --json`,
`status --json`) and carries its freshness statement:

* ``search(query, limit=10, direct=False)``: ranked hits, `total`, `freshness`;
* ``get_concept(id, scope=None)``: one concept read from its file
  (`freshness.mode` is ``direct``);
* ``why(path)``: the decision trace of one path;
* ``status()``: the metrics of spec §10.

An expected failure (a malformed query, an unknown or ambiguous ID, a
configuration that cannot be honoured) is a tool error whose text is the
one line the CLI would print; the server keeps running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ctindex.api import Index
from ctindex.errors import CtindexError

INSTRUCTIONS = (
    "Full-text index of this project's OKF concept documents (Markdown with YAML "
    'frontmatter). Use `search` to find concepts (query syntax: words, "phrases", '
    "prefix*, -not, a OR b, type:X, tag:X, path:PREFIX), then `get_concept` with a hit's "
    "`id` (and its `scope` when two scopes hold the same ID) to read it. Every answer's "
    "`freshness` says how it was proven current: `watcher-clean`, `reconcile-on-query`, "
    "`fallback` (with a reason) or `direct` (read from the files)."
)


def build(root: str | Path) -> tuple[MCPServer, Index]:
    """The server and the Index it answers from (tests call the tools in process too)."""
    from ctindex.cli import _version

    index = Index(root)
    server: MCPServer = MCPServer("ctindex", instructions=INSTRUCTIONS, version=_version())

    @server.tool()
    def search(query: str, limit: int = 10, direct: bool = False) -> dict[str, Any]:
        """Search the concepts. Returns up to `limit` ranked results (id, scope, path,
        title, type, tags, score, snippet), the total number of matches and the
        freshness statement. `direct` answers by reading the files instead of the index."""
        return _call(lambda: index.search(query, limit=limit, direct=direct).to_json())

    @server.tool()
    def get_concept(id: str, scope: str | None = None) -> dict[str, Any]:
        """Read one concept by its ID (its path in its bundle without `.md`, as search
        results give it): frontmatter, title, body, links. `scope` (a search result's
        `scope`) picks one when several bundles hold the same ID."""
        return _call(lambda: index.get(id, scope=scope).to_json())

    @server.tool()
    def why(path: str) -> dict[str, Any]:
        """Why a project-relative path is or is not indexed: the reason (included,
        excluded, outside-scope, ...) and the scope, pattern and origin that decided."""

        return _call(lambda: why_answer(index, path))

    @server.tool()
    def status() -> dict[str, Any]:
        """Index and watcher metrics: generation, documents, segments, bytes, the
        watcher's lane and backend, the last reconciliation."""
        return _call(lambda: index.status().document)

    return server, index


def why_answer(index: Index, path: str) -> dict[str, Any]:
    """The `why` tool's document: `ctindex why --json PATH`'s, hint included
    (the command that would bring a path beneath no scope into one)."""
    from ctindex.commands.why import document, explained

    [(decision, hint)] = explained(index.plan(), [index.why(path)])
    return {
        "project": str(index.root),
        "all_included": decision.included,
        "decisions": [document(path, decision, hint)],
    }


def _call(work: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = work()
    except CtindexError as exc:  # the CLI's one line, for the model to read
        raise ToolError(str(exc)) from exc
    return result


def serve(root: str | Path) -> int:
    """Run the server on stdin/stdout until the host closes them."""
    server, index = build(root)
    try:
        server.run("stdio")
    finally:
        index.close()
    return 0
