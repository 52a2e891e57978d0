"""`ctindex mcp`: ctindex as a Model Context Protocol server over stdio
(docs/mcp.md), built with the official Python SDK (`mcp`, the optional
extra `mcp`: `pip install -e '.[mcp]'` in the checkout).

The server holds one long-lived ``ctindex.Index`` for the project, so an
agent's queries reuse the open generation, and every answer still goes
through the freshness step of the CLI (ctindex/query/freshness.py): a file
changed underneath the server is in the next answer. Each tool's result is
a document made for a model's context window (ctindex/mcp_documents.py:
compact hits, pages, a capped body), carries its freshness statement, and
is declared with its output schema; input schemas are closed, and an
unknown argument is refused with the closest one named.

Every parameter has a description and its bounds in the input schema; every
tool is annotated read-only and idempotent (it changes no concept and no
configuration: bringing the index up to date is a cache's work). A failure
is a tool error of one line: the line the CLI would print (a malformed
query, an unknown or ambiguous ID, a configuration that cannot be honoured)
or, for arguments outside the input schema, which argument and why. The
server keeps running.

Every message on stdin is vetted before the SDK's stdio transport reads it
(`vet`, docs/mcp.md "Malformed messages"): what the SDK would drop without a
word (a line that is not UTF-8 or not JSON, a batch, a wrong `jsonrpc`, `id`
or `method`, `params` that are not an object, a lone surrogate) is answered
here with the JSON-RPC error for it, and the next line is read. Why a layer
of our own, in front of the SDK's transport: docs/decisions/mcp-wire.md.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from pydantic import Field, ValidationError

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
    "(by type, tag or ID prefix, a page at a time; `list_scopes` for the bundles), then "
    "`get_concept` with a hit's `id` to read one, `related` for its neighbours. Every answer's "
    "`freshness` says how it was proven current: `watcher-clean`, `reconcile-on-query`, "
    "`fallback` (with a reason) or `direct` (read from the files)."
)

MAX_SEARCH = 100  # the most results one `search` call returns
MAX_PAGE = 200  # the largest `list_concepts` page

QUERY_HELP = (
    'Words (all must match), "a phrase", prefix*, -excluded, a OR b, ( groups ), and '
    "field:value for title, description, tags, type, id, path; accents fold (docs/search.md)"
)

# Each tool's arguments: descriptions and bounds land in its input schema.
Query = Annotated[str, Field(description=QUERY_HELP, min_length=1)]
Limit = Annotated[int, Field(description="Hits per page", ge=1, le=MAX_SEARCH)]
Direct = Annotated[
    bool,
    Field(description="Read the files, not the index (slower)"),
]
ConceptId = Annotated[
    str,
    Field(
        description="A concept ID as search or list_concepts gives it, or a project path",
        min_length=1,
    ),
]
Scope = Annotated[
    str | None,
    Field(description="The scope root, where several scopes hold the ID"),
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
Offset = Annotated[int, Field(description="The previous page's next_offset", ge=0)]
PageSize = Annotated[int, Field(description="Concepts per page", ge=1, le=MAX_PAGE)]
RankOffset = Annotated[int, Field(description="The previous page's next_offset", ge=0)]
Full = Annotated[bool, Field(description="Add the marked snippet and the match tier")]
BodyOffset = Annotated[int, Field(description="The previous answer's next_offset", ge=0)]
MaxChars = Annotated[int, Field(description="Body characters per page", ge=1, le=100_000)]
RelatedLimit = Annotated[int, Field(description="At most this many", ge=1, le=50)]
CONCEPT_URI = "ctindex://concept/{+id}"

READ_ONLY = {"read_only_hint": True, "idempotent_hint": True, "destructive_hint": False}


class _Tool(Tool):
    """A tool whose failures are one line for the model to read: a
    CtindexError's own message, or which argument was refused and why
    (instead of the SDK's `Error executing tool ...` and pydantic's
    multi-line report with documentation URLs)."""

    async def run(
        self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False
    ) -> Any:
        known = list(self.parameters.get("properties", {}))
        for name in arguments:
            if name not in known:
                raise ToolError(_unknown_argument(self.name, name, known))
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


def _unknown_argument(tool: str, name: str, known: list[str]) -> str:
    """`search: unknown argument 'limt'; did you mean 'limit'? (it takes query, ...)`"""
    from ctindex.base.suggest import close_matches, did_you_mean

    hint = did_you_mean(close_matches(name, known, 1), quote=True)
    takes = ", ".join(known) or "no arguments"
    return f"{tool}: unknown argument {_short(name)}{hint} (it takes {takes})"


def _short(value: object) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 40 else text[:37] + "..."


def _described(fn: Callable[..., object]) -> str:
    """A docstring as the model reads it: no indentation, each paragraph one line."""
    paragraphs = inspect.cleandoc(fn.__doc__ or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _tool(fn: Callable[..., object], title: str, schema: Mapping[str, object]) -> Tool:
    tool = _Tool.from_function(
        fn,
        title=title,
        description=_described(fn),
        annotations=ToolAnnotations(title=title, open_world_hint=False, **READ_ONLY),
        structured_output=True,
    )
    # The SDK derives `{"type": "object", "additionalProperties": true}` from
    # `dict[str, object]`; the declared schema says what the document holds (the
    # client checks each result against it).
    tool.fn_metadata.output_schema = dict(schema)
    # Closed: an argument the tool does not take is refused (`_Tool.run`
    # names the closest), not silently ignored.
    tool.parameters["additionalProperties"] = False
    tool.parameters.pop("title", None)
    for prop in tool.parameters.get("properties", {}).values():
        prop.pop("title", None)  # pydantic's "Query" beside "query": bytes a model pays for
    return tool


def build(root: str | Path) -> tuple[MCPServer, Index]:
    """The server and the Index it answers from (tests call the tools in process too)."""
    from ctindex import mcp_documents as docs
    from ctindex.service.version import version

    index = Index(root)

    def search(
        query: Query,
        limit: Limit = 10,
        offset: RankOffset = 0,
        full: Full = False,
        direct: Direct = False,
    ) -> dict[str, object]:
        """Search the concepts: a page of ranked hits, each with its snippet and match
        offsets; the total; next_offset; how fresh the answer is."""
        return _wire_safe(docs.search(index, query, limit, offset, full, direct))

    def get_concept(
        id: ConceptId, scope: Scope = None, offset: BodyOffset = 0, max_chars: MaxChars = 8000
    ) -> dict[str, object]:
        """Read one concept from its file: frontmatter, body (a page of it: truncated
        and next_offset say if there is more), links. An unknown ID names the closest."""
        return _wire_safe(docs.concept(index.get(id, scope=scope), offset, max_chars))

    def list_concepts(
        type: TypeFilter = None,
        tag: TagFilter = None,
        prefix: Prefix = "",
        offset: Offset = 0,
        limit: PageSize = 50,
    ) -> dict[str, object]:
        """Browse the concepts in ID order, a page at a time (filter by type, tag or
        ID prefix); next_offset is null after the last page."""
        page = index.concepts(type=type, tag=tag, prefix=prefix, offset=offset, limit=limit)
        listed = page.to_json()
        listed["freshness"] = docs.freshness(page.freshness)
        return _wire_safe(listed)

    def list_scopes() -> dict[str, object]:
        """The scopes (bundle roots) of the project: root, provider and how many
        concepts each holds."""
        return _wire_safe(docs.scopes(index))

    def related(id: ConceptId, scope: Scope = None, limit: RelatedLimit = 10) -> dict[str, object]:
        """Concepts near one: those it links to, then those sharing its tags (most
        shared first), each with why."""
        return _wire_safe(docs.related(index, id, scope, limit))

    def why(path: ProjectPath) -> dict[str, object]:
        """Why a path is or is not indexed: the reason, the scope, pattern and origin
        that decided, and a hint."""
        return _wire_safe(why_answer(index, path))

    def status() -> dict[str, object]:
        """Index and watcher state: generation, documents, staleness, problem,
        watcher lane, last reconciliation."""
        return _wire_safe(docs.status(index))

    tools = [
        _tool(search, "Search concepts", docs.SEARCH),
        _tool(get_concept, "Read a concept", docs.CONCEPT),
        _tool(list_concepts, "List concepts", docs.LISTING),
        _tool(list_scopes, "List scopes", docs.SCOPES),
        _tool(related, "Related concepts", docs.RELATED),
        _tool(why, "Explain a path's indexing", docs.WHY),
        _tool(status, "Index status", docs.STATUS),
    ]
    server: MCPServer = _VettedServer(
        "ctindex", instructions=INSTRUCTIONS, version=version(), tools=tools
    )
    _concept_resource(server, index)
    # No prompts to offer: the capability is not advertised, and prompts/list
    # is "method not found" (the SDK registers both handlers on its own).
    for method in ("prompts/list", "prompts/get"):
        server._lowlevel_server._request_handlers.pop(method, None)
    return server, index


def _concept_resource(server: MCPServer, index: Index) -> None:
    """Each concept as a resource: `ctindex://concept/{+id}`, the file's text
    (what `ctindex show ID` prints), read when asked."""

    @server.resource(
        CONCEPT_URI,
        name="concept",
        title="A concept document",
        description="One concept's file (Markdown with its frontmatter) by its ID or ref",
        mime_type="text/markdown",
    )
    def concept(id: str) -> str:
        try:
            return index.get(id).text
        except CtindexError as exc:
            raise ValueError(shown(str(exc))) from None


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


# -- the wire: an answer for every request ------------------------------------------

log = logging.getLogger(__name__)

# A surrogate code point in text read from the wire: either a byte that is not
# UTF-8 (decoded with surrogateescape) or, after json.loads, an escape such as
# "\ud800" that stands for no character. UTF-8 can carry neither.
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_SPACE = " \t\r\n"  # RFC 8259's whitespace: a line of only these is blank
_NO_CHARACTER = "holds a lone surrogate, which is no character and not UTF-8"


@dataclass(frozen=True)
class Refusal:
    """Why a line is not handed to the SDK, as the JSON-RPC error answering
    it. `answered` is False for a notification or a response: JSON-RPC
    answers neither, so the refusal is only logged."""

    code: int
    message: str
    id: int | str | None = None
    answered: bool = True

    def line(self) -> str:
        """The error response, one line of UTF-8 JSON."""
        error = {"code": self.code, "message": shown(self.message)}
        answer = {"jsonrpc": "2.0", "id": self.id, "error": error}
        return json.dumps(answer, separators=(",", ":")) + "\n"


def vet(line: str) -> Refusal | None:
    """None when the SDK's stdio transport can read `line` (one line of the
    wire, decoded with surrogateescape) as a message; else the refusal. The
    rules, in order, are docs/mcp.md's "Malformed messages"."""
    if _SURROGATE.search(line):
        return Refusal(PARSE_ERROR, "Parse error: the line is not UTF-8 text")
    try:
        message: object = json.loads(line, parse_constant=_not_json)
    except RecursionError:
        return Refusal(PARSE_ERROR, "Parse error: JSON nested too deeply to read")
    except ValueError as exc:  # json.JSONDecodeError, or a number Python cannot hold
        return Refusal(PARSE_ERROR, f"Parse error: not JSON ({exc})")
    if isinstance(message, list):
        return Refusal(
            INVALID_REQUEST,
            "Invalid Request: a batch (JSON array); MCP takes one message per line, "
            "each a JSON object",
        )
    if not isinstance(message, dict):
        return Refusal(INVALID_REQUEST, f"Invalid Request: not a JSON object: {_brief(message)}")
    fields: dict[str, object] = message
    if "method" not in fields and ("result" in fields or "error" in fields):
        # A response to a request of the server's: answering it could start
        # an exchange of errors about errors. The SDK reads it, or it is logged.
        problem = _unreadable(line)
        return None if problem is None else Refusal(INVALID_REQUEST, problem, answered=False)
    return _vet_request(fields, line)


def _vet_request(fields: dict[str, object], line: str) -> Refusal | None:
    """`vet` for what is neither a batch nor a response: a request (with an
    `id`) or a notification (without one)."""
    raw_id = fields.get("id")
    request_id: int | str | None = None
    if "id" in fields:
        if isinstance(raw_id, bool) or not isinstance(raw_id, (int, str)):
            return Refusal(
                INVALID_REQUEST,
                f"Invalid Request: id must be a string or an integer, not {_brief(raw_id)}",
            )
        if isinstance(raw_id, str) and _SURROGATE.search(raw_id):
            return Refusal(
                INVALID_REQUEST, "Invalid Request: the id holds a lone surrogate (not UTF-8)"
            )
        request_id = raw_id
    if fields.get("jsonrpc") != "2.0":
        said = _brief(fields["jsonrpc"]) if "jsonrpc" in fields else "missing"
        return Refusal(
            INVALID_REQUEST, f'Invalid Request: jsonrpc must be "2.0", not {said}', request_id
        )
    if not isinstance(fields.get("method"), str):
        said = _brief(fields["method"]) if "method" in fields else "missing"
        return Refusal(
            INVALID_REQUEST, f"Invalid Request: method must be a string, not {said}", request_id
        )
    # The envelope is sound: from here on, a notification is not answered.
    answered = "id" in fields
    if "params" in fields and not isinstance(fields["params"], dict):
        said = _brief(fields["params"])
        return Refusal(
            INVALID_PARAMS,
            f"Invalid params: params must be an object, not {said}",
            request_id,
            answered,
        )
    where = _lone_surrogate(fields.get("params"), "params")
    if where is not None:
        said = f"Invalid params: {where} {_NO_CHARACTER}"
        return Refusal(INVALID_PARAMS, said, request_id, answered)
    where = _lone_surrogate({k: v for k, v in fields.items() if k != "params"}, "")
    if where is not None:
        return Refusal(
            INVALID_REQUEST, f"Invalid Request: {where} {_NO_CHARACTER}", request_id, answered
        )
    problem = _unreadable(line)
    return None if problem is None else Refusal(INVALID_REQUEST, problem, request_id, answered)


def _not_json(constant: str) -> object:
    """json.loads reads NaN, Infinity and -Infinity; JSON has no such thing."""
    raise ValueError(f"{constant} is not a JSON value")


def _brief(value: object) -> str:
    """A value as JSON, cut short for an error message."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _lone_surrogate(value: object, where: str) -> str | None:
    """Where in `value` (a dotted path from `where`) a string or a key holds a
    lone surrogate, or None. A loop, not recursion: a message may nest as
    deep as json.loads reads."""
    pending: list[tuple[str, object]] = [(where, value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "the message"
        elif isinstance(item, dict):
            for key, inner in item.items():
                inside = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    return inside
                pending.append((inside, inner))
        elif isinstance(item, list):
            pending.extend((f"{path}[{i}]", inner) for i, inner in enumerate(item))
    return None


def _unreadable(line: str) -> str | None:
    """Why the SDK's own reading of a message refuses `line`, or None. The
    check above is ours; this is the SDK's (its pydantic models), so what the
    rules above let through is never dropped there without an answer."""
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        said = f"{where}: {first['msg']}" if where else first["msg"]
        return f"Invalid Request: the server cannot read this message ({said})"
    return None


class _Answers(io.TextIOWrapper):
    """The wire's output. Each write is whole lines, written and flushed under
    one lock: the SDK's answers (from its writer's thread) and the refusals
    (from the reading thread) never interleave."""

    def __init__(self, wire: BinaryIO) -> None:
        super().__init__(wire, encoding="utf-8", newline="\n")
        self._lock = threading.Lock()

    def write(self, text: str, /) -> int:
        with self._lock:
            written = super().write(text)
            super().flush()
        return written

    def flush(self) -> None:
        with self._lock:
            super().flush()


class _Vetted(io.TextIOWrapper):
    """The wire's input as the SDK's stdio transport reads it (line by line,
    through `readline`): only the lines `vet` passes. A refused request is
    answered on `answers` here, a refused notification logged; blank lines
    are no message and are skipped."""

    def __init__(self, wire: BinaryIO, answers: _Answers) -> None:
        # surrogateescape: bytes that are not UTF-8 reach `vet` as surrogates.
        # newline="\n": MCP's stdio framing; a CR is JSON whitespace, not a line end.
        super().__init__(wire, encoding="utf-8", errors="surrogateescape", newline="\n")
        self._answers = answers

    # typeshed's TextIOBase.readline overrides IOBase's (bytes) the same way.
    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        while True:
            line = super().readline(size)
            if not line:
                return line  # end of input
            if not line.strip(_JSON_SPACE):
                continue
            refusal = vet(line)
            if refusal is None:
                return line
            if refusal.answered:
                self._answers.write(refusal.line())
            else:
                log.warning("ignored a message that cannot be read: %s", shown(refusal.message))


@contextlib.contextmanager
def _wire() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """The protocol's own copies of stdin and stdout. While serving, fd 0
    reads the null device and fd 1 writes to stderr, so a stray print or a
    child process never touches the protocol: what the SDK's stdio transport
    arranges when it opens the streams itself, and skips when handed
    streams, as `_VettedServer` hands it. Where descriptors cannot be copied
    or moved, fd 0 and fd 1 are served in place.

    The files are opened with closefd=False: a worker thread may still be
    blocked reading the descriptor when serving ends; it is never closed
    under it (the process ends soon after)."""
    sys.stdout.flush()
    wires = {0: 0, 1: 1}  # each standard descriptor -> the protocol's copy of it
    moved: list[int] = []
    with contextlib.suppress(OSError):
        for fd in (0, 1):
            wires[fd] = os.dup(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            for fd, aside in ((0, null), (1, 2)):
                os.dup2(aside, fd)
                moved.append(fd)
        finally:
            os.close(null)
    try:
        yield (
            os.fdopen(wires[0], "rb", closefd=False),
            os.fdopen(wires[1], "wb", closefd=False),
        )
    finally:
        for fd in moved:
            os.dup2(wires[fd], fd)


class _VettedServer(MCPServer):
    """The SDK's server, on stdio through `_Vetted` and `_Answers`."""

    async def run_stdio_async(self) -> None:
        with _wire() as (wire_in, wire_out):
            answers = _Answers(wire_out)
            vetted = _Vetted(wire_in, answers)
            async with stdio_server(anyio.wrap_file(vetted), anyio.wrap_file(answers)) as (
                read_stream,
                write_stream,
            ):
                lowlevel = self._lowlevel_server
                options = lowlevel.create_initialization_options()
                await lowlevel.run(read_stream, write_stream, options)
