"""store/integrity.py: the cheap check of a published generation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import StoreManifest, read_manifest
from ctindex.store.integrity import check_generation, damage_reason


@pytest.fixture
def built(make_project: Callable[..., Path]) -> tuple[Path, StoreManifest]:
    root = make_project("ga4")
    (root / "okf" / "bundles" / "ga4" / "broken.md").write_bytes(b"\xff")  # a diag file
    project = Project.at(root)
    transaction.update(project, load_plan(project))
    m = read_manifest(project.index_dir)
    assert m is not None and m.diag and m.files
    return project.index_dir, m


def test_a_published_generation_passes(built: tuple[Path, StoreManifest]) -> None:
    check_generation(*built)


def test_a_missing_segment_is_damage(built: tuple[Path, StoreManifest]) -> None:
    index_dir, m = built
    (index_dir / m.segments[0].name).unlink()
    with pytest.raises(IndexCorrupt, match="missing"):
        check_generation(index_dir, m)


@pytest.mark.parametrize("which", ["diag", "files"])
def test_a_truncated_file_is_damage(built: tuple[Path, StoreManifest], which: str) -> None:
    index_dir, m = built
    name = m.diag if which == "diag" else m.files
    assert name is not None
    path = index_dir / name
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(IndexCorrupt):
        check_generation(index_dir, m)


def test_the_file_table_is_skipped_when_the_caller_loads_it(
    built: tuple[Path, StoreManifest],
) -> None:
    index_dir, m = built
    assert m.files is not None
    (index_dir / m.files).write_bytes(b"junk")
    check_generation(index_dir, m, file_table=False)
    with pytest.raises(IndexCorrupt):
        check_generation(index_dir, m)


def test_damage_reason_names_the_file_inside_the_index(tmp_path: Path) -> None:
    exc = IndexCorrupt(f"{tmp_path}/seg-1.seg: header checksum mismatch (damaged index file)")
    assert damage_reason(exc, tmp_path) == "index repaired: seg-1.seg: header checksum mismatch"


def test_an_older_format_is_reported_upgraded_not_repaired(tmp_path: Path) -> None:
    """A manifest of another format is no damage: the reason says so."""
    from ctindex.errors import IndexFormatChanged
    from ctindex.store.durable import crc
    from ctindex.store.generation import FORMAT, StoreManifest

    body = b'{"format": %d}' % (FORMAT - 1)
    with pytest.raises(IndexFormatChanged) as got:
        StoreManifest.from_bytes(body + b"\ncrc32:%08x\n" % crc(body), f"{tmp_path}/MANIFEST")
    assert damage_reason(got.value, tmp_path) == (
        f"index upgraded: MANIFEST: index format {FORMAT - 1}, this version reads format {FORMAT}"
    )
