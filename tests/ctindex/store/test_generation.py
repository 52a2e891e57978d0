"""store/generation.py: the manifest's bytes and what a reader makes of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctindex.store.durable import IndexCorrupt, crc
from ctindex.store.generation import StoreManifest, read_manifest


def _write(folder: Path, body: dict[str, object]) -> None:
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    (folder / "MANIFEST").write_bytes(data + b"\ncrc32:%08x\n" % crc(data))


def test_retired_files_read_back_as_pairs_and_write_the_same_bytes(tmp_path: Path) -> None:
    m = StoreManifest(generation=3, retired=[("seg-2-ab.seg", 11), ("del-2-cd.del", 12)])
    (tmp_path / "MANIFEST").write_bytes(m.to_bytes())
    assert b'"retired":[["seg-2-ab.seg",11],["del-2-cd.del",12]]' in m.to_bytes()
    got = read_manifest(tmp_path)
    assert got is not None
    assert got.retired == [("seg-2-ab.seg", 11), ("del-2-cd.del", 12)]
    assert got.to_bytes() == m.to_bytes()
    m.identity = got.identity  # m itself was never read nor written
    assert got == m  # the pairs a writer makes equal the pairs a reader makes


def test_a_retired_entry_of_the_wrong_shape_is_damage(tmp_path: Path) -> None:
    """A checksummed manifest whose retired list holds no [name, time] pair
    (written by hand) is read as damaged, like any field it cannot use,
    instead of failing the garbage collector after the next publish."""
    body = json.loads(StoreManifest(generation=3).to_bytes().rpartition(b"\ncrc32")[0])
    body["retired"] = [["seg-1-ab.seg"]]
    _write(tmp_path, body)
    with pytest.raises(IndexCorrupt, match="manifest unreadable"):
        read_manifest(tmp_path)


def test_a_manifest_without_a_retired_list_reads(tmp_path: Path) -> None:
    body = json.loads(StoreManifest(generation=3).to_bytes().rpartition(b"\ncrc32")[0])
    del body["retired"]
    _write(tmp_path, body)
    got = read_manifest(tmp_path)
    assert got is not None and got.retired == [] and got.generation == 3
