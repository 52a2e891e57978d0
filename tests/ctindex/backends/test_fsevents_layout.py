"""ctindex/backends/fsevents.py against Apple's documented ABI, and its translation
of the event sequences the Linux tests cover, built from the documented flag
semantics (no public recording of FSEvents callbacks in this format was
found to cite).

Sources: CoreServices FSEvents.h (macOS SDK; developer.apple.com
"FSEventStreamEventFlags", "FSEventStreamCreateFlags",
"FSEventStreamCallback"): the callback is
void (ConstFSEventStreamRef, void *info, size_t numEvents, void *eventPaths,
const FSEventStreamEventFlags flags[] /* UInt32 */,
const FSEventStreamEventId ids[] /* UInt64 */); without
kFSEventStreamCreateFlagUseCFTypes eventPaths is a char **.
kCFStringEncodingUTF8 is 0x08000100 (CFString.h).
With kFSEventStreamCreateFlagFileEvents a rename is reported as two events,
each with ItemRenamed, on the old and on the new path.
"""

from __future__ import annotations

import ctypes

import pytest

from ctindex.backends import fsevents
from ctindex.backends.base import Batch

FSEVENTS_H_FLAGS = {
    "MustScanSubDirs": 0x00000001,
    "UserDropped": 0x00000002,
    "KernelDropped": 0x00000004,
    "EventIdsWrapped": 0x00000008,
    "HistoryDone": 0x00000010,
    "RootChanged": 0x00000020,
    "Mount": 0x00000040,
    "Unmount": 0x00000080,
    "ItemCreated": 0x00000100,
    "ItemRemoved": 0x00000200,
    "ItemInodeMetaMod": 0x00000400,
    "ItemRenamed": 0x00000800,
    "ItemModified": 0x00001000,
    "ItemFinderInfoMod": 0x00002000,
    "ItemChangeOwner": 0x00004000,
    "ItemXattrMod": 0x00008000,
    "ItemIsFile": 0x00010000,
    "ItemIsDir": 0x00020000,
    "ItemIsSymlink": 0x00040000,
    "OwnEvent": 0x00080000,
    "ItemIsHardlink": 0x00100000,
    "ItemIsLastHardlink": 0x00200000,
    "ItemCloned": 0x00400000,
}


def test_every_event_flag_has_its_fsevents_h_value() -> None:
    assert fsevents.FLAG_NAMES == FSEVENTS_H_FLAGS


def test_create_flags_and_constants() -> None:
    assert fsevents.CREATE_NO_DEFER == 0x2
    assert fsevents.CREATE_WATCH_ROOT == 0x4
    assert fsevents.CREATE_FILE_EVENTS == 0x10
    assert fsevents.SINCE_NOW == 0xFFFFFFFFFFFFFFFF
    assert fsevents.UTF8 == 0x08000100


def test_callback_prototype_matches_fseventstreamcallback() -> None:
    cb = fsevents._Callback
    assert cb._restype_ is None
    args = cb._argtypes_
    assert len(args) == 6
    assert args[0] is ctypes.c_void_p and args[1] is ctypes.c_void_p
    assert args[2] is ctypes.c_size_t
    assert args[3]._type_ is ctypes.c_char_p  # char ** eventPaths
    assert args[4]._type_ is ctypes.c_uint32 and ctypes.sizeof(ctypes.c_uint32) == 4
    assert args[5]._type_ is ctypes.c_uint64 and ctypes.sizeof(ctypes.c_uint64) == 8


BASE = "/Users/u/proj"
FILE = ("ItemIsFile",)


def _translate(*records: tuple[str, tuple[str, ...]]) -> Batch:
    return fsevents.translate(
        [(f"{BASE}/{p}" if p else BASE, fsevents.flags_from_names(f)) for p, f in records],
        (BASE,),
        ["docs"],
        lambda key: key != "docs/skip",
        None,
    )


@pytest.mark.parametrize(
    ("records", "paths"),
    [
        ([("docs/new.md", ("ItemCreated", *FILE))], {"docs/new.md"}),  # create
        ([("docs/a.md", ("ItemModified", *FILE))], {"docs/a.md"}),  # modify
        ([("docs/a.md", ("ItemCreated", "ItemModified", *FILE))], {"docs/a.md"}),  # coalesced
        ([("docs/old.md", ("ItemRemoved", *FILE))], {"docs/old.md"}),  # delete
        (  # rename: one event per half, both ItemRenamed
            [("docs/x.md", ("ItemRenamed", *FILE)), ("docs/y.md", ("ItemRenamed", *FILE))],
            {"docs/x.md", "docs/y.md"},
        ),
        (  # an editor's atomic save: temp created and written, renamed over the file
            [
                ("docs/.c.md.swp", ("ItemCreated", "ItemModified", *FILE)),
                ("docs/.c.md.swp", ("ItemRenamed", *FILE)),
                ("docs/c.md", ("ItemRenamed", *FILE)),
            ],
            {"docs/.c.md.swp", "docs/c.md"},
        ),
        (  # a folder renamed in: its subtree is dirty
            [("docs/sub", ("ItemRenamed", "ItemIsDir"))],
            {"docs/sub"},
        ),
        ([("docs/skip/a.md", ("ItemCreated", *FILE))], set()),  # excluded folder
        ([("other/a.md", ("ItemCreated", *FILE))], set()),  # outside every root
    ],
)
def test_item_events_make_their_keys_dirty(
    records: list[tuple[str, tuple[str, ...]]], paths: set[str]
) -> None:
    batch = _translate(*records)
    assert set(batch.paths) == paths and not batch.rescan


def test_must_scan_subdirs_makes_the_folder_a_dirty_subtree() -> None:
    batch = _translate(("docs/deep", ("MustScanSubDirs",)))
    assert set(batch.paths) == {"docs/deep"} and not batch.rescan


@pytest.mark.parametrize("dropped", ["UserDropped", "KernelDropped"])
def test_dropped_events_are_an_overflow_of_every_root(dropped: str) -> None:
    batch = _translate(("docs", ("MustScanSubDirs", dropped)))
    assert set(batch.rescan) == {"docs"} and batch.reason == "overflow"


def test_must_scan_subdirs_above_the_base_rescans_every_root() -> None:
    batch = fsevents.translate(
        [("/Users/u", fsevents.MUST_SCAN_SUBDIRS)], (BASE,), ["docs"], lambda k: True, None
    )
    assert set(batch.rescan) == {"docs"} and batch.reason == "must-scan-subdirs"


def test_root_changed_rescans_that_root() -> None:
    batch = _translate(("docs", ("RootChanged",)))
    assert set(batch.rescan) == {"docs"} and batch.reason == "root-changed"
