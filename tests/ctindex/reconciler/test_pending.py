"""ctindex/reconciler/pending.py and the packed end of a deferred pass: the
pending reads kept in arrays say what a list of Pending said, and a table
completed from consecutive runs (ctindex/reconciler/capture.py complete())
is kept packed, equal to the dict it replaces and written out byte for byte
as that dict is (ctindex/store/filetable.py)."""

from __future__ import annotations

import os
import pickle
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.reconciler import Manifest, reconcile
from ctindex.reconciler.capture import Captured, complete, ship
from ctindex.reconciler.fingerprint import Fingerprint
from ctindex.reconciler.hashing import Outcome
from ctindex.reconciler.pending import Pending, PendingReads
from ctindex.store import filetable
from tests.ctindex.reconciler.fakes import SimpleFilter, with_fields

I64 = st.integers(-(2**63), 2**63 - 1)
U64 = st.integers(0, 2**64 - 1)
KEY = st.text(st.sampled_from("ab/é.\udcff\U0001f600"), min_size=1, max_size=6)


def _stat(fp: Fingerprint) -> os.stat_result:
    return with_fields(
        os.lstat("."),
        st_size=fp.size,
        st_mtime_ns=fp.mtime_ns,
        st_ctime_ns=fp.ctime_ns,
        st_ino=fp.ino,
        st_dev=fp.dev,
    )


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEY, st.builds(Fingerprint, I64, I64, I64, U64, U64), max_size=30))
def test_pending_reads_keep_every_fingerprint_and_sort_by_key(
    files: dict[str, Fingerprint],
) -> None:
    reads = PendingReads()
    for key, fp in files.items():
        reads.add(key, _stat(fp))
    assert list(reads) == [Pending(k, fp) for k, fp in files.items()]
    assert [reads.size(i) for i in range(len(reads))] == [fp.size for fp in files.values()]
    assert list(reads.by_key()) == sorted(Pending(k, fp) for k, fp in files.items())


def _captured(keys: list[str], dirty: set[str]) -> list[Captured]:
    return [
        Captured(k, Outcome.DIRTY)
        if k in dirty
        else Captured(
            k,
            Outcome.OK,
            Fingerprint(i if i % 5 else -1, 2 * i, 3 * i, 2**64 - 1 - i, i),
            i.to_bytes(16, "little"),
            10 * i,
            i,
        )
        for i, k in enumerate(keys)
    ]


def _complete(shipments: list[object]) -> Manifest:
    with tempfile.TemporaryDirectory() as empty:
        res = reconcile(empty, SimpleFilter(), Manifest(), defer_reads=True)
    complete(res, shipments)  # type: ignore[arg-type]
    assert res.added == res.manifest.sorted_keys() and len(res.pending) == 0
    return res.manifest


@settings(max_examples=150, deadline=None)
@given(
    keys=st.lists(KEY, unique=True, max_size=40).map(sorted),
    parts=st.integers(1, 5),
    dirty=st.sets(KEY, max_size=5),
    order=st.randoms(use_true_random=False),
)
def test_consecutive_runs_complete_a_packed_table_equal_to_the_dict(
    keys: list[str], parts: int, dirty: set[str], order: object
) -> None:
    captured = _captured(keys, dirty)
    size = -(-len(captured) // parts) or 1
    shipments = [
        pickle.loads(pickle.dumps(ship(captured[i : i + size])))
        for i in range(0, len(captured), size)
    ]
    order.shuffle(shipments)  # type: ignore[attr-defined]
    m = _complete(shipments)
    ok = [c for c in captured if c.outcome is Outcome.OK]
    assert m.packed() is not None  # consecutive runs, however they arrive
    want = {c.key: (*c.fingerprint, c.digest, c.recorded_ns) for c in ok if c.fingerprint}
    assert b"".join(filetable.encode_manifest(m)) == filetable.encode_base(want)
    assert filetable.source_bytes(m) == sum(e[0] for e in want.values() if e[0] > 0)
    assert m.raw() == want
    assert all(m.lookup(k) == e for k, e in want.items())


def test_runs_that_overlap_are_completed_as_a_dict() -> None:
    captured = _captured(["a", "b", "c", "d"], set())
    m = _complete([ship([captured[0], captured[2]]), ship([captured[1], captured[3]])])
    assert m.packed() is None
    assert sorted(m.raw()) == ["a", "b", "c", "d"]
