"""`ctindex mcp`: ctindex as a Model Context Protocol server over stdio
(docs/mcp.md), built with the official Python SDK (`mcp`, the optional
extra `ctindex[mcp]`).

The server holds one long-lived ``ctindex.Index`` for the project, so an
agent's queries reuse the open generation, and every answer still goes
through the freshness step of the CLI (ctindex/query/freshness.py): a file changed underneath
the server is in the next answer. Each tool's result is the JSON document
of the matching CLI command (`search --json`, `show --json`, `why --json`,
`status --json`) or of `Index.concepts` (`list_concepts`), carries its
freshness statement, and is declared with the shipped JSON Schema of that
document as the tool's output schema (ctindex/schemas, written out without
references: `ctindex.schemas.bundled`).

Every parameter has a description and its bounds in the input schema; every
tool is annotated read-only and idempotent (it changes no concept and no
configuration: bringing the index up to date is a cache's work). A failure
is a tool error of one line: the line the CLI would print (a malformed
query, an unknown or ambiguous ID, a configuration that cannot be honoured)
or, for arguments outside the input schema, which argument and why. The
server keeps running.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from ctindex import schemas
from ctindex.api import Index
from ctindex.errors import CtindexError, shown

if TYPE_CHECKING:
    from mcp.server.mcpserver.context import Context

INSTRUCTIONS = (
    "Full-text index of this project's OKF concept documents (Markdown with YAML "
    'frontmatter). Use `search` to find concepts (query syntax: words, "phrases", '
    "prefix*, -not, a OR b, and the fields title:, description:, tags:, type:, id:, "
    'path: with a word or a "quoted value"; accents fold, so cafe finds Café; an unknown '
    "field is an error naming the closest), `list_concepts` to browse them "
    "(by type, tag or ID prefix, a page at a time), then `get_concept` with an `id` (and "
    "its `scope` when two scopes hold the same ID) to read one. Every answer's "
    "`freshness` says how it was proven current: `watcher-clean`, `reconcile-on-query`, "
    "`fallback` (with a reason) or `direct` (read from the files)."
)

MAX_SEARCH = 100  # the most results one `search` call returns
MAX_PAGE = 200  # the largest `list_concepts` page

QUERY_HELP = (
    'The query: words (all must match), "a phrase", prefix*, -excluded, a OR b, '
    "( groups ), and the fields title:, description:, tags: (or tag:), type:, id:, path: "
    '(a word or a "quoted value"); accents fold (cafe finds Café); an unknown field is an '
    "error naming the closest (docs/search.md)"
)

# Each tool's arguments: descriptions and bounds land in its input schema.
Query = Annotated[str, Field(description=QUERY_HELP, min_length=1)]
Limit = Annotated[
    int, Field(description="How many ranked results to return at most", ge=1, le=MAX_SEARCH)
]
Direct = Annotated[
    bool,
    Field(description="Answer by reading the files instead of the index (slower; the oracle)"),
]
ConceptId = Annotated[
    str,
    Field(
        description="The concept ID (its path in its bundle without .md, as search and "
        "list_concepts give it), or its project-relative path",
        min_length=1,
    ),
]
Scope = Annotated[
    str | None,
    Field(description="The scope root (a result's `scope`) when several scopes hold the ID"),
]
ProjectPath = Annotated[
    str,
    Field(
        description="A path relative to the project root, e.g. okf/bundles/ga4/x.md", min_length=1
    ),
]
TypeFilter = Annotated[
    str | None,
    Field(description="Only concepts of this type (as search's type: filter, any case)"),
]
TagFilter = Annotated[
    str | None, Field(description="Only concepts with this tag (as search's tag: filter)")
]
Prefix = Annotated[str, Field(description="Only concept IDs starting with this text, e.g. tables/")]
Offset = Annotated[
    int, Field(description="How many concepts to skip: the previous page's next_offset", ge=0)
]
PageSize = Annotated[int, Field(description="How many concepts one page holds", ge=1, le=MAX_PAGE)]

READ_ONLY = {"read_only_hint": True, "idempotent_hint": True, "destructive_hint": False}


class _Tool(Tool):
    """A tool whose failures are one line for the model to read: a
    CtindexError's own message, or which argument was refused and why
    (instead of the SDK's `Error executing tool ...` and pydantic's
    multi-line report with documentation URLs)."""

    async def run(
        self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False
    ) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_refused(self.name, cause)) from None
            if isinstance(cause, CtindexError):
                raise ToolError(shown(str(cause))) from None
            raise


def _refused(tool: str, error: ValidationError) -> str:
    """`search: limit: must be less than or equal to 100 (got 500)`, one line."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "arguments"
        said = item["msg"][:1].lower() + item["msg"][1:]
        got = "" if item["type"] == "missing" else f" (got {_short(item.get('input'))})"
        parts.append(f"{where}: {said}{got}")
    return f"{tool}: " + "; ".join(parts)


def _short(value: object) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 40 else text[:37] + "..."


def _described(fn: Callable[..., object]) -> str:
    """A docstring as the model reads it: no indentation, each paragraph one line."""
    paragraphs = inspect.cleandoc(fn.__doc__ or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _tool(fn: Callable[..., object], title: str, schema: str) -> Tool:
    tool = _Tool.from_function(
        fn,
        title=title,
        description=_described(fn),
        annotations=ToolAnnotations(title=title, open_world_hint=False, **READ_ONLY),
        structured_output=True,
    )
    # The SDK derives `{"type": "object", "additionalProperties": true}` from
    # `dict[str, object]`; the shipped schema says what the document holds (the
    # client checks each result against it).
    tool.fn_metadata.output_schema = schemas.bundled(schema)
    return tool


def build(root: str | Path) -> tuple[MCPServer, Index]:
    """The server and the Index it answers from (tests call the tools in process too)."""
    from ctindex.service.version import version

    index = Index(root)

    def search(query: Query, limit: Limit = 10, direct: Direct = False) -> dict[str, object]:
        """Search the concepts: up to `limit` ranked results (id, scope, path, title,
        type, tags, score, snippet), the total number of matches, and the freshness
        statement."""
        return _wire_safe(index.search(query, limit=limit, direct=direct).to_json())

    def get_concept(id: ConceptId, scope: Scope = None) -> dict[str, object]:
        """Read one concept from its file: frontmatter, title, body, links. An unknown
        ID fails with the closest IDs; an ID held by several scopes fails with their
        paths (pass `scope`, or the path)."""
        return _wire_safe(index.get(id, scope=scope).to_json())

    def list_concepts(
        type: TypeFilter = None,
        tag: TagFilter = None,
        prefix: Prefix = "",
        offset: Offset = 0,
        limit: PageSize = 50,
    ) -> dict[str, object]:
        """Browse the concepts, ordered by ID then path, a page at a time: id, scope,
        path, title, type and tags of each, the total matching the filters, and
        `next_offset` (null after the last page) to pass as `offset` for the next."""
        page = index.concepts(type=type, tag=tag, prefix=prefix, offset=offset, limit=limit)
        return _wire_safe(page.to_json())

    def why(path: ProjectPath) -> dict[str, object]:
        """Why a path is or is not indexed: the reason (included, excluded,
        outside-scope, ...), the scope, pattern and origin that decided, and a hint (the
        command that would bring a path beneath no scope into one)."""
        return _wire_safe(why_answer(index, path))

    def status() -> dict[str, object]:
        """Index and watcher metrics: generation, documents, segments, bytes, the
        watcher's lane and backend, the last reconciliation."""
        return _wire_safe(index.status().document)

    tools = [
        _tool(search, "Search concepts", "search"),
        _tool(get_concept, "Read a concept", "show"),
        _tool(list_concepts, "List concepts", "concepts"),
        _tool(why, "Explain a path's indexing", "why"),
        _tool(status, "Index status", "status"),
    ]
    server: MCPServer = MCPServer(
        "ctindex", instructions=INSTRUCTIONS, version=version(), tools=tools
    )
    return server, index


def why_answer(index: Index, path: str) -> dict[str, object]:
    """The `why` tool's document: `ctindex why --json PATH`'s, hint included
    (the command that would bring a path beneath no scope into one)."""
    from ctindex.service.why import why_document

    return why_document(index.plan(), [path], [index.why(path)])


def _wire_safe(document: Mapping[str, object]) -> dict[str, object]:
    """`document` with every string encodable as UTF-8: a surrogate (an
    undecodable byte of a file name, or one an argument carried in and the
    document echoes, like the query) becomes its escape text `\\udcff`, the
    spelling `ctindex --json` gives it. The MCP wire is UTF-8 JSON and
    refuses lone surrogates outright."""
    return {_safe_text(k): _safe_value(v) for k, v in document.items()}


def _safe_text(text: str) -> str:
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _safe_value(value: object) -> object:
    if isinstance(value, str):
        return _safe_text(value)
    if isinstance(value, dict):
        return {_safe_value(k): _safe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe_value(v) for v in value]
    return value


def serve(root: str | Path) -> int:
    """Run the server on stdin/stdout until the host closes them."""
    server, index = build(root)
    try:
        server.run("stdio")
    finally:
        index.close()
    return 0
