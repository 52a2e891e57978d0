"""`search` output for people: colour on a terminal (--color, NO_COLOR),
configurable match markers, and the match spans of the JSON snippet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

from tests.conftest import REPO, CliResult
from tests.terminal import run_on_terminal

SAMPLE = str(REPO / "fixtures" / "sample")
SEARCH = ["-C", SAMPLE, "search", "--direct", "bitcoin", "transactions", "--limit", "3"]
ESC = "\x1b["


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    return {**env, **extra}


def test_colour_on_a_terminal_unless_no_color_or_never() -> None:
    command = [sys.executable, "-m", "ctindex", *SEARCH]
    code, coloured, _ = run_on_terminal(command, _env())
    assert code == 0 and ESC in coloured
    # matched words highlighted, without the « » the colour replaces
    assert "\x1b[1m\x1b[31mBitcoin\x1b[0m" in coloured and "«" not in coloured
    plain_lines = subprocess.run(
        command, env=_env(), capture_output=True, text=True, timeout=60, check=False
    ).stdout
    assert ESC not in plain_lines and "«Bitcoin»" in plain_lines
    for env, extra in (({"NO_COLOR": "1"}, []), ({"TERM": "dumb"}, []), ({}, ["--color=never"])):
        code, text, _ = run_on_terminal([*command, *extra], _env(**env))
        assert code == 0 and text == plain_lines, (env, extra)
    # NO_COLOR set but empty does not disable colour (no-color.org)
    assert ESC in run_on_terminal(command, _env(NO_COLOR=""))[1]
    forced = subprocess.run(
        [*command, "--color=always"],
        env=_env(NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert forced.stdout == coloured
    # a global flag: before the command too, its value a separate word
    before = subprocess.run(
        [sys.executable, "-m", "ctindex", "--color", "always", *SEARCH],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert before.stdout == coloured


def test_markers_text_and_json(run_cli: Callable[..., CliResult]) -> None:
    text = run_cli(*SEARCH, "--markers", "[[,]]")
    assert text.code == 0 and "[[Bitcoin]]" in text.out and "«" not in text.out
    none = run_cli(*SEARCH, "--markers=,")
    assert "«" not in none.out and "[[" not in none.out
    doc = json.loads(run_cli("--json", *SEARCH, "--markers", "<b>,</b>").out)
    for hit in doc["results"]:
        spans = hit["snippet_matches"]
        plain = hit["snippet_text"]
        assert spans and all(
            plain[s:e].lower().startswith(("bitcoin", "transaction")) for s, e in spans
        )
        rebuilt, pos = "", 0
        for s, e in spans:
            rebuilt += plain[pos:s] + "<b>" + plain[s:e] + "</b>"
            pos = e
        assert hit["snippet"] == rebuilt + plain[pos:]
    default = json.loads(run_cli("--json", *SEARCH).out)["results"][0]
    assert "«" in default["snippet"]
    assert default["snippet"].replace("«", "").replace("»", "") == default["snippet_text"]


def test_bad_markers_and_colour_are_usage_errors(run_cli: Callable[..., CliResult]) -> None:
    assert run_cli(*SEARCH, "--markers", "[[") == CliResult(
        2,
        "",
        "ctindex search: --markers: expected OPEN,CLOSE of printable text"
        " (e.g. '[[,]]'), got '[['\n",
    )
    bad = run_cli(*SEARCH, "--color=blue")
    assert bad.code == 2 and "--color: invalid choice 'blue'" in bad.err


def test_the_api_hit_carries_the_spans() -> None:
    import ctindex

    with ctindex.Index(SAMPLE) as index:
        hit = index.search("bitcoin", limit=1, direct=True).hits[0]
    assert hit.snippet_matches
    assert all(hit.snippet_text[s:e].lower() == "bitcoin" for s, e in hit.snippet_matches)
    assert hit.to_json()["snippet_matches"] == [list(s) for s in hit.snippet_matches]
