"""`ctindex mcp` (ctindex/mcp_server.py, docs/mcp.md) driven over stdio by the
official SDK's client: the tools are listed with their descriptions, bounds,
annotations and output schemas (the shipped ones), each is called and its
result validated against its declared schema, bad arguments give one clean
line, `list_concepts` pages cover every concept once, and a file changed
underneath the running server is in its next answer (against
tests/oracle.py), with watching off and with a daemon. And every message
gets its answer (docs/mcp.md, "Malformed messages"): each rule of `vet` in
process, then the real server fed malformed lines and hypothesis-generated
ones, each answered exactly as the docs' table says."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex import mcp_documents
from ctindex.api import Index
from tests import oracle
from tests.daemon_support import CliProject

mcp = pytest.importorskip("mcp")
jsonschema = pytest.importorskip("jsonschema")

MARK = "zqxv7mcpmark"
TIMEOUT_S = 120  # a hang guard only


async def _session(cp: CliProject, expect_mode: str) -> None:
    from mcp import Client, StdioServerParameters

    root = cp.root

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctindex", "-C", str(root), "mcp"]
    )
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        listed_tools = (await client.list_tools()).tools
        tools = {t.name: t for t in listed_tools}
        assert set(tools) == set(SCHEMAS)
        for tool in tools.values():
            _check_declared(tool)
        # The whole list a model reads before its first call: under 8 KB.
        wire = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed_tools]
        assert len(json.dumps(wire, separators=(",", ":"))) <= 8192
        # Prompts are not offered, so not advertised; concepts are resources.
        assert client.server_capabilities.prompts is None
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["ctindex://concept/{+id}"]

        async def call(name: str, **arguments: Any) -> dict[str, Any]:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result.content
            doc: dict[str, Any] = result.structured_content  # type: ignore[assignment]
            assert doc == json.loads(result.content[0].text)  # type: ignore[union-attr]
            jsonschema.validate(doc, tools[name].output_schema)  # type: ignore[arg-type]
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
        _same_order((await call("search", query=RANKED, limit=20))["results"], cp)
        await _pages_and_caps(call, client, root)
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
        read = await client.read_resource("ctindex://concept/tables/mcp_made")
        assert "no marker now" in read.contents[0].text  # type: ignore[union-attr]

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
    "search": mcp_documents.SEARCH,
    "get_concept": mcp_documents.CONCEPT,
    "list_concepts": mcp_documents.LISTING,
    "list_scopes": mcp_documents.SCOPES,
    "related": mcp_documents.RELATED,
    "why": mcp_documents.WHY,
    "status": mcp_documents.STATUS,
}


async def _pages_and_caps(call: Any, client: Any, root: Path) -> None:
    """Search pages, compact hits, a capped body, scopes, related concepts,
    and an unknown argument named with the closest one."""
    whole = await call("search", query="event", limit=12)
    paged: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None and offset < 12:
        page = await call("search", query="event", limit=5, offset=offset)
        assert page["offset"] == offset and page["total"] == whole["total"]
        paged += page["results"]
        offset = page["next_offset"]
    assert [h["path"] for h in paged[:12]] == [h["path"] for h in whole["results"]]
    hit = whole["results"][0]
    compact = {"id", "scope", "path", "title", "type", "tags", "score", "snippet", "matches"}
    assert set(hit) == compact
    for start, end in hit["matches"]:
        assert "event" in hit["snippet"][start:end].casefold()
    full = (await call("search", query="event", limit=1, full=True))["results"][0]
    assert "«" in full["marked"] and "match" in full
    concept = await call("get_concept", id=hit["id"], max_chars=100_000)
    assert concept["truncated"] is False and concept["next_offset"] is None
    step = max(1, concept["body_chars"] // 5)  # a handful of pages
    body: list[str] = []
    offset = 0
    while offset is not None:
        part = await call("get_concept", id=hit["id"], offset=offset, max_chars=step)
        assert len(part["body"]) <= step and part["body_chars"] == concept["body_chars"]
        assert part["truncated"] is (step < concept["body_chars"])
        body.append(part["body"])
        offset = part["next_offset"]
    assert "".join(body) == concept["body"]
    scopes = await call("list_scopes")
    assert scopes["documents"] == len(oracle.indexed_files(root))
    assert [s["root"] for s in scopes["scopes"]] and all(s["documents"] for s in scopes["scopes"])
    tagged = next(c for c in (await call("list_concepts", limit=200))["concepts"] if c["tags"])
    near = await call("related", id=tagged["id"], scope=tagged["scope"])
    for item in near["related"]:
        assert item["path"] != tagged["path"] and item["why"]
    refused = await client.call_tool("search", {"query": "event", "limt": 3})
    text = refused.content[0].text
    assert refused.is_error and text.startswith("search: unknown argument 'limt'")
    assert "did you mean 'limit'?" in text and "\n" not in text


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
    assert tool.output_schema == SCHEMAS[tool.name]
    assert tool.output_schema["additionalProperties"] is False  # no catch-all
    assert tool.input_schema["additionalProperties"] is False  # closed: a typo is an error


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


RANKED = "event user"  # two words that many ga4 concepts share, in several fields


def _same_order(mcp_results: list[dict[str, Any]], cp: CliProject) -> None:
    """Agents see the CLI's ranking: one query through MCP, `--json search`
    and the API gives the same concepts in the same order."""
    cli = json.loads(cp.cli("--json", "search", RANKED, "--limit", "20").stdout)
    with Index(cp.root) as index:
        api = index.search(RANKED, limit=20)
    order = [r["path"] for r in mcp_results]
    assert len(order) > 1
    assert order == [r["path"] for r in cli["results"]]
    assert order == [h.path for h in api.hits]


async def _every_page(call: Any, limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = await call("list_concepts", offset=offset, limit=limit)
        assert page["offset"] == offset and len(page["concepts"]) <= limit
        out += page["concepts"]
        offset = page["next_offset"]
    return out


def _run(cp: CliProject, mode: str) -> None:
    import anyio

    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT_S * 2):  # a hang guard, not a performance bound
            await _session(cp, mode)

    anyio.run(bounded)


def test_mcp_over_stdio_watch_off(make_cli_project: Callable[..., CliProject]) -> None:
    cp = make_cli_project(bundles=("ga4",), config={"watch": False})
    _run(cp, "reconcile-on-query")


@pytest.mark.slow
def test_mcp_over_stdio_with_a_daemon(make_cli_project: Callable[..., CliProject]) -> None:
    cp = make_cli_project(bundles=("ga4",))
    cp.cli("watch", "start")
    cp.wait_daemon()
    _run(cp, "watcher-clean")


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
    assert done.returncode == 2 and "pip install -e '.[mcp]'" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


# -- every message gets its answer (docs/mcp.md, "Malformed messages") ----------------

PARSE, INVALID, NO_METHOD, BAD_PARAMS = -32700, -32600, -32601, -32602
HANG_GUARD_S = 60  # waiting for one answer; a hang guard, not a performance bound

# The shapes the SDK alone left unanswered (the host waited forever), each
# with the code and id of its answer.
SIX_SHAPES: list[tuple[str, bytes, int, int | str | None]] = [
    (
        "lone-surrogate-argument",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        b'"params":{"name":"search","arguments":{"query":"\\ud800"}}}',
        BAD_PARAMS,
        1,
    ),
    ("float-id", b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', INVALID, None),
    (
        "params-list",
        b'{"jsonrpc":"2.0","id":"p","method":"tools/list","params":[]}',
        BAD_PARAMS,
        "p",
    ),
    ("jsonrpc-missing", b'{"id":3,"method":"tools/list"}', INVALID, 3),
    ("jsonrpc-1.0", b'{"jsonrpc":"1.0","id":4,"method":"tools/list"}', INVALID, 4),
    ("method-null", b'{"jsonrpc":"2.0","id":5,"method":null}', INVALID, 5),
    ("batch", b'[{"jsonrpc":"2.0","id":6,"method":"tools/list"}]', INVALID, None),
]

# Beyond the six: what vet answers itself, passes on, or leaves unanswered
# (a notification or a response: JSON-RPC answers neither).
VET_CASES: list[tuple[str, str, tuple[int, int | str | None] | None, bool]] = [
    ("not-json", "not json", (PARSE, None), True),
    ("nan", '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', (PARSE, None), True),
    ("not-utf8", '{"jsonrpc":"2.0","id":1,"method":"ping"}\udcff', (PARSE, None), True),
    ("empty-batch", "[]", (INVALID, None), True),
    ("scalar", "7", (INVALID, None), True),
    ("empty-object", "{}", (INVALID, None), True),
    ("id-null", '{"jsonrpc":"2.0","id":null,"method":"ping"}', (INVALID, None), True),
    ("id-true", '{"jsonrpc":"2.0","id":true,"method":"ping"}', (INVALID, None), True),
    ("id-object", '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', (INVALID, None), True),
    ("id-array", '{"jsonrpc":"2.0","id":[1],"method":"ping"}', (INVALID, None), True),
    ("id-surrogate", '{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}', (INVALID, None), True),
    ("method-number", '{"jsonrpc":"2.0","id":2,"method":3}', (INVALID, 2), True),
    ("method-missing", '{"jsonrpc":"2.0","id":2}', (INVALID, 2), True),
    ("no-id-method-number", '{"method":1,"params":"bar"}', (INVALID, None), True),
    (
        "params-null",
        '{"jsonrpc":"2.0","id":2,"method":"ping","params":null}',
        (BAD_PARAMS, 2),
        True,
    ),
    (
        "params-string",
        '{"jsonrpc":"2.0","id":2,"method":"ping","params":"x"}',
        (BAD_PARAMS, 2),
        True,
    ),
    (
        "surrogate-key",
        '{"jsonrpc":"2.0","id":2,"method":"ping","params":{"\\ud800":1}}',
        (BAD_PARAMS, 2),
        True,
    ),
    ("surrogate-method", '{"jsonrpc":"2.0","id":2,"method":"p\\udfff"}', (INVALID, 2), True),
    (
        "surrogate-member",
        '{"jsonrpc":"2.0","id":2,"method":"ping","x":["\\ud800"]}',
        (INVALID, 2),
        True,
    ),
    (
        "deeper-than-the-sdk-reads",
        '{"jsonrpc":"2.0","id":2,"method":"ping","params":{"a":' + "[" * 300 + "]" * 300 + "}}",
        (INVALID, 2),
        True,
    ),
    (
        "notification-params-list",
        '{"jsonrpc":"2.0","method":"x","params":[]}',
        (BAD_PARAMS, None),
        False,
    ),
    (
        "notification-surrogate",
        '{"jsonrpc":"2.0","method":"x","params":{"a":"\\ud800"}}',
        (BAD_PARAMS, None),
        False,
    ),
    ("response-unreadable", '{"jsonrpc":"2.0","id":8,"result":5}', (INVALID, None), False),
    ("request", '{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}', None, True),
    (
        "pair-of-surrogates",
        '{"jsonrpc":"2.0","id":9,"method":"x","params":{"q":"\\ud83d\\ude00"}}',
        None,
        True,
    ),
    ("big-id", '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}', None, True),
    ("unknown-method", '{"jsonrpc":"2.0","id":9,"method":"no/such"}', None, True),
    ("notification", '{"jsonrpc":"2.0","method":"notifications/initialized"}', None, True),
    ("response", '{"jsonrpc":"2.0","id":9,"result":{}}', None, True),
    ("error-response", '{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}', None, True),
]


@pytest.mark.parametrize(
    ("line", "refused", "answered"),
    [
        *[
            pytest.param(raw.decode(), (code, rid), True, id=name)
            for name, raw, code, rid in SIX_SHAPES
        ],
        *[
            pytest.param(line, refused, answered, id=name)
            for name, line, refused, answered in VET_CASES
        ],
    ],
)
def test_vet_answers_each_malformed_message(
    line: str, refused: tuple[int, int | str | None] | None, answered: bool
) -> None:
    from ctindex.mcp_server import vet

    refusal = vet(line + "\n")
    if refused is None:
        assert refusal is None
        return
    assert refusal is not None and (refusal.code, refusal.id) == refused, refusal
    assert refusal.answered is answered
    answer = json.loads(refusal.line())
    assert answer == {"jsonrpc": "2.0", "id": refused[1], "error": answer["error"]}
    assert answer["error"]["code"] == refused[0] and answer["error"]["message"].isprintable()
    refusal.line().encode("utf-8")  # never a surrogate on the wire


def test_the_vetted_input_passes_requests_and_answers_the_rest() -> None:
    """What the SDK's transport reads: only the messages it can serve; the
    refusals are on the output already, one line each, in order."""
    import io

    from ctindex.mcp_server import _Answers, _Vetted

    good = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n'
    lines = [b"[]\n", b"\n", b" \t\r\n", good, b"\xff\xfe\n", b'{"jsonrpc":"2.0","method":3}\n']
    lines += [b'{"jsonrpc":"2.0","method":"x","params":[]}\n', good.rstrip(b"\r\n")]
    out = io.BytesIO()
    answers = _Answers(out)
    vetted = _Vetted(io.BytesIO(b"".join(lines)), answers)
    assert [vetted.readline(), vetted.readline(), vetted.readline()] == [
        good.decode(),
        good.decode().rstrip("\r\n"),
        "",
    ]
    written = [json.loads(line) for line in out.getvalue().decode().splitlines()]
    assert [(a["id"], a["error"]["code"]) for a in written] == [
        (None, INVALID),
        (None, PARSE),
        (None, INVALID),
    ]


class _Server:
    """`ctindex mcp` as a process, talked to line by line: raw bytes out,
    answers (parsed) back through a reading thread."""

    def __init__(self, root: Path) -> None:
        import queue
        import subprocess
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ctindex", "-C", str(root), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.answers: queue.Queue[bytes] = queue.Queue()
        self.sent = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(line)
        self.answers.put(b"")  # end of output

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None and b"\n" not in raw
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        import queue

        try:
            line = self.answers.get(timeout=HANG_GUARD_S)
        except queue.Empty:
            pytest.fail(f"no answer within the hang guard ({HANG_GUARD_S} s)")
        assert line, f"the server ended (exit {self.proc.wait(HANG_GUARD_S)})"
        answer: dict[str, Any] = json.loads(line)  # each answer is one line of JSON
        assert answer.get("jsonrpc") == "2.0" and "id" in answer, answer
        return answer

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A valid request's answer (the answers of nothing else outstanding)."""
        self.sent += 1
        message = {"jsonrpc": "2.0", "id": f"ok-{self.sent}", "method": method}
        self.send(
            json.dumps({**message, **({} if params is None else {"params": params})}).encode()
        )
        answer = self.answer()
        assert answer["id"] == message["id"], answer
        return answer

    def answers_to(self, raw: bytes) -> list[dict[str, Any]]:
        """Every answer to `raw`: those written before a `ping` sent after it
        is answered, and, when `raw` is a request the SDK serves (its answer
        may overtake the ping's), until one more arrives. Nothing is waited
        for beyond an answer that is due."""
        self.sent += 1
        sentinel = f"sentinel-{self.sent}"
        self.send(raw)
        self.send(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode())
        got: list[dict[str, Any]] = []
        while True:
            answer = self.answer()
            if answer["id"] == sentinel:
                assert answer == {"jsonrpc": "2.0", "id": sentinel, "result": {}}, answer
                break
            got.append(answer)
        if not got and _served_by_the_sdk(raw):
            got.append(self.answer())
        return got

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(HANG_GUARD_S) == 0


def _initialised(root: Path) -> _Server:
    server = _Server(root)
    hello = server.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"},
        },
    )
    assert "result" in hello, hello
    server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return server


# What docs/mcp.md "Malformed messages" says a line gets, written from the
# table there (not from ctindex/mcp_server.py): (code, id) of the error
# answering it; None when no answer is due (blank, a notification, a
# response); SDK when the SDK answers (a result, or its own error).
SDK = (0, None)


def _expected(raw: bytes) -> tuple[int, int | str | None] | None:
    if not raw.strip(b" \t\r"):
        return None
    try:
        text = raw.decode("utf-8")
        message = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return (PARSE, None)
    if not isinstance(message, dict):
        return (INVALID, None)
    if "method" not in message and ("result" in message or "error" in message):
        return None
    rid = message.get("id")
    if "id" in message and not (
        (isinstance(rid, int) and not isinstance(rid, bool))
        or (isinstance(rid, str) and not _has_surrogate(rid))
    ):
        return (INVALID, None)
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return (INVALID, rid)
    if "id" not in message:
        return None
    if "params" in message and not isinstance(message["params"], dict):
        return (BAD_PARAMS, rid)
    if _has_surrogate(message.get("params")):
        return (BAD_PARAMS, rid)
    if _has_surrogate({k: v for k, v in message.items() if k != "params"}):
        return (INVALID, rid)
    return SDK


def _refuse_constant(name: str) -> object:
    raise ValueError(name)


def _has_surrogate(value: object) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(value, ensure_ascii=False))


def _served_by_the_sdk(raw: bytes) -> bool:
    return _expected(raw) == SDK


def _check(server: _Server, raw: bytes) -> None:
    expected = _expected(raw)
    got = server.answers_to(raw)
    if expected is None:
        assert got == [], (raw, got)
        return
    assert len(got) == 1, (raw, got)
    answer = got[0]
    if expected == SDK:
        rid = json.loads(raw)["id"]
        assert answer["id"] == rid and ("result" in answer or "error" in answer), (raw, answer)
        if json.loads(raw)["method"] == "no/such":
            assert answer["error"]["code"] == NO_METHOD, (raw, answer)
        return
    code, rid = expected
    assert answer["id"] == rid and answer["error"]["code"] == code, (raw, answer)
    assert answer["error"]["message"], (raw, answer)


def _messages() -> Any:
    """Lines for the fuzz: arbitrary JSON values; message-shaped objects with
    every member arbitrary or absent; messages whose envelope is sound but
    whose id (or its absence, a notification) and params are arbitrary; tool
    calls with arbitrary arguments; arbitrary bytes. Text may hold lone
    surrogates (written as JSON escapes)."""
    from hypothesis import strategies as st

    lone = st.characters(categories=["Cs"])  # lone surrogates: JSON escapes, like \ud800
    text = st.text(alphabet=st.characters() | lone, max_size=8)
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=8,
    )
    objects = st.dictionaries(text, values, max_size=3)
    ids = st.integers() | text.filter(lambda t: not t.startswith("sentinel-")) | values
    methods = st.sampled_from(["ping", "tools/list", "no/such"])
    shaped = st.fixed_dictionaries(
        {},
        optional={
            "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | values,
            "id": ids,
            "method": methods | values,
            "params": objects | values,
        },
    )
    sound = st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "method": methods | text},
        optional={"id": ids, "params": objects | values},
    )
    arguments = st.fixed_dictionaries(
        {"query": text | values}, optional={"limit": st.integers() | values}
    )
    calls = st.builds(
        lambda rid, args: {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "search", "arguments": args},
        },
        st.integers(),
        arguments,
    )
    as_json = (values | shaped | sound | calls).map(lambda v: json.dumps(v).encode())
    as_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" "))
    return as_json | as_bytes


def test_every_message_gets_one_answer_over_stdio(
    make_cli_project: Callable[..., CliProject],
) -> None:
    """The real server as a process: each of the six shapes, then generated
    lines, each get exactly the answer docs/mcp.md promises (one error with
    its code and id, or none for a notification), and the server serves a
    valid request after all of them."""
    from hypothesis import HealthCheck, given, settings

    cp = make_cli_project(bundles=("ga4",), config={"watch": False})
    server = _initialised(cp.root)
    try:
        for name, raw, code, rid in SIX_SHAPES:
            assert _expected(raw) == (code, rid), name  # the table agrees with the docs' rules
            got = server.answers_to(raw)
            assert [(a["id"], a["error"]["code"]) for a in got] == [(rid, code)], (name, got)

        @settings(
            max_examples=80,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(raw=_messages())
        def one(raw: bytes) -> None:
            _check(server, raw)

        one()
        answer = server.request(
            "tools/call", {"name": "search", "arguments": {"query": "event", "limit": 1}}
        )
        assert answer["result"]["isError"] is False
        assert answer["result"]["structuredContent"]["results"], answer
    finally:
        server.close()
