"""A MANIFEST that reads damaged through a network mount (a client's cache
can cut a new one short) is read again, and then not repaired from there:
queries answer from the files, `update` stops, `rebuild` starts afresh
(ctindex/store/generation.py `read_manifest`, docs/network-shares.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import ctindex
from ctindex.policy import netfs
from ctindex.store import generation
from ctindex.store.generation import TornManifest, read_manifest
from tests.conftest import CORPUS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(CORPUS / "acme_retail", root / "okf" / "bundles" / "acme_retail")
    (root / ".git").mkdir()
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    ctindex.Index(root).update()
    return root


def _cut_short(root: Path) -> bytes:
    manifest = root / ".ct" / "okf" / "MANIFEST"
    whole = manifest.read_bytes()
    manifest.write_bytes(whole[: len(whole) // 2])  # as a cached size would read it
    return whole


def _as_a_mount(monkeypatch: pytest.MonkeyPatch) -> None:
    share = netfs.Share("fuse.sshfs", "/", "FUSE filesystem")
    monkeypatch.setattr(netfs, "share_of", lambda *_a, **_k: share)
    monkeypatch.setattr(generation, "MOUNT_REREAD_PAUSES_S", (0.0, 0.0))


def test_on_a_local_disk_damage_is_damage(project: Path) -> None:
    _cut_short(project)
    with pytest.raises(ctindex.IndexCorrupt):
        read_manifest(project / ".ct" / "okf")
    got = ctindex.Index(project).search("customer")  # repaired, as always
    assert got.freshness.generation is not None


def test_through_a_mount_it_is_read_again_and_never_repaired(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as_a_mount(monkeypatch)
    manifest = project / ".ct" / "okf" / "MANIFEST"
    whole = _cut_short(project)
    reads: list[int] = []
    once = generation._read_manifest_once

    def settles(path: Path) -> generation.StoreManifest | None:
        reads.append(1)
        if len(reads) == 2:  # the mount's cache caught up
            manifest.write_bytes(whole)
        return once(path)

    monkeypatch.setattr(generation, "_read_manifest_once", settles)
    assert read_manifest(project / ".ct" / "okf") is not None and len(reads) == 2
    monkeypatch.setattr(generation, "_read_manifest_once", once)
    _cut_short(project)
    with pytest.raises(TornManifest) as torn:
        read_manifest(project / ".ct" / "okf")
    assert isinstance(torn.value, ctindex.IndexBusy) and "network mount" in str(torn.value)
    got = ctindex.Index(project).search("customer")
    assert got.freshness.reason == "MANIFEST reads torn through this mount: answered from the files"
    assert got.hits and got.freshness.generation is None
    assert len(manifest.read_bytes()) < len(whole)  # nothing written over it
    with pytest.raises(ctindex.IndexBusy):
        ctindex.Index(project).update()
    report = ctindex.Index(project).rebuild()  # afresh: the one way out, on purpose
    assert report.rebuilt and read_manifest(project / ".ct" / "okf") is not None
