"""FSEvents and ReadDirectoryChangesW translation on recorded-format fixtures.

These backends cannot run here (Linux); their pure translation can. The
fixtures in tests/fixtures_events/ are written from the documented record
formats (FSEvents.h flags, the FILE_NOTIFY_INFORMATION layout)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ctindex.backends import fsevents, rdcw
from ctindex.backends.base import Batch

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_events"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def expected(case: dict[str, Any]) -> Batch:
    e = case["expect"]
    return Batch(
        frozenset(e["paths"]), frozenset(e["rescan"]), e["reason"], frozenset(e["cookies"])
    )


FSE = load("fsevents.json")
RDCW = load("rdcw.json")


@pytest.mark.parametrize("case", FSE["cases"], ids=lambda c: c["name"])
def test_fsevents_translate(case: dict[str, Any]) -> None:
    excluded = set(FSE["excluded"])
    records = [(r["path"], fsevents.flags_from_names(r["flags"])) for r in case["records"]]
    batch = fsevents.translate(
        records,
        (FSE["real_base"], FSE["base"]),
        FSE["roots"],
        lambda key: key not in excluded,
        FSE["cookie_dir"],
    )
    assert batch == expected(case)
    assert batch.events == len(records)


def test_fsevents_flag_table_matches_header_values() -> None:
    assert fsevents.FLAG_NAMES["MustScanSubDirs"] == 0x1
    assert fsevents.FLAG_NAMES["ItemRenamed"] == 0x800
    assert fsevents.FLAG_NAMES["ItemIsDir"] == 0x20000
    assert len(set(fsevents.FLAG_NAMES.values())) == len(fsevents.FLAG_NAMES)


def completions(case: dict[str, Any]) -> list[rdcw.Completion]:
    return [
        rdcw.Completion(
            r["key"], r["error"], bytes.fromhex(r.get("hex", "")), r.get("cookie", False)
        )
        for r in case["reads"]
    ]


@pytest.mark.parametrize("case", RDCW["cases"], ids=lambda c: c["name"])
def test_rdcw_parse_buffer(case: dict[str, Any]) -> None:
    for read in case["reads"]:
        if not read.get("hex"):
            continue
        data = bytes.fromhex(read["hex"])
        if read.get("malformed"):
            with pytest.raises(ValueError):
                rdcw.parse_notify(data)
        else:
            assert rdcw.parse_notify(data) == [
                (action, name.replace("\\", "/")) for action, name in read["records"]
            ]


@pytest.mark.parametrize("case", RDCW["cases"], ids=lambda c: c["name"])
def test_rdcw_translate(case: dict[str, Any]) -> None:
    excluded = set(RDCW["excluded"])
    batch = rdcw.translate(completions(case), RDCW["roots"], lambda key: key not in excluded)
    assert batch == expected(case)


def test_rdcw_rejects_looping_chain() -> None:
    data = bytes.fromhex("02000000010000000000000000000000")  # NextEntryOffset 2 < header
    with pytest.raises(ValueError, match="bad NextEntryOffset"):
        rdcw.parse_notify(data)


@pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="checks the foreign-OS path")
def test_native_modules_fail_cleanly_off_their_os(tmp_path: Path) -> None:
    # Importing loaded no foreign library; opening raises OSError, which
    # open_watcher turns into the poll lane with a reason.
    for cls in (fsevents.FSEventsWatcher, rdcw.RdcwWatcher):
        with pytest.raises(OSError):
            cls(tmp_path, [""], lambda key: True, None)
