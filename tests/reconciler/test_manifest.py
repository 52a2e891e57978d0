"""Manifest format: round trip, atomic save, corruption detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ctindex.reconciler import Entry, Fingerprint, Manifest, ManifestCorrupt


def sample(n: int = 50) -> Manifest:
    keys = [f"dir{i % 7}/file-{i}.md" for i in range(n)] + [os.fsdecode(b"odd\xff/na\xe9me")]
    return Manifest.from_entries(
        {
            k: Entry(
                Fingerprint(i, 10**18 + i, 10**18 + 2 * i, 2**63 + i, 66 + i),
                bytes([i % 256]) * 16,
                1_700_000_000 * 10**9 + i,
            )
            for i, k in enumerate(keys)
        }
    )


def test_round_trip_bytes_and_mapping_api() -> None:
    m = sample()
    back = Manifest.from_bytes(m.to_bytes())
    assert back == m and dict(back) == dict(m) and len(back) == 51
    e = back["dir3/file-3.md"]
    assert e.fp == Fingerprint(3, 10**18 + 3, 10**18 + 6, 2**63 + 3, 69)
    assert e.digest == b"\x03" * 16
    assert Manifest.from_bytes(Manifest().to_bytes()) == Manifest()
    assert list(back) == list(m)  # table order (the walk order) survives the round trip
    assert back.sorted_keys() == sorted(m)


def test_save_is_atomic_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "manifest.bin"
    sample(10).save(target)
    sample(20).save(target)
    assert Manifest.load(target) == sample(20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.bin"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty"])
def test_corruption_raises_manifest_corrupt_naming_the_file(tmp_path: Path, damage: str) -> None:
    target = tmp_path / "m.bin"
    sample().save(target)
    data = bytearray(target.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[100] ^= 0x40
    elif damage == "magic":
        data[0:8] = b"NOTMINE!"
    else:
        data = bytearray()
    target.write_bytes(bytes(data))
    with pytest.raises(ManifestCorrupt, match=r"m\.bin"):
        Manifest.load(target)


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Manifest.load(tmp_path / "absent")
