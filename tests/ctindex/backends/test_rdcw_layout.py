"""ctindex/backends/rdcw.py's ctypes and byte layouts against Microsoft's documented
ones (they can be checked on any 64-bit machine: the sizes are the ABI's).

* OVERLAPPED (minwinbase.h; learn.microsoft.com "OVERLAPPED structure"):
  ULONG_PTR Internal, ULONG_PTR InternalHigh, a union of {DWORD Offset,
  DWORD OffsetHigh} and PVOID Pointer, HANDLE hEvent: on 64-bit Windows
  offsets 0, 8, 16, 20, 24 and size 32.
* FILE_NOTIFY_INFORMATION (winnt.h; learn.microsoft.com
  "FILE_NOTIFY_INFORMATION structure"): DWORD NextEntryOffset, DWORD Action,
  DWORD FileNameLength (bytes), WCHAR FileName[1]: the name starts at offset
  12; records are DWORD aligned.
* FILE_ACTION_* (winnt.h): ADDED 1, REMOVED 2, MODIFIED 3, RENAMED_OLD_NAME 4,
  RENAMED_NEW_NAME 5. ERROR_NOTIFY_ENUM_DIR (winerror.h) 1022.
"""

from __future__ import annotations

import ctypes

import pytest

from ctindex.backends import rdcw


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="64-bit layout")
def test_overlapped_matches_minwinbase_h() -> None:
    o = rdcw._Overlapped
    assert ctypes.sizeof(o) == 32
    offsets = {name: getattr(o, name).offset for name, *_ in o._fields_}
    assert offsets == {
        "Internal": 0,
        "InternalHigh": 8,
        "Offset": 16,
        "OffsetHigh": 20,
        "hEvent": 24,
    }


def test_file_notify_information_header_matches_winnt_h() -> None:
    assert rdcw._RECORD.size == 12  # FileName at offset 12
    assert rdcw._RECORD.format.startswith("<")  # little-endian DWORDs


def test_documented_constants() -> None:
    assert (
        rdcw.FILE_ACTION_ADDED,
        rdcw.FILE_ACTION_REMOVED,
        rdcw.FILE_ACTION_MODIFIED,
        rdcw.FILE_ACTION_RENAMED_OLD_NAME,
        rdcw.FILE_ACTION_RENAMED_NEW_NAME,
    ) == (1, 2, 3, 4, 5)
    assert rdcw.ERROR_NOTIFY_ENUM_DIR == 1022


def _record(action: int, name: str, last: bool) -> bytes:
    raw = name.encode("utf-16-le")
    size = 12 + len(raw)
    size += -size % 4  # DWORD aligned
    step = 0 if last else size
    return (
        step.to_bytes(4, "little")
        + action.to_bytes(4, "little")
        + len(raw).to_bytes(4, "little")
        + raw
    ).ljust(size, b"\0")


def _chain(*records: tuple[int, str]) -> bytes:
    return b"".join(_record(a, n, i == len(records) - 1) for i, (a, n) in enumerate(records))


def _paths(data: bytes, error: int = 0) -> tuple[set[str], set[str], str | None]:
    batch = rdcw.translate([rdcw.Completion("docs", error, data)], ["docs"], lambda key: True)
    return set(batch.paths), set(batch.rescan), batch.reason


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([(rdcw.FILE_ACTION_ADDED, "new.md")], {"docs/new.md"}),  # create
        ([(rdcw.FILE_ACTION_MODIFIED, "a\\b.md")], {"docs/a/b.md"}),  # modify, nested
        ([(rdcw.FILE_ACTION_REMOVED, "old.md")], {"docs/old.md"}),  # delete
        (  # rename: both halves are dirty paths
            [
                (rdcw.FILE_ACTION_RENAMED_OLD_NAME, "x.md"),
                (rdcw.FILE_ACTION_RENAMED_NEW_NAME, "y.md"),
            ],
            {"docs/x.md", "docs/y.md"},
        ),
        (  # an editor's save: temp written, old renamed away, temp renamed in
            [
                (rdcw.FILE_ACTION_ADDED, "c.md~"),
                (rdcw.FILE_ACTION_MODIFIED, "c.md~"),
                (rdcw.FILE_ACTION_RENAMED_OLD_NAME, "c.md~"),
                (rdcw.FILE_ACTION_RENAMED_NEW_NAME, "c.md"),
            ],
            {"docs/c.md~", "docs/c.md"},
        ),
    ],
)
def test_actions_translate_to_dirty_paths(
    records: list[tuple[int, str]], expected: set[str]
) -> None:
    paths, rescan, _ = _paths(_chain(*records))
    assert paths == expected and rescan == set()


def test_overflow_is_a_rescan_of_the_root() -> None:
    for data, error in ((b"", 0), (b"", rdcw.ERROR_NOTIFY_ENUM_DIR)):  # empty buffer or ENUM_DIR
        paths, rescan, reason = _paths(data, error)
        assert paths == set() and rescan == {"docs"} and reason == "overflow"


def test_root_gone_is_a_rescan_with_its_reason() -> None:
    _, rescan, reason = _paths(b"", rdcw.ERROR_ACCESS_DENIED)
    assert rescan == {"docs"} and reason == "root-deleted"
