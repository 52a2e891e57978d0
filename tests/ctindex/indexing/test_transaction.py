"""update / rebuild / search freshness / status through the CLI, without a daemon."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.providers import okf_markdown as okf

Run = Callable[..., Any]


@pytest.fixture
def project(bundles_project: Path) -> Path:
    """The four bundles with watching off: every search reconciles synchronously
    (these tests are about the index, not the daemon)."""
    write_config(bundles_project, {})
    return bundles_project


def write_config(root: Path, extra: dict[str, Any]) -> None:
    (root / ".ct").mkdir(exist_ok=True)
    (root / ".ct" / "index.jsonc").write_text(json.dumps({"version": 1, "watch": False, **extra}))


def search(run_cli: Run, root: Path, query: str, *extra: str) -> dict[str, Any]:
    res = run_cli("-C", str(root), "--json", "search", "--limit", "1000", *extra, "--", query)
    assert res.code in (0, 1), res.err
    doc: dict[str, Any] = json.loads(res.out)
    assert (res.code == 0) == (doc["total"] > 0)
    return doc


def paths(doc: dict[str, Any]) -> set[str]:
    return {r["path"] for r in doc["results"]}


def agree(run_cli: Run, root: Path, query: str) -> set[str]:
    indexed = search(run_cli, root, query)
    direct = search(run_cli, root, query, "--direct")
    assert paths(indexed) == paths(direct), query
    assert indexed["total"] == direct["total"]
    return paths(indexed)


def test_edits_are_seen_by_the_next_search(project: Path, run_cli: Run) -> None:
    root = project
    base = root / "okf" / "bundles" / "ga4"
    note = base / "fresh-note.md"
    assert agree(run_cli, root, "zebrafish") == set()
    note.write_text("---\ntitle: Zebrafish\n---\nA note about zebrafish.\n")
    assert agree(run_cli, root, "zebrafish") == {"okf/bundles/ga4/fresh-note.md"}
    # Same size, same second: only the racy-clean rule can see this edit.
    note.write_text("---\ntitle: Zebrafinch\n---\nA note about zebrafinch.\n")
    assert agree(run_cli, root, "zebrafish") == set()
    assert agree(run_cli, root, "zebrafinch") == {"okf/bundles/ga4/fresh-note.md"}
    note.rename(base / "renamed.md")
    hit = search(run_cli, root, "zebrafinch")
    assert paths(hit) == {"okf/bundles/ga4/renamed.md"}
    assert hit["results"][0]["id"] == "renamed"
    (base / "renamed.md").unlink()
    assert agree(run_cli, root, "zebrafinch") == set()


@pytest.mark.slow
def test_random_edit_sequence_matches_direct(project: Path, run_cli: Run) -> None:
    rng = random.Random(4)
    root = project
    folders = [p for p in (root / "okf" / "bundles").rglob("*") if p.is_dir()]
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    for step in range(30):
        docs = [
            p for p in root.joinpath("okf").rglob("*.md") if p.name not in ("index.md", "log.md")
        ]
        op = rng.choice(["create", "edit", "rename", "delete"])
        if op == "create" or not docs:
            target = rng.choice(folders) / f"new-{step}.md"
            target.write_text(f"# New {step}\n{' '.join(rng.choices(words, k=8))}\n")
        elif op == "edit":
            target = rng.choice(docs)
            target.write_text(target.read_text() + " " + " ".join(rng.choices(words, k=4)))
        elif op == "rename":
            target = rng.choice(docs)
            target.rename(rng.choice(folders) / f"moved-{step}.md")
        else:
            rng.choice(docs).unlink()
        for query in (
            rng.choice(words),
            f"{rng.choice(words)} OR {rng.choice(words)}",
            "new",
            "-alpha",
            "path:okf/bundles/ga4/ echo",
            "char*",
        ):
            agree(run_cli, root, query)


def test_update_publishes_only_when_something_changed(project: Path, run_cli: Run) -> None:
    root = project
    first = json.loads(run_cli("-C", str(root), "--json", "update").out)
    assert first["rebuilt"] and first["reason"] == "no index yet"
    again = json.loads(run_cli("-C", str(root), "--json", "update").out)
    assert not again["published"] and again["generation"] == first["generation"]
    target = next(
        p for p in (root / "okf" / "bundles" / "ga4").rglob("*.md") if p.name != "index.md"
    )
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    meta = json.loads(run_cli("-C", str(root), "--json", "update").out)
    # Same documents: the file table is refreshed under the same generation.
    assert meta["refreshed"] and not meta["published"]
    assert meta["metadata_only"] == 1 and meta["changed"] == 0
    assert meta["generation"] == first["generation"]
    assert any("metadata" in n for n in meta["notes"])
    text = run_cli("-C", str(root), "update")
    assert text.code == 0 and text.out.startswith("up to date: generation")


def test_version_or_plan_change_rebuilds_before_answering(
    project: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project
    assert search(run_cli, root, "bitcoin")["freshness"]["rebuilt"] == "no index yet"
    assert search(run_cli, root, "bitcoin")["freshness"]["rebuilt"] is None
    from ctindex import providers

    # The registry is where versions live (ctindex/providers/__init__.py).
    newer = providers.OKF_MARKDOWN._replace(tokenizer_version=okf.TOKENIZER_VERSION + 1)
    monkeypatch.setitem(providers.PROVIDERS, newer.id, newer)
    got = search(run_cli, root, "bitcoin")
    assert "tokenizer" in got["freshness"]["rebuilt"]
    monkeypatch.undo()
    search(run_cli, root, "bitcoin")
    write_config(
        root,
        {
            "scopes": [
                {"root": "okf/bundles/ga4", "provider": "okf-markdown", "include": ["**/*.md"]}
            ]
        },
    )
    got = search(run_cli, root, "bitcoin OR event")
    assert "plan changed" in got["freshness"]["rebuilt"]
    assert {r["scope"] for r in got["results"]} == {"okf/bundles/ga4"}
    agree(run_cli, root, "bitcoin OR event")


def test_a_changed_scope_is_reindexed_alone(project: Path, run_cli: Run) -> None:
    root = project
    bundles = ["acme_retail", "crypto_bitcoin", "ga4", "stackoverflow"]

    def scopes(ga4_exclude: list[str]) -> dict[str, Any]:
        return {
            "scopes": [
                {
                    "root": f"okf/bundles/{b}",
                    "provider": "okf-markdown",
                    "include": ["**/*.md"],
                    "exclude": ga4_exclude if b == "ga4" else [],
                }
                for b in bundles
            ]
        }

    write_config(root, scopes([]))
    run_cli("-C", str(root), "update")
    write_config(root, scopes(["tables/**"]))
    report = json.loads(run_cli("-C", str(root), "--json", "update").out)
    assert report["rebuilt"] and report["reason"] == "plan changed for scope 'okf/bundles/ga4'"
    ga4 = [
        p
        for p in (root / "okf" / "bundles" / "ga4").rglob("*.md")
        if p.name != "index.md" and "tables" not in p.parts
    ]
    assert report["added"] == len(ga4) and report["removed"] == 0
    assert "re-indexed scope 'okf/bundles/ga4'" in report["notes"]
    for query in ("event OR table", "path:okf/bundles/ga4/tables/ -zzz", "bitcoin"):
        agree(run_cli, root, query)


def test_damaged_manifest_is_repaired_by_the_next_command(project: Path, run_cli: Run) -> None:
    root = project
    run_cli("-C", str(root), "update")
    (root / ".ct" / "okf" / "MANIFEST").write_bytes(b"garbage")
    status = run_cli("-C", str(root), "--json", "status")
    assert "checksum" in json.loads(status.out)["problem"]
    got = search(run_cli, root, "margin")
    assert got["freshness"]["rebuilt"] == "index repaired: MANIFEST: manifest checksum mismatch"
    assert got["freshness"]["generation"] == 2  # never backwards
    assert any("checksum" in n for n in got["freshness"]["notes"])
    agree(run_cli, root, "margin")


def test_status_reports_counts_errors_and_warnings(project: Path, run_cli: Run) -> None:
    root = project
    ga4 = root / "okf" / "bundles" / "ga4"
    (ga4 / "binary.md").write_bytes(b"\x00\x01")
    (ga4 / "latin1.md").write_bytes(b"caf\xe9")
    (ga4 / "badfm.md").write_text("---\ntitle: [\n---\nbody\n")
    run_cli("-C", str(root), "update")
    (ga4 / "extra.md").write_text("# extra")
    run_cli("-C", str(root), "update")
    doc = json.loads(run_cli("-C", str(root), "--json", "status", "--verbose").out)
    assert doc["documents"] == 53 + 2 and doc["segments"] == 2 and doc["tombstones"] == 0
    assert doc["provider_errors"] == 2 and doc["frontmatter_warnings"] == 1
    assert {e["path"] for e in doc["errors"]} == {
        "okf/bundles/ga4/binary.md",
        "okf/bundles/ga4/latin1.md",
    }
    assert doc["warnings"][0]["path"] == "okf/bundles/ga4/badfm.md"
    assert doc["source_bytes"] > 100_000 and doc["index_bytes"] > 0
    assert doc["last_reconcile"]["entries_visited"] > 50
    assert doc["stale"] is None and doc["generation"] == 2
    (ga4 / "binary.md").unlink()
    (ga4 / "latin1.md").write_text("café")
    run_cli("-C", str(root), "update")
    doc = json.loads(run_cli("-C", str(root), "--json", "status").out)
    assert doc["provider_errors"] == 0 and doc["documents"] == 56 and doc["tombstones"] == 0
    text = run_cli("-C", str(root), "status").out
    assert "56 documents in" in text and "frontmatter warnings: 1" in text
