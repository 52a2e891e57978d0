"""IDs unique across scopes (ctindex/search/refs.py): where two scopes hold
the same concept ID, `search --ids`, the text results and the JSON `ref`
give `SCOPE:ID`, and `show` / `Index.get` take it, so `search --ids | xargs
ctindex show` reads each listed concept; an ID held by one scope stays bare."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ctindex
from tests.conftest import copy_bundles, write_config


@pytest.fixture
def twins(tmp_path: Path) -> Path:
    root = copy_bundles(tmp_path / "p", ("ga4", "stackoverflow"))
    for bundle, words in (("ga4", "zqxv7twin in ga4"), ("stackoverflow", "zqxv7twin in so")):
        (root / "okf" / "bundles" / bundle / "tables" / "zz_twin.md").write_text(
            f"# Twin\n\n{words}\n"
        )
    (root / "okf" / "bundles" / "ga4" / "tables" / "zz_alone.md").write_text(
        "# Alone\n\nzqxv7twin\n"
    )
    write_config(root, "okf/bundles/ga4", "okf/bundles/stackoverflow", watch=False)
    return root


def _ctindex(root: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def test_ids_listed_by_search_are_each_read_by_show(twins: Path) -> None:
    listed = _ctindex(twins, "search", "--ids", "zqxv7twin")
    assert listed.returncode == 0, listed.stderr
    ids = listed.stdout.split()
    assert sorted(ids) == [
        "okf/bundles/ga4:tables/zz_twin",
        "okf/bundles/stackoverflow:tables/zz_twin",
        "tables/zz_alone",  # one scope holds it: bare
    ], ids
    xargs = subprocess.run(
        ["xargs", "-n", "1", sys.executable, "-m", "ctindex", "-C", str(twins), "--json", "show"],
        input=listed.stdout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert xargs.returncode == 0, xargs.stderr
    shown, text, at = [], xargs.stdout, 0
    while text[at:].strip():  # one JSON document per `show`
        doc, end = json.JSONDecoder().raw_decode(
            text, at + len(text[at:]) - len(text[at:].lstrip())
        )
        shown.append(doc)
        at = end
    assert sorted(d["path"] for d in shown) == [
        "okf/bundles/ga4/tables/zz_alone.md",
        "okf/bundles/ga4/tables/zz_twin.md",
        "okf/bundles/stackoverflow/tables/zz_twin.md",
    ]
    # The bare ID is still ambiguous, and says so (exit 2).
    bare = _ctindex(twins, "show", "tables/zz_twin")
    assert bare.returncode == 2 and "tables/zz_twin" in bare.stderr, bare.stderr


def test_the_text_and_json_carry_the_ref_and_the_api_takes_it(twins: Path) -> None:
    text = _ctindex(twins, "search", "zqxv7twin").stdout
    assert "okf/bundles/stackoverflow:tables/zz_twin  —  Twin" in text, text
    doc = json.loads(_ctindex(twins, "--json", "search", "zqxv7twin").stdout)
    refs = {r["path"]: r["ref"] for r in doc["results"]}
    assert refs["okf/bundles/ga4/tables/zz_alone.md"] == "tables/zz_alone"
    assert refs["okf/bundles/ga4/tables/zz_twin.md"] == "okf/bundles/ga4:tables/zz_twin"
    with ctindex.Index(twins) as index:
        hits = index.search("zqxv7twin").hits
        assert {h.ref for h in hits} == set(refs.values())
        for hit in hits:
            assert index.get(hit.ref).path == hit.path
        with pytest.raises(ctindex.ConceptNotFound):
            index.get("okf/bundles/ga4:tables/nothing_here")
        # A ref names its scope: `scope` that disagrees finds nothing.
        with pytest.raises(ctindex.ConceptNotFound):
            index.get("okf/bundles/ga4:tables/zz_twin", scope="okf/bundles/stackoverflow")
