"""Acceptance: create, modify, rename and remove become searchable /
unsearchable after one bounded freshness barrier, with the daemon running
(mode watcher-clean), including an editor's write-temp-then-rename save and
folders renamed, filled, moved and removed."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.daemon_support import CliProject


def found(cli_project: CliProject, word: str) -> list[str]:
    """Paths matching `word` in the very next indexed search, which must be
    watcher-clean and equal to --direct."""
    doc = cli_project.search(word)
    assert doc["freshness"]["mode"] == "watcher-clean", doc["freshness"]
    hits = cli_project.hits(doc)
    assert hits == cli_project.hits(cli_project.search(word, direct=True))
    return hits


@pytest.mark.slow
def test_acceptance_12_2_changes_visible_to_the_next_search(cli_project: CliProject) -> None:
    cli_project.check("margin")  # starts the daemon (this one is a fallback)
    cli_project.wait_daemon()
    metrics = cli_project.root / "acme_retail" / "metrics"

    doc = metrics / "zebra.md"
    doc.write_text("# Zebra\n\nquokkaword lives here.\n")
    assert found(cli_project, "quokkaword") == ["acme_retail/metrics/zebra.md"]

    doc.write_text("# Zebra\n\nwombatword lives here now.\n")
    assert found(cli_project, "wombatword") == ["acme_retail/metrics/zebra.md"]
    assert found(cli_project, "quokkaword") == []

    doc.rename(metrics / "zebra2.md")
    assert found(cli_project, "wombatword") == ["acme_retail/metrics/zebra2.md"]

    (metrics / "zebra2.md").unlink()
    assert found(cli_project, "wombatword") == []

    # Editor save: write a temporary sibling, then rename it over the original.
    target = metrics / "revenue.md"
    temp = metrics / ".revenue.md.swp"
    temp.write_text(target.read_text() + "\nplatypusword added by the editor.\n")
    os.replace(temp, target)
    assert found(cli_project, "platypusword") == ["acme_retail/metrics/revenue.md"]

    # A folder created, renamed, then filled.
    (cli_project.root / "acme_retail" / "newdir").mkdir()
    (cli_project.root / "acme_retail" / "newdir").rename(cli_project.root / "acme_retail" / "moved")
    (cli_project.root / "acme_retail" / "moved" / "a.md").write_text("# A\n\nechidnaword\n")
    assert found(cli_project, "echidnaword") == ["acme_retail/moved/a.md"]

    # A folder created and filled at once (before any watch can exist on it).
    deep = cli_project.root / "acme_retail" / "fresh" / "sub"
    deep.mkdir(parents=True)
    (deep / "b.md").write_text("# B\n\nnumbatword\n")
    assert found(cli_project, "numbatword") == ["acme_retail/fresh/sub/b.md"]

    # A folder holding documents renamed, then removed.
    (cli_project.root / "acme_retail" / "moved").rename(cli_project.root / "acme_retail" / "moved2")
    assert found(cli_project, "echidnaword") == ["acme_retail/moved2/a.md"]
    shutil.rmtree(cli_project.root / "acme_retail" / "moved2")
    assert found(cli_project, "echidnaword") == []

    status = cli_project.status()
    assert status["lane"] == "clean" and status["reconciles"] >= 1
    assert status["last_batch"] is not None and status["last_batch"]["latency_ms"] is not None
