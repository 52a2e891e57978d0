"""The file table of a generation: sorted base + inline delta (store/filetable.py),
and how the indexer keeps it (small deltas, compaction, same-generation refresh)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.store import filetable, passlog
from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import read_manifest


def entry(n: int) -> filetable.RawEntry:
    return (n, n * 10, n * 10, n + 1, 7, n.to_bytes(16, "little"), n * 100)


KEYS = ["a", "a/b.md", "a/c/d.md", "a.md", "a0", "b/x.md", "z\udcff.md", "é/f.md", "\U0001f600"]


def test_base_round_trips_and_subtrees(tmp_path: Path) -> None:
    raw = {k: entry(i) for i, k in enumerate(KEYS)}
    path = tmp_path / "files.bin"
    path.write_bytes(filetable.encode_base(raw))
    base = filetable.BaseTable.load(path)
    assert base.everything() == raw
    assert [base[i] for i in range(len(base))] == sorted(KEYS)
    got = base.subtrees(["a"])
    assert got == {k: raw[k] for k in ("a", "a/b.md", "a/c/d.md")}
    assert base.subtrees(["é", "z\udcff.md"]) == {k: raw[k] for k in ("é/f.md", "z\udcff.md")}
    assert base.subtrees(["nothing"]) == {}
    assert base.subtrees([""]) == raw
    empty = tmp_path / "empty.bin"
    empty.write_bytes(filetable.encode_base({}))
    assert filetable.BaseTable.load(empty).everything() == {}


def test_damaged_base_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "files.bin"
    data = bytearray(filetable.encode_base({k: entry(i) for i, k in enumerate(KEYS)}))
    data[40] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(IndexCorrupt, match="checksum"):
        filetable.BaseTable.load(path)


def test_load_applies_the_delta(tmp_path: Path) -> None:
    raw = {k: entry(i) for i, k in enumerate(KEYS)}
    (tmp_path / "f.bin").write_bytes(filetable.encode_base(raw))
    delta = filetable.delta_to_json({"a/b.md": None, "a/new.md": entry(50), "b/x.md": entry(60)})
    delta = json.loads(json.dumps(delta))  # as MANIFEST stores it
    full = filetable.load(tmp_path, "f.bin", delta).raw()
    want = dict(raw)
    del want["a/b.md"]
    want["a/new.md"], want["b/x.md"] = entry(50), entry(60)
    assert full == want
    part = filetable.load(tmp_path, "f.bin", delta, ["a"]).raw()
    assert part == {k: v for k, v in want.items() if k == "a" or k.startswith("a/")}
    assert filetable.changes(raw, want) == {
        "a/b.md": None,
        "a/new.md": entry(50),
        "b/x.md": entry(60),
    }


@pytest.mark.parametrize(
    "damaged",
    [
        [1, 2, 3, 4, 5, 17, 7],  # the digest is not a hex string
        [1, 2, 3, 4, 5, "zz", 7],  # nor hex
        [1, 2, 3],  # fields missing
        ["big", 2, 3, 4, 5, "00" * 16, 7],  # a size that is no number
        [None, 2, 3, 4, 5, "00" * 16, 7],
    ],
)
def test_a_damaged_delta_entry_is_reported(tmp_path: Path, damaged: list[object]) -> None:
    """MANIFEST's inline delta holding an entry of the wrong shape is the
    store's damage, said as such: never a bare TypeError."""
    with pytest.raises(IndexCorrupt, match="file table delta unreadable"):
        filetable.load(tmp_path, None, {"a.md": damaged})


def test_native_lookup_searches_a_base_in_byte_order_and_hashes_any_other(
    tmp_path: Path,
) -> None:
    """encode_base sorts by code point. Without surrogate escapes that is byte
    order too, and the native table searches the file in place; with an
    escape next to 'é' it is not, and the table falls back to hashing. Both
    answer like everything()."""
    from ctindex.reconciler import native

    if native.module() is None:
        pytest.skip("extension not in use (not built, or CTINDEX_PURE set)")
    for keys, ordered in ((KEYS, True), ([*KEYS, "d/é", "d/\udc80"], False)):
        raw = {k: entry(i) for i, k in enumerate(keys)}
        path = tmp_path / "files.bin"
        path.write_bytes(filetable.encode_base(raw))
        delta: filetable.Delta = {"a.md": None, "new": entry(70), "a0": entry(71)}
        table = filetable._FullTable(filetable.BaseTable.load(path), delta).native()
        assert table is not None and table.ordered is ordered
        want = filetable.load(tmp_path, "files.bin", filetable.delta_to_json(delta)).raw()
        assert table.live == len(want)
        for k in [*raw, *delta, "a/", "zz"]:
            rec = table.get(native.encode_key(k))
            assert (None if rec is None else native.unpack(rec)) == want.get(k)
        unseen = table.unseen(bytearray(table.size))
        assert sorted(k.decode("utf-8", "surrogateescape") for k in unseen) == sorted(want)


@pytest.fixture
def small(tmp_path: Path) -> Project:
    kb = tmp_path / "kb"
    kb.mkdir()
    (tmp_path / ".git").mkdir()
    (kb / "index.md").write_text("# kb\n")
    for i in range(30):
        (kb / f"d{i % 3}").mkdir(exist_ok=True)
        (kb / f"d{i % 3}" / f"doc{i}.md").write_text(f"# Doc {i}\n\nword{i} common\n")
    return Project.at(tmp_path)


def test_narrowed_updates_keep_a_delta_then_compact(
    small: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = load_plan(small)
    first = transaction.update(small, plan)
    m = read_manifest(small.index_dir)
    assert m is not None and m.files and m.files_delta == {}
    monkeypatch.setattr(filetable, "DELTA_MAX", 3)
    for i in range(5):
        path = small.root / "kb" / "d1" / f"doc{3 * i + 1}.md"
        path.write_text(f"# Doc changed {i}\n\nchanged{i}\n")
        report = transaction.update_paths(small, plan, [f"kb/d1/doc{3 * i + 1}.md"])
        assert report.published and report.changed == 1
        m = read_manifest(small.index_dir)
        assert m is not None
        assert len(m.files_delta) <= 3  # compacted into a new base beyond DELTA_MAX
    (small.root / "kb" / "d2" / "doc2.md").unlink()
    transaction.update_paths(small, plan, ["kb/d2"])
    m = read_manifest(small.index_dir)
    assert m is not None and m.generation > first.generation
    # The table as stored equals what a full pass over the files finds.
    stored = filetable.load_file_table(small.index_dir, m).raw()
    again = transaction.update(small, plan)
    assert not again.published and not again.content_changed
    assert set(stored) == {k for k in stored if os.path.exists(small.path(k))}
    assert "kb/d2/doc2.md" not in stored and len(stored) == 29
    m2 = read_manifest(small.index_dir)
    assert m2 is not None and m2.source_bytes == sum(e[0] for e in stored.values())


def test_racily_clean_files_are_recorded_once_old_enough(small: Project) -> None:
    plan = load_plan(small)
    first = transaction.update(small, plan)  # files written just now: racily clean
    time.sleep(2.1)  # past the 2 s timestamp granularity the reconciler assumes
    again = transaction.update(small, plan)
    assert again.refreshed and not again.published
    assert again.generation == first.generation
    transaction.update(small, plan)
    m = read_manifest(small.index_dir)
    assert passlog.last_pass(small.index_dir, m)["files_hashed"] == 0
