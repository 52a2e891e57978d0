"""The docs and the code's comments describe the product as it is, and cite
only what a reader of this repository can open: no history ("used to",
"formerly", "before this change"), no sections of a specification the
repository does not hold. Measurements over time belong to
docs/benchmarks.md and bench/results/, which are left out."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HISTORY = re.compile(
    r"\bused to (be|run|read|write|take|cost|say|make)\b|\bformerly\b|\bpreviously\b"
    r"|\bbefore this (change|rule|commit|fix|session|stop)\b|\bno longer (the case|true)\b",
    re.IGNORECASE,
)
SPEC_SECTION = re.compile(r"\bspec(ification)?\s*§", re.IGNORECASE)


def _texts() -> list[Path]:
    docs = [p for p in (REPO / "docs").rglob("*.md") if p.name != "benchmarks.md"]
    code = [*(REPO / "ctindex").rglob("*.py"), *(REPO / "ctindex").rglob("*.c")]
    return [REPO / "README.md", *docs, *code]


def test_no_history_and_no_spec_sections() -> None:
    found = []
    for path in _texts():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(line) or SPEC_SECTION.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert found == []


def test_the_patterns_see_what_they_are_for() -> None:
    assert HISTORY.search("Collection used to run only on publishing")
    assert HISTORY.search("which on the code before this change failed")
    assert SPEC_SECTION.search("as the spec §4.2 says")
    assert not HISTORY.search("a lock on an unlinked file no longer excludes anyone")
    assert not SPEC_SECTION.search("docs/decisions/perf.md §7")
