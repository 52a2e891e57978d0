"""The full stat fingerprint and the racily-clean rule (ctindex/reconciler/fingerprint.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctindex.reconciler.fingerprint import (
    DEFAULT_GRANULARITY_NS,
    Fingerprint,
    fingerprint_of,
    from_json,
    racily_clean,
)

SECOND = 1_000_000_000


def test_fingerprint_of_takes_all_five_fields_of_a_real_stat(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"hello")
    st_ = os.lstat(path)
    fp = fingerprint_of(st_)
    assert fp == Fingerprint(5, st_.st_mtime_ns, st_.st_ctime_ns, st_.st_ino, st_.st_dev)
    assert fp._fields == ("size", "mtime_ns", "ctime_ns", "ino", "dev")
    assert (fp.size, fp[1], fp[2]) == (5, st_.st_mtime_ns, st_.st_ctime_ns)


def test_a_replaced_file_with_restored_size_and_mtime_is_told_apart(tmp_path: Path) -> None:
    """What `cp -p` or an archive restore does: same size, same mtime, a new
    file. mtime and size alone would call it unchanged."""
    path = tmp_path / "a.md"
    path.write_bytes(b"version one")
    before = fingerprint_of(os.lstat(path))
    copy = tmp_path / "a.md.tmp"
    copy.write_bytes(b"version two")  # same length
    os.utime(copy, ns=(before.mtime_ns, before.mtime_ns))
    os.replace(copy, path)
    after = fingerprint_of(os.lstat(path))
    assert (after.size, after.mtime_ns) == (before.size, before.mtime_ns)
    assert after != before
    assert after.ino != before.ino


# -- JSON records ---------------------------------------------------------------------

_INT = st.integers(min_value=-(2**63), max_value=2**64)


@given(st.tuples(_INT, _INT, _INT, _INT, _INT))
def test_from_json_round_trips_a_stored_fingerprint(fields: tuple[int, ...]) -> None:
    fp = Fingerprint(*fields)
    stored = json.loads(json.dumps(fp))  # a NamedTuple is stored as a JSON list
    assert stored == list(fields)
    back = from_json(stored)
    assert back == fp and isinstance(back, Fingerprint)


@pytest.mark.parametrize(
    "record",
    [
        None,
        1_700_000_000_000_000_000,  # an older record: the mtime alone
        "5,1,2,3,4",
        [],
        [5, 1, 2, 3],
        [5, 1, 2, 3, 4, 6],
        [5, 1.0, 2, 3, 4],
        [5, True, 2, 3, 4],  # JSON true is no integer here
        [5, 1, 2, 3, None],
        [5, 1, 2, 3, "4"],
        [[5], 1, 2, 3, 4],
        (5, 1, 2, 3, 4),  # JSON never yields a tuple: only a list is a record
        {"size": 5, "mtime_ns": 1, "ctime_ns": 2, "ino": 3, "dev": 4},
    ],
)
def test_from_json_refuses_anything_but_five_integers(record: object) -> None:
    assert from_json(record) is None


@given(st.recursive(st.none() | st.booleans() | st.floats() | st.text(), st.lists))
@pytest.mark.slow
def test_from_json_never_raises_on_json_values(record: object) -> None:
    got = from_json(record)
    assert got is None or (isinstance(record, list) and list(got) == record)


# -- the racy window ------------------------------------------------------------------


def _fp(mtime_ns: int, ctime_ns: int) -> Fingerprint:
    return Fingerprint(10, mtime_ns, ctime_ns, 1, 1)


RECORDED = 1_000 * SECOND


@pytest.mark.parametrize(
    ("mtime_ns", "ctime_ns", "racy"),
    [
        (RECORDED - 10 * SECOND, RECORDED - 10 * SECOND, False),  # both long settled
        (RECORDED - 2 * SECOND, RECORDED - 2 * SECOND, False),  # exactly one tick: settled
        (RECORDED - 2 * SECOND + 1, RECORDED - 10 * SECOND, True),  # mtime one ns inside
        (RECORDED - 10 * SECOND, RECORDED - 2 * SECOND + 1, True),  # ctime alone inside
        (RECORDED, RECORDED, True),  # stamped at the reading itself
        (RECORDED + SECOND, RECORDED - 10 * SECOND, True),  # a stamp from the future
    ],
)
def test_racily_clean_boundaries(mtime_ns: int, ctime_ns: int, racy: bool) -> None:
    assert DEFAULT_GRANULARITY_NS == 2 * SECOND
    assert racily_clean(_fp(mtime_ns, ctime_ns), RECORDED) is racy


def test_racily_clean_takes_any_sequence_laid_out_like_a_fingerprint() -> None:
    # a longer record (the stamps followed by more fields) is read by position
    entry = (10, RECORDED - SECOND, RECORDED - 10 * SECOND, 1, 1, 0xD1, 0xD2)
    assert racily_clean(entry, RECORDED)
    assert not racily_clean(entry, RECORDED, granularity_ns=SECOND)


@given(
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=1, max_value=10 * SECOND),
)
def test_racy_means_the_newer_stamp_is_within_one_granularity(
    mtime_ns: int, ctime_ns: int, recorded_ns: int, granularity_ns: int
) -> None:
    racy = racily_clean(_fp(mtime_ns, ctime_ns), recorded_ns, granularity_ns)
    assert racy == (recorded_ns - max(mtime_ns, ctime_ns) < granularity_ns)
    # a later reading can only settle a fingerprint, never unsettle it
    if not racy:
        assert not racily_clean(_fp(mtime_ns, ctime_ns), recorded_ns + 1, granularity_ns)


def test_a_file_written_just_now_is_racy_against_a_clock_read_before_its_stat(
    tmp_path: Path,
) -> None:
    """The rule's purpose with a real file: the clock reading taken before
    the stat is within the window of a file written a moment ago."""
    path = tmp_path / "fresh.md"
    path.write_text("x")
    recorded = time.time_ns()
    assert racily_clean(fingerprint_of(os.lstat(path)), recorded)
    settled = tmp_path / "old.md"
    settled.write_text("x")
    os.utime(settled, ns=(recorded - 60 * SECOND, recorded - 60 * SECOND))
    # ctime moved with utime: still racy, although the mtime is a minute old
    assert racily_clean(fingerprint_of(os.lstat(settled)), recorded)
