"""Bounded work on hostile input (docs/reliability.md, "Bounded input").

Scaling is checked with ratios between two sizes (never a wall-clock limit);
whole commands run as real processes under a subprocess timeout that is only
a hang guard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctindex.search.snippet import make_snippet
from tests import oracle
from tests.conftest import write_config

HANG_GUARD = 120  # seconds: a hang, not a speed limit


def _fastest(run: Callable[[], object], repeat: int = 3) -> float:
    """The least CPU time this process spent in `run` over a few tries. CPU
    time, not the wall clock: on a loaded machine a preempted run would
    otherwise look slower than the work it did (the ratios compared below
    are of work, a scaling check, never a time limit)."""
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        run()
        best = min(best, time.process_time() - began)
    return best


def ctindex(
    *args: str, cwd: Path | None = None, stdout: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", *args],
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="surrogateescape",
        timeout=HANG_GUARD,
        check=False,
    )


# --- snippets and phrases: linear in the number of hits -----------------------


def test_snippet_scales_linearly_with_hits_in_one_document() -> None:
    """16x the hits must cost far less than 256x (quadratic) the time; the
    window search used to re-collect every window for every hit."""

    def body(n: int) -> str:
        return " ".join(["zqxv7marker filler"] * n)

    small, large = body(1_000), body(16_000)
    make_snippet(small, "", {"zqxv7marker"})  # warm the stemmer cache
    ratio = _fastest(lambda: make_snippet(large, "", {"zqxv7marker"})) / _fastest(
        lambda: make_snippet(small, "", {"zqxv7marker"})
    )
    assert ratio < 64, f"16x hits cost {ratio:.0f}x the time"


def test_snippet_output_unchanged_for_ordinary_text() -> None:
    body = (
        "Gross margin is revenue minus cost. " * 3 + "The margin of a product "
        "line shows revenue per unit; margin and revenue together explain it."
    )
    got = make_snippet(body, "", {"margin", "revenu"})
    assert got.count("«") == got.count("»") >= 2
    # The window starts at the earliest hit with the most distinct terms.
    assert got.startswith("Gross «margin» is «revenue»")


@pytest.fixture(scope="module")
def hit_heavy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 1.8 MB concept (under max_file_bytes) holding one word 450,000 times."""
    project = tmp_path_factory.mktemp("hits")
    docs = project / "docs"
    docs.mkdir()
    (docs / "heavy.md").write_text("# Heavy\n\n" + "zqx " * 450_000 + "zqxv7marker\n")
    (docs / "light.md").write_text("# Light\n\nzqx zqxv7marker once.\n")
    write_config(project, "docs")  # watch on: the indexed search goes through the daemon
    yield project
    ctindex("-C", str(project), "watch", "stop")


@pytest.mark.parametrize("mode", ["indexed", "direct"])
def test_450k_hits_in_one_document_answer(hit_heavy: Path, mode: str) -> None:
    extra = ["--direct"] if mode == "direct" else []
    want = oracle.containing(hit_heavy, "zqx")
    assert want == {"docs/heavy.md", "docs/light.md"}
    for query in ("zqx", '"zqx zqx zqx"', '"zqx zqxv7marker"'):
        got = ctindex("-C", str(hit_heavy), "--json", "search", query, *extra)
        assert got.returncode == 0, got.stderr
        paths = {hit["path"] for hit in json.loads(got.stdout)["results"]}
        assert paths == (want if query != '"zqx zqx zqx"' else {"docs/heavy.md"}), query


# --- patterns: gitignore semantics, no super-linear backtracking ---------------


def test_glob_translation_matches_pathspec_on_random_patterns() -> None:
    """ctindex/policy/glob.py against pathspec's own translation: same matches on
    random patterns and keys (pathspec lets `[!x]` match `/`, a known
    difference, so negated classes are left to the next test)."""
    import random
    import re

    import pathspec

    from ctindex.policy.glob import normalize, translate

    rng = random.Random(5)
    tokens = ["a", "b", "*", "?", "[ab]", "**", "/", "ab", "*a", "b*", "***"]
    compared = 0
    for _ in range(2_000):
        pattern = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 6)))
        pattern = (
            ("/" if rng.random() < 0.2 else "") + pattern + ("/" if rng.random() < 0.2 else "")
        )
        if "//" in pattern:
            continue
        reference = pathspec.PathSpec.from_lines("gitignore", [normalize(pattern)]).patterns[0]
        if reference.include is None:
            continue
        ours = re.compile(translate(pattern))
        for _ in range(20):
            parts = [
                "".join(rng.choices("ab", k=rng.randint(1, 4))) for _ in range(rng.randint(1, 4))
            ]
            key = "/".join(parts) + ("/" if rng.random() < 0.3 else "")
            want = reference.regex.match(key) is not None  # type: ignore[attr-defined]
            assert (ours.match(key) is not None) == want, (pattern, key)
            compared += 1
    assert compared > 20_000


def test_glob_semantics_of_star_runs_and_classes() -> None:
    from ctindex.policy.plan import compile_patterns

    stars = compile_patterns(("******x.md",))
    assert stars.matches("dir/abcx.md") and stars.matches("x.md")
    assert not stars.matches("dir/x.mdy") and not stars.matches("a/b")
    negated = compile_patterns(("a[!b]c",))
    assert negated.matches("axc") and not negated.matches("abc")
    assert not negated.matches("a/c")  # a class never matches the separator


HOSTILE_PATTERNS = ("******x.md", "*a*a*a*a*b", "**/a/**/a/**/a/**/b", "a*/**/*a*a*b/**/c")


@pytest.mark.parametrize("pattern", HOSTILE_PATTERNS)
def test_pattern_matching_scales_linearly(pattern: str) -> None:
    """16x longer keys must cost far less than 256x the time (pathspec's
    translation backtracked: n^6 for the first pattern)."""
    from ctindex.policy.plan import compile_patterns

    match = compile_patterns((pattern,)).bound_match()

    def keys(n: int) -> list[str]:
        return ["a" * n + ".mdx", "a" * n, "/".join(["a"] * n), "a/" + "/".join(["aaaa"] * n)]

    small, large = keys(500), keys(8_000)
    ratio = _fastest(lambda: [match(k) for k in large]) / max(
        _fastest(lambda: [match(k) for k in small]), 1e-6
    )
    assert ratio < 64, f"{pattern}: 16x longer keys cost {ratio:.0f}x the time"


# --- odd inputs: every command, one line and a documented exit code -----------

COMMANDS = (
    ("init",),
    ("scopes",),
    ("scopes", "--effective"),
    ("why", "docs/a.md"),
    ("status",),
    ("update",),
    ("rebuild",),
    ("search", "zqxv7marker"),
    ("search", "--direct", "zqxv7marker"),
    ("watch", "status"),
    ("watch", "start"),
    ("watch", "stop"),
)
EXIT_CODES = {0, 1, 2, 3, 74}  # docs/cli.md (3: `watch status`, not running)


def _odd_project(base: Path, kind: str) -> Path:
    project = base / kind
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "a.md").write_text("# A\n\nzqxv7marker here\n")
    (project / "docs" / "index.md").write_text("# Docs\n")
    config = write_config(project, "docs", watch=False)
    if kind == "fifo-config":
        config.unlink()
        os.mkfifo(config)
    elif kind == "dev-zero-symlink-config":
        config.unlink()
        config.symlink_to("/dev/zero")
    elif kind == "deep-config":
        config.write_text("[" * 100 + "]" * 100)
    elif kind == "star-run-pattern":
        config.write_text(
            json.dumps(
                {
                    "version": 1,
                    "watch": False,
                    "scopes": [
                        {
                            "root": "docs",
                            "provider": "okf-markdown",
                            "include": ["******x.md", "**/*.md"],
                            "exclude": ["*a*a*a*a*a*a*b"],
                        }
                    ],
                }
            )
        )
    return project


@pytest.mark.parametrize("kind", ["fifo-config", "dev-zero-symlink-config", "deep-config"])
@pytest.mark.slow
def test_every_command_refuses_an_odd_config_with_one_line(tmp_path: Path, kind: str) -> None:
    project = _odd_project(tmp_path, kind)
    for command in COMMANDS:
        got = ctindex("-C", str(project), *command)
        assert got.returncode in EXIT_CODES, (command, got.returncode, got.stderr)
        assert "Traceback" not in got.stderr, (command, got.stderr)
        if command[0] in ("scopes", "why", "update", "rebuild", "search"):
            assert got.returncode == 2, (command, got.stderr)
            lines = got.stderr.strip().splitlines()
            assert len(lines) == 1 and "index.jsonc" in lines[0], (command, got.stderr)


def test_every_command_with_hostile_patterns_answers(tmp_path: Path) -> None:
    project = _odd_project(tmp_path, "star-run-pattern")
    deep = project / "docs" / "/".join(["a" * 200] * 15)
    deep.mkdir(parents=True)
    (deep / ("a" * 200 + ".md")).write_text("zqxv7marker deep\n")
    for command in COMMANDS:
        got = ctindex("-C", str(project), *command)
        assert got.returncode in EXIT_CODES and "Traceback" not in got.stderr, (command, got)
    # Not tests/oracle.py here: it matches with pathspec, whose backtracking
    # on these very patterns is what this guards against.
    want = {"docs/a.md", str((deep / ("a" * 200 + ".md")).relative_to(project))}
    for extra in ((), ("--direct",)):
        got = ctindex("-C", str(project), "--json", "search", "zqxv7marker", *extra)
        assert {hit["path"] for hit in json.loads(got.stdout)["results"]} == want, extra


def test_broken_pipe_is_all_printed_or_exit_74(tmp_path: Path) -> None:
    project = _odd_project(tmp_path, "pipe")
    for _ in range(300):
        (project / "docs" / f"n{_}.md").write_text(f"# N{_}\n\nzqxv7marker {_}\n")
    shell = (
        f"{sys.executable} -m ctindex -q -C {project} search --limit 300 zqxv7marker"
        " | head -1 >/dev/null; exit ${PIPESTATUS[0]}"
    )
    got = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, timeout=HANG_GUARD, check=False
    )
    # head may leave before or after the last write: all printed, or the
    # output lost, which is exit 74 and its one line (docs/cli.md).
    lost = (74, "ctindex: cannot write the output: Broken pipe\n")
    assert (got.returncode, got.stderr) in ((0, ""), lost), got.stderr


def test_daemon_survives_its_config_turning_into_a_fifo(tmp_path: Path) -> None:
    """A running daemon, then the store becomes a FIFO: search, watch status
    and watch stop still answer (exit 2 for what needs the policy)."""
    project = _odd_project(tmp_path, "daemon-fifo")
    config = write_config(project, "docs", watch=True)
    try:
        assert ctindex("-C", str(project), "search", "zqxv7marker").returncode == 0
        config.unlink()
        os.mkfifo(config)
        for command in (("search", "zqxv7marker"), ("watch", "status"), ("status",)):
            got = ctindex("-C", str(project), *command)
            assert got.returncode in EXIT_CODES and "Traceback" not in got.stderr, (command, got)
    finally:
        got = ctindex("-C", str(project), "watch", "stop")
    assert got.returncode in EXIT_CODES and "Traceback" not in got.stderr, got
