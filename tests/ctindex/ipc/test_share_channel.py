"""The share channel's format (ctindex/ipc/share_channel.py): fixed slots,
and which requests a share host takes at all."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctindex.ipc import share_channel as ch

GOOD: dict[str, Any] = {
    "op": "update",
    "token": "0123abcd",
    "plan": "d" * 64,
    "client": "laptop",
    "build": "b" * 40,
}


@pytest.mark.parametrize("op", ch.OPS)
def test_every_documented_op_is_taken(op: str) -> None:
    req = ch.parse_request({**GOOD, "op": op, "timeout_ms": 200})
    assert req == ch.Request(op, "0123abcd", "d" * 64, 200, "laptop", "b" * 40)


@pytest.mark.parametrize(
    "doc, why",
    [
        ({**GOOD, "path": "/etc/passwd"}, "unknown field 'path'"),
        ({**GOOD, "argv": ["rm", "-rf", "/"]}, "unknown field 'argv'"),
        ({**GOOD, "op": "exec"}, "unknown op 'exec'"),
        ({**GOOD, "op": ["update"]}, "unknown op"),
        ({**GOOD, "token": "../x"}, "token missing or not hex"),
        ({**GOOD, "token": "a" * 65}, "token missing or not hex"),
        ({**GOOD, "token": ""}, "token missing or not hex"),
        ({k: v for k, v in GOOD.items() if k != "token"}, "token missing or not hex"),
        ({**GOOD, "plan": {"digest": 1}}, "plan is not a digest"),
        ({**GOOD, "timeout_ms": True}, "timeout_ms is not an integer"),
        ({**GOOD, "client": "x" * 500}, "client or build is not a short string"),
        ({**GOOD, "build": 7}, "client or build is not a short string"),
    ],
)
def test_anything_else_is_refused_with_its_reason(doc: dict[str, Any], why: str) -> None:
    refused = ch.parse_request(doc)
    assert isinstance(refused, str) and refused.startswith(why), refused


def test_slots_by_op() -> None:
    assert ch.slot_for(ch.BARRIER) == ch.SLOT
    assert {ch.slot_for(op) for op in ch.WRITE_OPS} == {ch.WRITE_SLOT}


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=200), max_size=20))
def test_pad_fills_the_slot_exactly_and_parses_back(doc: dict[str, str]) -> None:
    for size in (ch.SLOT, ch.WRITE_SLOT):
        try:
            data = ch.pad(doc, size)
        except ValueError:
            assert size == ch.SLOT  # only the small slot can be too small here
            continue
        assert len(data) == size and ch.parse(data) == doc


def test_parse_refuses_what_is_not_an_object() -> None:
    for data in (b"", b"\x00" * 10, b"[1, 2]", b"\xff\xfe", b"{" * 100_000):
        assert ch.parse(data) is None


@pytest.mark.parametrize(
    "wall", ["NaN", "Infinity", "-Infinity", "1e400", "true", "1000000030.0", '"1000000000"']
)
def test_a_heartbeat_of_no_finite_present_time_is_never_fresh(tmp_path: Any, wall: str) -> None:
    # NaN compares false with every bound and infinity is always "just now":
    # either would read as a live host forever. A beat from the future proves
    # nothing about the host now.
    folder = ch.folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / ch.HEARTBEAT).write_text(f'{{"host": "h", "wall": {wall}}}')
    doc, why = ch.heartbeat(tmp_path, 1_000_000_000.0)
    assert doc is None and why is not None


@pytest.mark.parametrize("wall", ["999999996.0", "1000000000", "1000000004.5"])
def test_a_heartbeat_within_the_bound_either_side_is_fresh(tmp_path: Any, wall: str) -> None:
    folder = ch.folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / ch.HEARTBEAT).write_text(f'{{"host": "h", "wall": {wall}}}')
    doc, why = ch.heartbeat(tmp_path, 1_000_000_000.0)
    assert why is None and doc is not None and doc["host"] == "h"
