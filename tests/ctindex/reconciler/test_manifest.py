"""ctindex.reconciler.manifest: the in-memory table key -> Entry."""

from __future__ import annotations

import os

from ctindex.reconciler import Entry, Fingerprint, Manifest


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


def test_mapping_api_answers_from_the_raw_table() -> None:
    m = sample()
    assert len(m) == 51 and dict(m) == {k: m[k] for k in m}
    e = m["dir3/file-3.md"]
    assert e.fp == Fingerprint(3, 10**18 + 3, 10**18 + 6, 2**63 + 3, 69)
    assert e.digest == b"\x03" * 16
    assert m.lookup("dir3/file-3.md") == (*e.fp, e.digest, e.recorded_ns)
    assert "absent" not in m and m.lookup("absent") is None
    assert m.sorted_keys() == sorted(m) and m == Manifest(dict(m.raw()))
    assert Manifest() == Manifest.from_entries({}) and len(Manifest()) == 0


def test_the_on_disk_format_is_gone() -> None:
    """The reconciler writes no file: its table lives in the store's file
    table (ctindex/store/filetable.py)."""
    assert not hasattr(Manifest, "save") and not hasattr(Manifest, "load")
    assert not hasattr(Manifest, "to_bytes") and not hasattr(Manifest, "from_bytes")
