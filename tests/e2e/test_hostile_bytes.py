"""Hostile text fuzzed at every way in (docs/cli.md "Control characters in
output", "Usage errors", "Exit codes"; docs/api.md "Errors"; docs/mcp.md
"Errors").

tests/e2e/test_control_characters.py pins one hand-made hostile project;
tests/e2e/test_unrepresentable_input.py feeds text that can name no file
(NUL, lone surrogates) to every entry point. Here hypothesis makes the
hostile project itself: C0 and C1 controls, screen clears (ESC[2J),
conceals (ESC[8m), window-title sets (ESC]0;x BEL), carriage returns, bidi
overrides and isolates, line separators, bytes that are not UTF-8, in
folder and file names, frontmatter (title, type, tags, id) and bodies; and
the same in queries, command-line arguments and option values, the Python
API's arguments (wrong types included) and MCP tool arguments. Checked:

* every command answers with an exit code of its documented set, no
  traceback, one line on stderr for an error;
* text output (search, coloured or not, --paths, --ids, show, why,
  status --verbose) holds no raw control character of the data; coloured
  output differs from the uncoloured one by the renderer's own SGR codes
  only; --paths/--ids lines decode back to the names, -0 is their bytes;
* --json (and the API, and MCP) give the document's exact text back;
* a daemon renders what the process renders, for hostile documents and
  arguments alike (real processes, the daemon's query path);
* the API raises WrongType for a wrong type and nothing but CtindexErrors
  for hostile text; every MCP tools/call gets exactly one answer, and the
  server goes on serving.

Example counts are modest (the whole file is a few tens of seconds on two
cores); the subprocess timeouts are hang guards, never speed limits.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import ctindex
from ctindex.api import Index
from ctindex.base import printable
from ctindex.errors import CtindexError, WrongType
from ctindex.ipc import protocol
from tests.conftest import CliResult, cli_main, write_config
from tests.ctindex.base.test_printable import decode_field
from tests.daemon_support import PATIENT_ACK_S, CliProject
from tests.e2e.test_control_characters import DOC, DOC_ID, KEYS, _queries, write_hostile

pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses non-UTF-8 names")

HANG_GUARD_S = 120  # a hang, not a speed limit
SCOPE = "kb"  # the scope test_control_characters.write_hostile writes into
EXIT_CODES = {0, 1, 2}  # a hit or a decision, none, a refusal (docs/cli.md "Exit codes")
FORGED = "1 of 1 matches \u00b7 generation 9 \u00b7 watcher-clean"

# What hostile text is made of: terminal sequences (CSI, OSC, the C1 CSI
# U+009B and OSC U+009D), single controls, bidi and line separators, the
# invisible characters that must stay as they are, backslashes that look
# like escapes, the snippet markers and a forged freshness line.
PIECES: tuple[str, ...] = (
    "\x1b[2J",
    "\x1b[8m",
    "\x1b[0m",
    "\x1b[31;1m",
    "\x1b]0;pwned\x07",
    "\x1b]8;;http://x\x1b\\",
    "\x1bc",
    "\x9b2J",
    "\x9d0;x\x9c",
    "\r",
    "\n",
    "\r\n",
    "\t",
    "\x00",
    "\x07",
    "\x08",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x7f",
    "\x85",
    "\x80",
    "\x9f",
    "\u202e",
    "\u202a",
    "\u2066",
    "\u2069",
    "\u2028",
    "\u2029",
    "\u200d",
    "\u200f",
    "\xa0",
    "\ufeff",
    "\\",
    "\\x1b",
    "\\u202e",
    "\\\\",
    "\u00ab",
    "\u00bb",
    FORGED,
    "\udcff",
    "\udc80",
    "\ud800",
)
# Bytes no UTF-8 decoder takes: a lone continuation, a truncated sequence,
# an encoded surrogate (CESU), an overlong slash, 0xff.
UNDECODABLE = (b"\xff", b"\x80", b"\xc3", b"\xe2\x80", b"\xed\xa0\x80", b"\xc0\xaf")

# docs/cli.md "Control characters in output", written from the docs rather
# than taken from ctindex/base/printable.py: C0 (newline apart: it ends a
# line), DEL, C1, the line and paragraph separators, bidi embeddings,
# overrides and isolates, and lone surrogates (a byte that is not UTF-8,
# as surrogateescape decodes it).
_NOT_C0 = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
RAW = re.compile(f"[\x00-\x09\x0b-\x1f{_NOT_C0}]")
# `show` prints the file's own tabs, newlines and CRLF line ends.
RAW_IN_SHOW = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_NOT_C0}]|\r(?!\n)")
# What the renderer paints with (ctindex/commands/search.py through termcolor):
# reset, bold, dark, red, magenta. Nothing else may remain once they are gone.
RENDERER_SGR = re.compile(r"\x1b\[(?:0|1|2|31|35)m")
TIMED = re.compile(r"\d+\.\d ms")  # the barrier's and the reconciliation's duration

_PROPERTY = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def examples(count: int, **more: Any) -> settings:
    """Hypothesis settings for a property of `count` examples."""
    return settings(_PROPERTY, max_examples=count, **more)


EXAMPLES = itertools.count()  # each example's own folder and marker word


def _encodable(piece: str) -> bool:
    try:
        os.fsencode(piece)
    except UnicodeEncodeError:
        return False
    return True


def hostile(*, nul: bool = True, surrogates: bool = True, size: int = 8) -> st.SearchStrategy[str]:
    """Text mixed of hostile pieces, control and format characters, any
    other character, and plain words."""
    pieces = [
        p
        for p in PIECES
        if (nul or "\x00" not in p) and (surrogates or not re.search("[\ud800-\udfff]", p))
    ]
    unwanted = "" if nul else "\x00"
    return st.lists(
        st.one_of(
            st.sampled_from(pieces),
            st.characters(categories=["Cc", "Cf", "Zl", "Zp"], exclude_characters=unwanted),
            st.characters(exclude_characters=unwanted),
            st.sampled_from(["a", " ", "word", "-", ":", '"', "*", "(", "OR"]),
        ),
        max_size=size,
    ).map("".join)


# A file or folder name: bytes, any but "/" and NUL, often not UTF-8.
_NAME_PIECES = sorted(
    {os.fsencode(p) for p in PIECES if "/" not in p and "\x00" not in p and _encodable(p)}
)
names = st.lists(
    st.one_of(
        st.sampled_from([*_NAME_PIECES, *UNDECODABLE]),
        st.binary(min_size=1, max_size=3).map(lambda b: b.replace(b"/", b"_").replace(b"\0", b"_")),
        st.characters(exclude_characters="/\x00").map(os.fsencode),
    ),
    max_size=6,
).map(lambda parts: b"".join(parts)[:100])


# -- checks ---------------------------------------------------------------------------


def raw_controls(text: str, *, show: bool = False) -> list[str]:
    """The characters of `text` that text output must never print raw."""
    return (RAW_IN_SHOW if show else RAW).findall(text)


def check_answer(got: CliResult, argv: object, *, text: bool = True) -> None:
    """The contract of every command's answer: a documented exit code, no
    traceback, one line on stderr for an error, and (text output) no raw
    control character on stdout or stderr, but for the renderer's colour."""
    assert got.code in EXIT_CODES, (argv, got)
    assert "Traceback" not in got.err, (argv, got.err)
    show = isinstance(argv, list) and argv[:1] == ["show"]
    if got.code == 2 or (show and got.code == 1):  # an error, or no such concept
        assert len(got.err.splitlines()) == 1, (argv, got.err)
    assert raw_controls(got.err) == [], (argv, got.err)
    if text:
        assert raw_controls(RENDERER_SGR.sub("", got.out), show=show) == [], (argv, got.out)


def untimed(text: str) -> str:
    return TIMED.sub("X ms", text)


# -- hostile documents ----------------------------------------------------------------


# What a YAML double-quoted scalar writes as an escape above U+009F: the
# YAML 1.1 line breaks, surrogates, the BOM and the two non-characters.
_YAML_ESCAPED = re.compile("[\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


def yaml_quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar: printable characters as they
    are, everything else (and the YAML 1.1 line breaks U+0085, U+2028,
    U+2029, and the BOM) as an escape."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code <= 0x7E or (code >= 0xA0 and not _YAML_ESCAPED.match(char)):
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out) + '"'


def _normal(text: str) -> str:
    """A frontmatter scalar as the provider keeps it: whitespace runs as one
    space (docs/provider.md)."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Doc:
    folder: bytes
    stem: bytes
    title: str
    type: str
    tags: tuple[str, ...]
    fid: str  # the frontmatter's `id` field (kept in `show`'s frontmatter)
    body: str
    broken: bytes  # appended raw: a NUL or bytes that are not UTF-8 make it unreadable

    def frontmatter(self, mark: str) -> dict[str, Any]:
        return {"title": f"{self.title} {mark}", "type": self.type, "tags": list(self.tags)}

    def data(self, mark: str) -> bytes:
        fields = self.frontmatter(mark)
        tags = ", ".join(map(yaml_quoted, fields["tags"]))
        block = (
            f"title: {yaml_quoted(fields['title'])}\ntype: {yaml_quoted(self.type)}\n"
            f"tags: [{tags}]\nid: {yaml_quoted(self.fid)}\n"
        )
        # The test's own encoder, checked against libyaml: what ctindex reads.
        assert yaml.load(block, Loader=yaml.CSafeLoader) == {**fields, "id": self.fid}
        text = f"---\n{block}---\n{self.body}\n{mark} here\n"
        return text.encode("utf-8") + self.broken


documents = st.builds(
    Doc,
    folder=names,
    stem=names,
    title=hostile(surrogates=False),
    type=hostile(surrogates=False, size=4),
    tags=st.lists(hostile(surrogates=False, size=4), max_size=3).map(tuple),
    fid=hostile(surrogates=False, size=4),
    body=hostile(nul=False, surrogates=False, size=12),
    broken=st.sampled_from([b"", b"", b"", b"\x00", b"\xff\xfe"]),
)


@dataclass(frozen=True)
class Written:
    doc: Doc
    key: bytes  # project-relative path
    mark: str

    @property
    def path(self) -> str:
        return os.fsdecode(self.key)

    @property
    def id(self) -> str:
        return self.path.removeprefix(f"{SCOPE}/").removesuffix(".md")

    @property
    def title(self) -> str:
        return _normal(f"{self.doc.title} {self.mark}")

    @property
    def tags(self) -> list[str]:
        kept: list[str] = []
        for tag in map(_normal, self.doc.tags):
            if tag and tag not in kept:
                kept.append(tag)
        return kept


@contextlib.contextmanager
def written(root: Path, docs: list[Doc]) -> Iterator[tuple[str, list[Written]]]:
    """`docs` in the scope, each in a folder of its own (removed after), and
    the marker word every one of them holds."""
    n = next(EXAMPLES)
    mark = f"zqhb{n}x"
    folders, made = [], []
    try:
        for i, doc in enumerate(docs):
            folder = f"f{n}-{i}".encode() + doc.folder
            key = SCOPE.encode() + b"/" + folder + b"/n" + doc.stem + b".md"
            folders.append(os.fsencode(root) + b"/" + SCOPE.encode() + b"/" + folder)
            os.makedirs(folders[-1])
            with open(os.fsencode(root) + b"/" + key, "wb") as handle:
                handle.write(doc.data(mark))
            made.append(Written(doc, key, mark))
        yield mark, made
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def check_search(run: Callable[..., CliResult], mark: str, docs: list[Written]) -> list[Any]:
    """search MARK in JSON, in text with and without colour, --paths, --ids:
    the exact text in JSON, the escaped text one line per name elsewhere.
    Returns the JSON hits."""
    readable = [w for w in docs if not w.doc.broken]
    found = run("--json", "search", mark)
    check_answer(found, "json", text=False)
    hits: list[Any] = json.loads(found.out)["results"]
    assert found.code == (0 if readable else 1), found
    assert sorted(h["path"] for h in hits) == sorted(w.path for w in readable), hits
    for w in readable:
        hit = next(h for h in hits if h["path"] == w.path)
        assert (hit["id"], hit["title"], hit["tags"]) == (w.id, w.title, w.tags), hit
        assert (hit["type"] or "") == _normal(w.doc.type), hit

    plain = run("search", mark, "--color=never")
    check_answer(plain, "search")
    # One line for each line of a result, whatever the names and text hold.
    lines = sum(2 + bool(h["snippet"]) for h in hits) + 1
    assert len(plain.out.splitlines()) == lines, plain.out
    # Colour adds the renderer's SGR codes and nothing else (markers asked
    # for, so the snippets read as without colour).
    coloured = run("search", mark, "--color=always", "--markers=\u00ab,\u00bb")
    check_answer(coloured, "coloured")
    assert untimed(RENDERER_SGR.sub("", coloured.out)) == untimed(plain.out), coloured.out
    assert readable == [] or RENDERER_SGR.search(coloured.out), coloured.out

    for flag, field in (("--paths", "path"), ("--ids", "id")):
        listed = run("search", mark, flag)
        check_answer(listed, flag)
        # Escaped one a line, and decoding each line gives the name back.
        assert [decode_field(line) for line in listed.out.splitlines()] == [
            h[field] for h in hits
        ], listed.out
    return hits


def check_show(run: Callable[..., CliResult], index: Index, w: Written) -> None:
    """show ID: the file with its controls escaped (tabs and CRLF kept), or
    one line and exit 2 for a file that is no readable document; in JSON
    and through the API, the exact text."""
    shown = run("show", w.id)
    check_answer(shown, ["show"])
    as_json = run("--json", "show", w.id)
    check_answer(as_json, "show --json", text=False)
    if w.doc.broken:
        assert shown.code == 2 and shown.out == "", shown
        return
    assert shown.code == 0, shown
    concept = json.loads(as_json.out)
    assert (concept["title"], concept["tags"]) == (w.title, w.tags), concept
    assert concept["frontmatter"]["id"] == w.doc.fid, concept
    assert concept["body"] == f"{w.doc.body}\n{w.mark} here\n", concept
    hits = [(h.path, h.title) for h in index.search(w.mark).hits if h.path == w.path]
    assert hits == [(w.path, w.title)] and index.get(w.id).title == w.title


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One project for the in-process properties: watching off (no daemon:
    every answer is made in this process), test_control_characters' hostile
    documents in it, and each example's own documents while it runs."""
    root = tmp_path_factory.mktemp("hostile-bytes") / "project"
    (root / ".git").mkdir(parents=True)
    write_config(root, SCOPE, watch=False)
    write_hostile(root)
    return root


@pytest.fixture(scope="module")
def index(project: Path) -> Iterator[Index]:
    with Index(project) as opened:
        yield opened


@examples(20)
@given(docs=st.lists(documents, min_size=1, max_size=2))
def test_hostile_documents_print_escaped_and_round_trip(
    project: Path, index: Index, docs: list[Doc]
) -> None:
    def run(*args: str) -> CliResult:
        return cli_main(*args, cwd=project)

    with written(project, docs) as (mark, made):
        check_search(run, mark, made)
        first = made[0]
        check_show(run, index, first)
        why = run("why", first.path)
        check_answer(why, "why")
        assert why.code == 0 and len(why.out.splitlines()) == 2, why
        status = run("status", "--verbose")
        check_answer(status, "status")
        for w in made:  # a provider error names its file, escaped
            assert (printable.field(w.path) in status.out) == bool(w.doc.broken), status.out


@pytest.mark.parametrize("name", [b"tab\t", b"space ", b"back\\slash", b"sep\x1c"])
def test_show_takes_every_id_search_lists(project: Path, index: Index, name: bytes) -> None:
    """Every ID `search` gives names its concept for `show` and `Index.get`,
    and so does its path (docs/cli.md "show"): found by the fuzz above."""
    doc = Doc(b"", name, "Named", "", (), "", "body", b"")
    with written(project, [doc]) as (mark, (w,)):
        (hit,) = json.loads(cli_main("--json", "search", mark, cwd=project).out)["results"]
        assert (hit["id"], hit["path"]) == (w.id, w.path)
        for asked in (w.id, w.path):
            shown = cli_main("show", asked, cwd=project)
            assert shown.code == 0, shown
        assert index.get(w.id).path == w.path


# -- hostile arguments, in process ------------------------------------------------------

# Command lines with one hostile argument H (in process, so NUL and lone
# surrogates too). `zebraword` is in test_control_characters' documents.
ARGV: dict[str, Callable[[str], list[str]]] = {
    "query": lambda h: ["search", h],
    "query-or": lambda h: ["search", f"zebraword OR {h}", "--color=always"],
    "query-field": lambda h: ["search", f'title:"{h}" OR zebraword'],
    "query-paths": lambda h: ["search", "--paths", h, "OR", "zebraword"],
    "limit": lambda h: ["search", "zebraword", "--limit", h],
    "limit=": lambda h: ["search", "zebraword", f"--limit={h}"],
    "color": lambda h: ["--color", h, "search", "zebraword"],
    "markers": lambda h: ["search", "zebraword", "--markers", h],
    "option": lambda h: ["search", "zebraword", f"--{h}"],
    "command": lambda h: [h],
    "project": lambda h: ["-C", h, "status"],
    "show": lambda h: ["show", h],
    "show-scope": lambda h: ["show", DOC_ID, "--scope", h],
    "why": lambda h: ["why", h],
    "why-C": lambda h: ["-C", h, "why", "doc.md"],
    "why-scope": lambda h: ["why", f"{SCOPE}/{h}.txt", f"{SCOPE}/{h}"],
    "strict": lambda h: ["update", f"--strict={h}"],
}
COMMANDS = {"init", "scopes", "why", "status", "update", "rebuild", "verify", "search"}
COMMANDS |= {"watch", "show", "mcp"}


@examples(100)
@given(kind=st.sampled_from(sorted(ARGV)), text=hostile(), as_json=st.booleans())
@example(kind="markers", text="\x1b[8m,\x1b[0m", as_json=False)
@example(kind="limit", text="\x1b[2J\u202e", as_json=False)
@example(kind="option", text="\x1b]0;x\x07\r", as_json=True)
def test_hostile_arguments_get_their_answer_in_one_clean_line(
    project: Path, kind: str, text: str, as_json: bool
) -> None:
    assume(text not in COMMANDS)  # `mcp` would serve this process's stdin
    argv = ARGV[kind](text)
    got = cli_main(*(["--json", *argv] if as_json else argv), cwd=project)
    # --markers holding a control character are refused (ctindex/cli.py _markers).
    check_answer(got, argv, text=not as_json)
    if as_json and got.code == 2:
        error = json.loads(got.out)["error"]  # the same line, as JSON (docs/cli.md)
        line = got.err.rstrip("\n")
        assert line in (f"ctindex: {error['message']}", f"ctindex {error['message']}"), got
    elif as_json:
        json.loads(got.out)


# -- real processes, and the daemon's query path --------------------------------------


@pytest.fixture(scope="module")
def daemon_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliProject]:
    """A project with watching on and its daemon running: `python -m ctindex
    search` processes are answered by it (ctindex/fast_entry.py)."""
    root = tmp_path_factory.mktemp("hostile-daemon") / "project"
    made = CliProject(root, (), {"scopes": [{"root": SCOPE, "provider": "okf-markdown"}]})
    (root / SCOPE).mkdir()
    (root / SCOPE / "plain.md").write_text("# Plain\n\nnothing hostile\n")
    try:
        made.cli("watch", "start")
        made.wait_daemon()
        yield made
    finally:
        with contextlib.suppress(Exception):
            made.cli("watch", "stop")
        made.kill_daemons()


def real(root: Path, argv: list[bytes]) -> tuple[CliResult, bytes]:
    """`python -m ctindex ARGV` in `root`: the result decoded as a terminal
    would show it (an undecodable byte as a surrogate, which the checks
    refuse), and stdout's bytes."""
    env = {**os.environ, protocol.ACK_WAIT_ENV: str(PATIENT_ACK_S)}
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", *argv],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    out, err = (b.decode("utf-8", "surrogateescape") for b in (done.stdout, done.stderr))
    return CliResult(done.returncode, out, err), done.stdout


REAL_ARGV: dict[str, Callable[[bytes, bytes], list[bytes]]] = {
    "query": lambda m, h: [b"search", m, h],
    "query-or": lambda m, h: [b"search", b"--ids", m + b" OR " + h],
    "limit": lambda m, h: [b"search", m, b"--limit", h],
    "color": lambda m, h: [b"search", m, b"--color", h],
    "option": lambda m, h: [b"search", m, b"--" + h],
    "json": lambda m, h: [b"--json", b"search", m, h],
    "show": lambda m, h: [b"show", h],
    "why": lambda m, h: [b"why", h],
    "project": lambda m, h: [b"-C", h, b"status"],
    "command": lambda m, h: [h],
}


@pytest.mark.slow
def test_a_daemon_renders_hostile_documents_and_arguments_cleanly(
    daemon_project: CliProject,
) -> None:
    """Real processes against a running daemon: what the daemon rendered
    for a hostile document is what this process renders (but the barrier's
    duration), as clean; -0 prints the names' bytes; hostile argument bytes,
    through the daemon (search) or the full CLI (the rest), get their one
    clean line."""
    root = daemon_project.root
    answered: list[bool] = []

    @examples(6, database=None)
    @given(
        doc=documents,
        colour=st.sampled_from(["always", "never"]),
        listing=st.sampled_from(["--paths", "--ids"]),
        kind=st.sampled_from(sorted(REAL_ARGV)),
        arg=names,
    )
    def one(doc: Doc, colour: str, listing: str, kind: str, arg: bytes) -> None:
        assume(arg not in {c.encode() for c in COMMANDS})
        with written(root, [doc]) as (mark, made):
            (w,) = made
            before = _queries(daemon_project)["answered"]
            argv = ["search", mark, f"--color={colour}"]
            got, _ = real(root, [a.encode() for a in argv])
            by_daemon = _queries(daemon_project)["answered"] == before + 1
            answered.append(by_daemon)
            check_answer(got, argv)
            assert got.code == (1 if doc.broken else 0), got
            here = cli_main(*argv, cwd=root)  # rendered by this process's own code
            # The same bytes but the freshness line's mode and timing (a
            # loaded machine may fall back on one side): its counts agree.
            (*lines, last), (*own, own_last) = got.out.splitlines(), here.out.splitlines()
            assert (got.code, lines) == (here.code, own), (got.out, here.out)
            assert last.split(" \u00b7 ")[0] == own_last.split(" \u00b7 ")[0], (last, own_last)

            nulled, raw = real(root, [b"search", mark.encode(), listing.encode(), b"-0"])
            name = w.key if listing == "--paths" else os.fsencode(w.id)
            # -0: the name's own bytes, NUL-terminated, unescaped.
            assert (nulled.code, raw) == (got.code, b"" if doc.broken else name + b"\0"), nulled

            argv_b = REAL_ARGV[kind](mark.encode(), arg)
            hostile_got, _ = real(root, argv_b)
            check_answer(hostile_got, [os.fsdecode(a) for a in argv_b], text=kind != "json")
            if kind == "json":
                json.loads(hostile_got.out)

    one()
    assert any(answered), "no search was answered by the daemon"


# -- the API ----------------------------------------------------------------------------


class _BytesPath:
    """An os.PathLike whose path is bytes (refused: the API's paths are text)."""

    def __fspath__(self) -> bytes:
        return b"kb"


class _BadPath:
    """An os.PathLike whose __fspath__ gives neither str nor bytes."""

    def __fspath__(self) -> int:
        return 3


TEXT, OPTIONAL_TEXT, INT, BOOL, PATH, OPTIONAL_PATH = range(6)
PARAMETERS: dict[tuple[str, str], int] = {  # docs/api.md "Errors"
    ("Index", "path"): OPTIONAL_PATH,
    ("search", "query"): TEXT,
    ("search", "limit"): INT,
    ("search", "direct"): BOOL,
    ("get", "concept_id"): TEXT,
    ("get", "scope"): OPTIONAL_TEXT,
    ("concepts", "type"): OPTIONAL_TEXT,
    ("concepts", "tag"): OPTIONAL_TEXT,
    ("concepts", "prefix"): TEXT,
    ("concepts", "offset"): INT,
    ("concepts", "limit"): INT,
    ("why", "path"): PATH,
    ("why", "cwd"): OPTIONAL_PATH,
    ("status", "verbose"): BOOL,
}
REQUIRED = {"search": {"query": "zebraword"}, "get": {"concept_id": DOC_ID}, "why": {"path": "kb"}}


def takes(kind: int, value: object) -> bool:
    """Whether docs/api.md says the API takes `value` for such a parameter."""
    if value is None:
        return kind in (OPTIONAL_TEXT, OPTIONAL_PATH)
    if kind in (TEXT, OPTIONAL_TEXT):
        return isinstance(value, str)
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == BOOL:
        return isinstance(value, bool)
    if isinstance(value, str):
        return True
    if isinstance(value, os.PathLike):
        try:
            return isinstance(os.fspath(value), str)
        except TypeError:
            return False
    return False


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(),
    st.floats(),
    st.binary(max_size=4),
    st.builds(bytearray, st.binary(max_size=3)),
    hostile(),
    st.builds(PurePosixPath, hostile(nul=False, surrogates=False)),
    st.builds(_BytesPath),
    st.builds(_BadPath),
    st.lists(st.integers(), max_size=2),
    st.tuples(st.text(max_size=2)),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.builds(object),
    st.complex_numbers(),
)


@examples(100)
@given(call=st.sampled_from(sorted(PARAMETERS)), value=values)
@example(call=("search", "limit"), value=10**30)
@example(call=("concepts", "offset"), value=10**30)
@example(call=("why", "cwd"), value=PurePosixPath("kb\u202e"))
def test_the_api_takes_what_the_docs_say_and_raises_only_its_errors(
    index: Index, call: tuple[str, str], value: object
) -> None:
    method, parameter = call
    kind = PARAMETERS[call]
    if method == "Index":
        if not takes(kind, value):  # an Index that opens would be a project elsewhere
            with pytest.raises(WrongType) as wrong:
                Index(value)  # type: ignore[arg-type]
            assert wrong.value.parameter == "path"
        return
    arguments = {**REQUIRED.get(method, {}), parameter: value}
    try:
        getattr(index, method)(**arguments)
    except WrongType as exc:
        assert not takes(kind, value), (call, value, exc)
        assert (exc.call, exc.parameter, exc.got) == (method, parameter, type(value)), exc
        assert str(exc).startswith(f"{method}: {parameter} must be "), exc
        assert isinstance(exc, TypeError) and str(exc).isprintable()
    except CtindexError as exc:  # documented: a bad query, no such concept, a range
        assert takes(kind, value), (call, value, exc)
        assert str(exc).isprintable() and exc.exit_code in EXIT_CODES, exc
    else:
        assert takes(kind, value), (call, value)


@examples(30)
@given(kind=hostile(), tag=hostile(), prefix=hostile(), query=hostile())
def test_the_api_answers_hostile_filters_and_fields(
    index: Index, kind: str, tag: str, prefix: str, query: str
) -> None:
    """concepts()'s filters and search's fields, which
    test_unrepresentable_input does not feed: a page or a documented error."""
    for call in (
        lambda: index.concepts(type=kind, tag=tag),
        lambda: index.concepts(prefix=prefix, limit=3),
        lambda: index.search(f'tags:"{query}" OR type:{kind} OR zebraword', limit=3),
    ):
        try:
            call()
        except CtindexError as exc:
            assert isinstance(exc, ctindex.QueryError) and str(exc).isprintable(), exc
    # The hostile title exactly, not escaped: it is data to a program.
    (hit,) = [h for h in index.search("zebraword").hits if h.id == DOC_ID]
    assert hit.title == _normal(yaml.safe_load(DOC.split(b"---\n")[1])["title"])


# -- MCP --------------------------------------------------------------------------------

TOOLS: dict[str, tuple[str, ...]] = {
    "search": ("query", "limit", "direct"),
    "get_concept": ("id", "scope"),
    "list_concepts": ("type", "tag", "prefix", "offset", "limit"),
    "why": ("path",),
    "status": (),
}
mcp_text = st.one_of(hostile(), st.sampled_from([DOC_ID, os.fsdecode(KEYS[0]), "zebraword"]))
mcp_value = st.one_of(
    mcp_text, mcp_text, st.integers(), st.none(), st.booleans(), st.lists(mcp_text, max_size=2)
)
tool_calls = st.sampled_from(sorted(TOOLS)).flatmap(
    lambda tool: st.fixed_dictionaries({}, optional={a: mcp_value for a in TOOLS[tool]}).map(
        lambda arguments: (tool, arguments)
    )
)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _wire(text: str) -> str:
    """A string as the MCP wire spells it (docs/mcp.md): a surrogate as its
    escape text."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def test_every_hostile_tool_call_gets_one_answer(project: Path) -> None:
    """The real server over stdio: each tools/call with hostile arguments
    gets exactly one answer (docs/mcp.md, test_mcp_server's rules), a tool
    error is one printable line, every string of an answer is UTF-8; after
    all of them the server still serves, with the hostile text exact."""
    pytest.importorskip("mcp")
    from tests.ctindex.test_mcp_server import SDK, _check, _expected, _initialised

    server = _initialised(project)
    try:
        rid = itertools.count()

        @examples(30, database=None)
        @given(call=tool_calls)
        def one(call: tuple[str, dict[str, Any]]) -> None:
            tool, arguments = call
            message = {
                "jsonrpc": "2.0",
                "id": next(rid),
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
            raw = json.dumps(message).encode()
            if _expected(raw) != SDK:  # a lone surrogate: the refusal the docs name
                _check(server, raw)
                return
            (answer,) = server.answers_to(raw)
            assert answer["id"] == message["id"], answer
            for text in _strings(answer):
                text.encode("utf-8")  # no lone surrogate on the wire
            result = answer.get("result")
            if result is None:  # the SDK's own error
                assert answer["error"]["message"], answer
                return
            if result["isError"]:
                line = result["content"][0]["text"]
                assert line and line.isprintable() and "Traceback" not in line, (call, line)
                assert not line.startswith("Error executing tool"), (call, line)
            else:
                assert isinstance(result["structuredContent"], dict), (call, result)

        one()
        got = server.request("tools/call", {"name": "get_concept", "arguments": {"id": DOC_ID}})
        concept = got["result"]["structuredContent"]
        assert concept["title"] == _normal(yaml.safe_load(DOC.split(b"---\n")[1])["title"])
        got = server.request("tools/call", {"name": "search", "arguments": {"query": "zebraword"}})
        paths = {r["path"] for r in got["result"]["structuredContent"]["results"]}
        assert paths == {_wire(os.fsdecode(k)) for k in KEYS}, paths
    finally:
        server.close()
