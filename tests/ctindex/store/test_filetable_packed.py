"""A full pass's new file table made by editing the previous one packed
(ctindex/reconciler/manifest.py PackedTable.edited, from the store's base and
delta: ctindex/store/filetable.py) is the table the dict path makes, and is
recorded the same way: the same delta, or the same new base file byte for
byte, and the same source bytes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.reconciler import Manifest, ReconcileResult
from ctindex.reconciler.manifest import PackedTable, RawEntry
from ctindex.store import filetable
from ctindex.store.generation import StoreManifest

KEY = st.text(st.sampled_from("ab/é.\udcff\U0001f600"), min_size=1, max_size=5)
ENTRY = st.builds(
    lambda n, dirty: (-1 if dirty else n, n * 7, n * 11, n + 1, 3, n.to_bytes(16, "little"), n),
    st.integers(0, 2**40),
    st.booleans(),
)
EDITS = st.dictionaries(KEY, st.one_of(st.none(), ENTRY), max_size=12)


@settings(max_examples=200, deadline=None)
@given(table=st.dictionaries(KEY, ENTRY, max_size=30), edits=EDITS)
def test_an_edited_packed_table_is_the_edited_dict(
    table: dict[str, RawEntry], edits: dict[str, RawEntry | None]
) -> None:
    keys = sorted(table)
    packed = PackedTable(keys, b"".join(filetable._RECORD.pack(*table[k]) for k in keys))
    want = dict(table)
    for k, e in edits.items():
        if e is None:
            want.pop(k, None)
        else:
            want[k] = e
    got = packed.edited(edits)
    assert got.keys == sorted(want) and got.materialize() == want
    assert got.parent is packed and got.edits == edits
    assert all(got.get(k) == e for k, e in want.items()) and got.get("\x00") is None


@settings(max_examples=120, deadline=None)
@given(
    table=st.dictionaries(KEY, ENTRY, min_size=1, max_size=40),
    delta=EDITS,
    edits=st.one_of(EDITS, st.dictionaries(KEY, ENTRY, min_size=0, max_size=60)),
    small_delta_max=st.booleans(),
)
def test_the_packed_path_records_the_table_as_the_dict_path_does(
    table: dict[str, RawEntry],
    delta: dict[str, RawEntry | None],
    edits: dict[str, RawEntry | None],
    small_delta_max: bool,
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        index = Path(folder)
        (index / "files-1.bin").write_bytes(filetable.encode_base(table))
        delta_json = filetable.delta_to_json(delta)
        base = StoreManifest(generation=1, files="files-1.bin", files_delta=delta_json)
        base.source_bytes = sum(e[0] for e in table.values() if e[0] > 0)
        packed_prev = filetable.load(index, "files-1.bin", delta_json)
        dict_prev = Manifest(dict(packed_prev.raw()))
        packed_prev = filetable.load(index, "files-1.bin", delta_json)  # not materialized
        prev_table = packed_prev.packed()
        assert prev_table is not None and prev_table.materialize() == dict_prev.raw()
        new_table = prev_table.edited(edits)
        packed_res = ReconcileResult(manifest=Manifest(source=new_table))
        dict_res = ReconcileResult(manifest=Manifest(new_table.materialize()))
        old_max = filetable.DELTA_MAX
        filetable.DELTA_MAX = 3 if small_delta_max else old_max
        try:
            got = filetable.table_update(index, base, packed_prev, packed_res, False)
            want = filetable.table_update(index, base, dict_prev, dict_res, False)
        finally:
            filetable.DELTA_MAX = old_max
        # The packed path was taken: neither table was made a dict.
        assert packed_res.manifest._raw is None and packed_prev._raw is None
        assert got.delta == want.delta and got.source_bytes == want.source_bytes
        as_bytes = [None if t.base is None else b"".join(t.base) for t in (got, want)]
        assert as_bytes[0] == as_bytes[1]


def test_a_base_whose_keys_are_out_of_order_is_not_edited_packed(tmp_path: Path) -> None:
    """ctindex writes a base's keys sorted; one that is not (not written by
    ctindex, its checksum intact) is made a dict, never bisected."""
    import struct

    keys = ["b.md", "a.md"]
    entries = [(1, 2, 3, 4, 5, bytes(16), 6), (7, 8, 9, 10, 11, bytes(16), 12)]
    encoded = [k.encode() for k in keys]
    offs = [0, len(encoded[0]) + 1, len(encoded[0]) + len(encoded[1]) + 2]
    blob = b"\0".join(encoded)
    body = (
        filetable._HEAD.pack(filetable.MAGIC, filetable.VERSION, len(keys), len(blob))
        + b"".join(filetable._RECORD.pack(*e) for e in entries)
        + struct.pack("<3I", *offs)
        + blob
    )
    (tmp_path / "files.bin").write_bytes(body + filetable._xxh3(body))
    m = filetable.load(tmp_path, "files.bin", {})
    assert m.packed() is None
    assert m.raw() == dict(zip(keys, entries, strict=True))
