"""OpenGeneration (ctindex/store/snapshot.py) keeps the generation it holds
while the published manifest serves the same documents: a pass that only
re-recorded the file table (a touched file, racily clean files settled)
opens nothing, yet the held manifest is the published one, identity and
all; new documents open the new generation once."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.store.generation import read_manifest
from ctindex.store.snapshot import OpenGeneration
from tests.conftest import CORPUS


def test_a_file_table_refresh_keeps_the_open_generation(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(CORPUS / "acme_retail", root / "okf" / "bundles" / "acme_retail")
    (root / ".git").mkdir()
    p = Project.at(root)
    transaction.update(p, load_plan(p))
    held = OpenGeneration(Path(p.index_dir))
    first = held.current()
    assert held.opened == 1
    bundle = root / "okf" / "bundles" / "acme_retail"
    page = next(f for f in bundle.rglob("*.md") if f.name not in ("index.md", "log.md"))
    later = time.time() + 5
    os.utime(page, (later, later))  # metadata only: the same documents
    report = transaction.update(p, load_plan(p))
    assert not report.published and report.refreshed, report
    again = held.current()
    published = read_manifest(Path(p.index_dir))
    assert published is not None
    assert again is first and held.opened == 1
    assert again.manifest.identity == published.identity  # what a barrier vouches for
    page.write_text(page.read_text() + "\nnew words zqxv7reuse\n")
    assert transaction.update(p, load_plan(p)).published
    newer = held.current()
    assert newer is not first and held.opened == 2 and newer.generation == first.generation + 1
    held.close()
