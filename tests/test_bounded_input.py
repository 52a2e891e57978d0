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
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.search.snippet import make_snippet
from tests import oracle
from tests.conftest import write_config

HANG_GUARD = 120  # seconds: a hang, not a speed limit


def _fastest(run: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best


def ctindex(*args: str, cwd: Path | None = None,
            stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctindex", *args], cwd=cwd, stdout=stdout,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                          errors="surrogateescape", timeout=HANG_GUARD, check=False)


# --- snippets and phrases: linear in the number of hits -----------------------

def test_snippet_scales_linearly_with_hits_in_one_document() -> None:
    """16x the hits must cost far less than 256x (quadratic) the time; the
    window search used to re-collect every window for every hit."""
    def body(n: int) -> str:
        return " ".join(["zqxv7marker filler"] * n)

    small, large = body(1_000), body(16_000)
    make_snippet(small, "", {"zqxv7marker"})  # warm the stemmer cache
    ratio = (_fastest(lambda: make_snippet(large, "", {"zqxv7marker"}))
             / _fastest(lambda: make_snippet(small, "", {"zqxv7marker"})))
    assert ratio < 64, f"16x hits cost {ratio:.0f}x the time"


def test_snippet_output_unchanged_for_ordinary_text() -> None:
    body = ("Gross margin is revenue minus cost. " * 3 + "The margin of a product "
            "line shows revenue per unit; margin and revenue together explain it.")
    got = make_snippet(body, "", {"margin", "revenu"})
    assert got.count("«") == got.count("»") >= 2
    # The window starts at the earliest hit with the most distinct terms.
    assert got.startswith("Gross «margin» is «revenue»")


@pytest.fixture(scope="module")
def hit_heavy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1.8 MB concept (under max_file_bytes) holding one word 450,000 times."""
    project = tmp_path_factory.mktemp("hits")
    docs = project / "docs"
    docs.mkdir()
    (docs / "heavy.md").write_text("# Heavy\n\n" + "zqx " * 450_000 + "zqxv7marker\n")
    (docs / "light.md").write_text("# Light\n\nzqx zqxv7marker once.\n")
    write_config(project, "docs")
    return project


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
