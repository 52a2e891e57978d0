"""Document text and names cannot drive the terminal (docs/cli.md, "Control
characters in output"; ctindex/base/printable.py).

A project whose folder name, title, tags, type and body hold a screen
clear (ESC[2J), a window-title set (OSC ... BEL), a conceal (ESC[8m), a
carriage return, a newline, a C1 CSI, a bidi override and a forged
freshness line: `search` (text, coloured or not), `search --paths`/`--ids`,
`show`, `why`, `status --verbose` and `update` print no raw control
character, in process and as the daemon renders them; `--paths`/`--ids`
print one entry a line, `-0` the names' own bytes NUL-terminated, the same
bytes with and without a daemon; `--json` keeps the exact text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.base import printable
from ctindex.client.daemon_requests import request
from tests.conftest import CliResult, cli_main, write_config
from tests.ctindex.base.test_printable import decode_field
from tests.daemon_support import CliProject, be_patient_for_acks, wait_for
from tests.terminal import run_on_terminal

pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses non-UTF-8 names")

HANG_GUARD_S = 60.0  # only a hang guard for subprocesses and waits
SCOPE = "kb"
# ESC[2J, an OSC window title ended by BEL, ESC[8m, CR, LF, U+009B (C1 CSI)
# and U+202E (right-to-left override), as UTF-8 bytes.
FOLDER = b"evil\x1b[2J\x1b]0;pwned\x07\x1b[8m\r\nline\xc2\x9b\xe2\x80\xae"
PLAIN = b"plain\xff"  # not UTF-8: surrogate-escaped in the key
FORGED = "1 of 1 matches \u00b7 generation 9 \u00b7 watcher-clean"
DOC = (
    b"---\n"
    b'title: "Bad \\e[2J\\e]0;owned\\a \\e[8m hidden\\r\\n' + FORGED.encode() + b'\\u202e"\n'
    b'type: "Metric\\e[2J"\n'
    b'tags: ["t\\e[31m", "\\u202eok\\x9b"]\n'
    b"---\n"
    b"zebraword \x1b[2J body \x1b]0;owned\x07 \x1b[8m\r\n"
    b"\ttabbed\rover \xe2\x80\xae\n" + FORGED.encode() + b"\n"
)
KEYS = [  # the names -0 prints, as bytes
    f"{SCOPE}/".encode() + FOLDER + b"/doc.md",
    f"{SCOPE}/".encode() + PLAIN + b".md",
]
IDS = [FOLDER + b"/doc", PLAIN]
DOC_KEY = os.fsdecode(KEYS[0])
DOC_ID = os.fsdecode(IDS[0])
# What a renderer may add itself: SGR sequences (termcolor's).
SGR = re.compile(r"\x1b\[[0-9;]*m")
CONTROL = re.compile(f"[{printable.SPECIAL}]")
FRESHNESS = re.compile(r"\d+ of \d+ matches \u00b7 (generation \d+|no index) \u00b7 \S")


def write_hostile(root: Path) -> None:
    kb = os.fsencode(root / SCOPE)
    os.makedirs(kb + b"/" + FOLDER)
    with open(kb + b"/" + FOLDER + b"/doc.md", "wb") as handle:
        handle.write(DOC)
    with open(kb + b"/" + FOLDER + b"/broken.md", "wb") as handle:
        handle.write(b"# Broken\n\nzebraword with a NUL \x00 inside\n")  # a provider error
    with open(kb + b"/" + PLAIN + b".md", "wb") as handle:
        handle.write(b"# Plain\n\nzebraword plain\n")


def raw_controls(text: str, keep: str = "\n") -> list[str]:
    """The control, bidi and surrogate characters of `text` but `keep`."""
    return [c for c in CONTROL.findall(text) if c not in keep]


def assert_clean(text: str, what: object) -> None:
    assert raw_controls(text) == [], (what, text)


def assert_coloured_clean(text: str, what: object) -> None:
    """Colour: only the renderer's SGR sequences, and the freshness line (the
    last) starts with every attribute reset."""
    assert raw_controls(SGR.sub("", text)) == [], (what, text)
    *results, freshness = text.splitlines()
    assert FRESHNESS.match(freshness), (what, freshness)
    before = SGR.findall("\n".join(results))
    assert before and before[-1] == "\x1b[0m", (what, before[-3:])


def check_listing(run: Callable[..., CliResult]) -> None:
    """--paths/--ids: one escaped entry a line; -0: the names, raw."""
    for flag, names in (("--paths", KEYS), ("--ids", IDS)):
        lines = run("search", "zebraword", flag)
        assert lines.code == 0, lines
        assert_clean(lines.out + lines.err, flag)
        got = lines.out.splitlines()
        assert sorted(got) == sorted(printable.field(os.fsdecode(n)) for n in names)
        nulled = run("search", "zebraword", flag, "-0")
        assert nulled.code == 0 and nulled.out.endswith("\0")
        split = [os.fsencode(n) for n in nulled.out[:-1].split("\0")]
        assert sorted(split) == sorted(names)
        assert split == [os.fsencode(decode_field(line)) for line in got]  # same order
        assert nulled.err == lines.err  # the freshness statement, escaped, on stderr


def check_commands(run: Callable[..., CliResult]) -> None:
    """Every text command that prints the hostile names or text."""
    for colour in ("never", "always"):
        text = run("search", "zebraword", f"--color={colour}")
        assert text.code == 0, text
        assert_clean(text.err, colour)
        (assert_clean if colour == "never" else assert_coloured_clean)(text.out, colour)
        # The forged line stays inside a title or snippet: one freshness line,
        # the last, and it is the real one.
        lines = [SGR.sub("", line).strip() for line in text.out.splitlines()]
        assert [line for line in lines if FRESHNESS.match(line)] == [lines[-1]]
        assert not lines[-1].startswith(FORGED)
    assert "\\x1b[2J" in text.out and "\\u202e" in text.out  # escaped, visibly
    check_listing(run)

    shown = run("show", DOC_ID)
    assert shown.code == 0, shown
    assert_clean(shown.err, "show")
    body = shown.out.replace("\r\n", "\n")
    assert raw_controls(body, keep="\n\t") == [], body
    assert "zebraword \\x1b[2J body \\x1b]0;owned\\x07 \\x1b[8m\r\n\ttabbed\\rover" in shown.out

    why = run("why", f"{SCOPE}/{DOC_ID}.md")
    assert why.code == 0 and len(why.out.splitlines()) == 2, why
    assert_clean(why.out + why.err, "why")

    status = run("status", "--verbose")
    assert_clean(status.out + status.err, "status")
    broken = printable.field(os.fsdecode(f"{SCOPE}/".encode() + FOLDER + b"/broken.md"))
    assert any(line.startswith(f"  error    {broken}: ") for line in status.out.splitlines())

    # JSON keeps the exact text: the escaping is the text output's alone.
    doc = json.loads(run("--json", "search", "zebraword").out)
    hit = next(r for r in doc["results"] if r["path"] == DOC_KEY)
    assert hit["title"].startswith("Bad \x1b[2J\x1b]0;owned\x07 \x1b[8m hidden")
    assert hit["tags"] == ["t\x1b[31m", "\u202eok\x9b"]
    assert json.loads(run("--json", "show", DOC_ID).out)["body"].startswith(
        "zebraword \x1b[2J body"
    )


def test_no_raw_control_reaches_the_terminal_in_process(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    write_config(root, SCOPE, watch=False)  # no daemon: every answer made here
    write_hostile(root)
    update = cli_main("update", cwd=root)
    assert_clean(update.out + update.err, "update")
    assert "provider error: " in update.out

    check_commands(lambda *args: cli_main(*args, cwd=root))

    # A real process: -0 writes the names' bytes to its stdout as they are.
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", "search", "zebraword", "--paths", "-0"],
        cwd=root,
        capture_output=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0 and sorted(done.stdout.split(b"\0")[:-1]) == sorted(KEYS)
    # A terminal: coloured by default, and still only the renderer's codes.
    code, out, err = run_on_terminal(
        [sys.executable, "-m", "ctindex", "search", "zebraword"],
        {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")},
        str(root),
    )
    assert code == 0 and SGR.search(out)
    assert_coloured_clean(out, "terminal")
    assert_clean(err, "terminal")


def test_null_goes_with_a_listing_and_negative_numbers_stay_words(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    write_config(root, SCOPE, watch=False)
    write_hostile(root)
    alone = cli_main("search", "zebraword", "-0", cwd=root)
    assert alone == CliResult(2, "", "ctindex search: -0/--null: goes with --paths or --ids\n")
    # -0 is an option, yet a word like -2023 is still a query word (exclude it).
    for word in ("-2023", "-05", "-1.5"):
        got = cli_main("search", "zebraword", word, "--paths", cwd=root)
        assert got.code == 0 and len(got.out.splitlines()) == 2, (word, got)


def _queries(project: CliProject) -> dict[str, Any]:
    reply = request(project.paths, {"op": "status"}, 2.0)
    got: dict[str, Any] = reply["status"]["queries"]
    return got


def _untimed(text: str) -> str:
    """Only the barrier's duration differs between two answers."""
    return re.sub(r"barrier \d+\.\d ms", "barrier X ms", text)


def test_the_daemon_renders_the_same_escaped_bytes(
    make_cli_project: Callable[..., CliProject], monkeypatch: pytest.MonkeyPatch
) -> None:
    be_patient_for_acks(monkeypatch)
    project = make_cli_project(
        config={"scopes": [{"root": SCOPE, "provider": "okf-markdown"}]}, bundles=()
    )
    write_hostile(project.root)
    project.cli("search", "zebraword")  # starts the daemon
    project.wait_daemon()

    def by_daemon(*args: str) -> CliResult:
        """A `python -m ctindex` process the daemon answered (the fast path,
        ctindex/fast_entry.py, printing what ctindex/daemon/query.py rendered)."""

        def attempt() -> subprocess.CompletedProcess[bytes] | None:
            before = _queries(project)["answered"]
            done = subprocess.run(
                [sys.executable, "-m", "ctindex", *args],
                cwd=project.root,
                capture_output=True,
                timeout=HANG_GUARD_S,
                check=False,
            )
            return done if _queries(project)["answered"] == before + 1 else None

        done: subprocess.CompletedProcess[bytes] = wait_for(attempt, HANG_GUARD_S, 0.1)
        out, err = (s.decode("utf-8", "surrogateescape") for s in (done.stdout, done.stderr))
        # The same words answered in this process, by its own code.
        here = cli_main(*args, cwd=project.root)
        assert (done.returncode, _untimed(out), _untimed(err)) == (
            here.code,
            _untimed(here.out),
            _untimed(here.err),
        ), args
        return CliResult(done.returncode, out, err)

    for colour in ("never", "always"):
        text = by_daemon("search", "zebraword", f"--color={colour}")
        assert "watcher-clean" in text.out
        (assert_clean if colour == "never" else assert_coloured_clean)(text.out, colour)
        assert_clean(text.err, colour)
    check_listing(by_daemon)
    # show and why are never the daemon's: with one running they are as above.
    check_commands(lambda *args: cli_main(*args, cwd=project.root))
