"""Acceptance: unknown, binary and database files never enter the index
without a registered provider that accepts them — not even when the
project's include pattern asks for every file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

MARK = "zyxquokkaword"  # one word planted in every file that must stay out


def _plant_foreign_files(bundle: Path) -> list[str]:
    """Files of every kind okf-markdown must refuse, each carrying MARK."""
    planted = {
        "data.db": None,
        "cache.sqlite3": None,
        "notes.txt": f"{MARK} plain text\n".encode(),
        "page.html": f"<p>{MARK}</p>\n".encode(),
        "tool.py": f"# {MARK}\n".encode(),
        "image.png": b"\x89PNG\r\n\x1a\n" + MARK.encode() + b"\x00" * 16,
        "archive.md.gz": b"\x1f\x8b\x08\x00" + MARK.encode(),
        "binary.md": b"# Title\n" + MARK.encode() + b"\x00\x01\x02 binary\n",
        "latin1.md": f"# Caf\xe9 {MARK}\n".encode("latin-1"),
        "index.md": f"# reserved {MARK}\n".encode(),
        "sub/log.md": f"# reserved {MARK}\n".encode(),
    }
    for name, content in planted.items():
        path = bundle / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:  # a real SQLite database holding the word
            with sqlite3.connect(path) as db:
                db.execute("create table t (x text)")
                db.execute("insert into t values (?)", (MARK,))
        else:
            path.write_bytes(content)
    return sorted(planted)


def _search_ids(
    run_cli: Callable[..., CliResult], project: Path, query: str, *extra: str
) -> set[str]:
    result = run_cli("-C", str(project), "--json", "search", *extra, "--", query)
    assert result.code in (0, 1), result.err
    return {hit["path"] for hit in json.loads(result.out)["results"]}


def test_acceptance_12_4_foreign_files_never_enter_the_index(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult]
) -> None:
    project = make_project("acme_retail")
    bundle = project / "okf" / "bundles" / "acme_retail"
    planted = _plant_foreign_files(bundle)
    # Ask for everything: the include pattern cannot bypass the provider boundary.
    (project / ".ct").mkdir()
    (project / ".ct" / "index.jsonc").write_text(
        json.dumps(
            {
                "watch": False,
                "exclude": [],
                "scopes": [
                    {
                        "root": "okf/bundles/acme_retail",
                        "provider": "okf-markdown",
                        "include": ["**/*"],
                        "exclude": [],
                    }
                ],
            }
        )
    )

    update = run_cli("-C", str(project), "update")
    assert update.code == 0, update.err
    assert _search_ids(run_cli, project, MARK) == set()
    assert _search_ids(run_cli, project, MARK, "--direct") == set()

    decisions = json.loads(
        run_cli(
            "-C", str(project), "--json", "why", *[f"okf/bundles/acme_retail/{n}" for n in planted]
        ).out
    )
    reasons = {d["path"].rsplit("/", 1)[-1]: d["reason"] for d in decisions["decisions"]}
    # Unknown kinds of file: no provider claims them.
    for name in (
        "data.db",
        "cache.sqlite3",
        "notes.txt",
        "page.html",
        "tool.py",
        "image.png",
        "archive.md.gz",
    ):
        assert reasons[name] == "unsupported-provider", (name, reasons[name])
    # Reserved names: the provider claims .md but refuses them.
    assert reasons["index.md"] == reasons["log.md"] == "unsupported-type"
    # Binary or non-UTF-8 .md files pass the path decision but are provider
    # read errors at indexing time: reported by status, never indexed.
    assert reasons["binary.md"] == reasons["latin1.md"] == "included"
    status = json.loads(run_cli("-C", str(project), "--json", "status", "--verbose").out)
    assert status["provider_errors"] == 2
    assert "okf/bundles/acme_retail/binary.md" in json.dumps(status)
    assert "okf/bundles/acme_retail/latin1.md" in json.dumps(status)

    # Every indexed document is a UTF-8 .md file that is not reserved.
    everything = _search_ids(run_cli, project, "-zzznotaword", "--limit", "100000")
    assert everything
    assert all(p.endswith(".md") and not p.endswith(("/index.md", "/log.md")) for p in everything)
    assert not everything & {f"okf/bundles/acme_retail/{n}" for n in planted}
