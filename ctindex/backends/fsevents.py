"""macOS FSEvents backend (ctypes over CoreServices), behind the Watcher interface.

Only the translation (`translate`) is exercised here, on recorded-format
fixtures; the stream plumbing has not run on a Mac yet (docs/backends.md).
Importing this module never loads a macOS library: that happens in
FSEventsWatcher.__init__.

One stream watches every root plus the cookie folder, so a cookie comes back
in order with the content events; because FSEvents may still hand over older
events after newer ones under load, a read that sees a cookie also calls
FSEventStreamFlushSync and drains again before answering (Watchman's advice).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctindex.backends.base import (
    Batch,
    BatchBuilder,
    Descend,
    excluded,
    normalize_roots,
    root_of,
    under,
)

if TYPE_CHECKING:
    from ctypes import _Pointer

# FSEventStreamEventFlags (FSEvents.h).
MUST_SCAN_SUBDIRS = 0x00000001
USER_DROPPED = 0x00000002
KERNEL_DROPPED = 0x00000004
EVENT_IDS_WRAPPED = 0x00000008
HISTORY_DONE = 0x00000010
ROOT_CHANGED = 0x00000020
MOUNT = 0x00000040
UNMOUNT = 0x00000080
ITEM_CREATED = 0x00000100
ITEM_REMOVED = 0x00000200
ITEM_INODE_META_MOD = 0x00000400
ITEM_RENAMED = 0x00000800
ITEM_MODIFIED = 0x00001000
ITEM_FINDER_INFO_MOD = 0x00002000
ITEM_CHANGE_OWNER = 0x00004000
ITEM_XATTR_MOD = 0x00008000
ITEM_IS_FILE = 0x00010000
ITEM_IS_DIR = 0x00020000
ITEM_IS_SYMLINK = 0x00040000
OWN_EVENT = 0x00080000
ITEM_IS_HARDLINK = 0x00100000
ITEM_IS_LAST_HARDLINK = 0x00200000
ITEM_CLONED = 0x00400000

FLAG_NAMES = {
    "MustScanSubDirs": MUST_SCAN_SUBDIRS,
    "UserDropped": USER_DROPPED,
    "KernelDropped": KERNEL_DROPPED,
    "EventIdsWrapped": EVENT_IDS_WRAPPED,
    "HistoryDone": HISTORY_DONE,
    "RootChanged": ROOT_CHANGED,
    "Mount": MOUNT,
    "Unmount": UNMOUNT,
    "ItemCreated": ITEM_CREATED,
    "ItemRemoved": ITEM_REMOVED,
    "ItemInodeMetaMod": ITEM_INODE_META_MOD,
    "ItemRenamed": ITEM_RENAMED,
    "ItemModified": ITEM_MODIFIED,
    "ItemFinderInfoMod": ITEM_FINDER_INFO_MOD,
    "ItemChangeOwner": ITEM_CHANGE_OWNER,
    "ItemXattrMod": ITEM_XATTR_MOD,
    "ItemIsFile": ITEM_IS_FILE,
    "ItemIsDir": ITEM_IS_DIR,
    "ItemIsSymlink": ITEM_IS_SYMLINK,
    "OwnEvent": OWN_EVENT,
    "ItemIsHardlink": ITEM_IS_HARDLINK,
    "ItemIsLastHardlink": ITEM_IS_LAST_HARDLINK,
    "ItemCloned": ITEM_CLONED,
}

# FSEventStreamCreateFlags.
CREATE_NO_DEFER = 0x00000002
CREATE_WATCH_ROOT = 0x00000004
CREATE_FILE_EVENTS = 0x00000010
SINCE_NOW = 0xFFFFFFFFFFFFFFFF  # kFSEventStreamEventIdSinceNow
UTF8 = 0x08000100  # kCFStringEncodingUTF8


def relative_key(path: str, bases: Sequence[str]) -> str | None:
    """Key of an absolute event path under one of the spellings of base
    (FSEvents reports resolved paths: /private/var, not /var)."""
    path = path.rstrip("/") or "/"
    for base in bases:
        base = base.rstrip("/")
        if path == base:
            return ""
        if path.startswith(base + "/"):
            return path[len(base) + 1 :]
    return None


def translate(
    records: Iterable[tuple[str, int]],
    bases: Sequence[str],
    roots: Sequence[str],
    descend: Descend,
    cookie_dir: str | None,
) -> Batch:
    """FSEvents callbacks (path, flags) -> Batch.

    Dropped events (UserDropped/KernelDropped) rescan every root; RootChanged,
    Mount and Unmount rescan the root concerned; MustScanSubDirs alone makes
    its folder a dirty subtree; item events make their key dirty."""
    roots = normalize_roots(roots)
    acc = BatchBuilder()
    for path, flags in records:
        acc.events += 1
        if flags & (USER_DROPPED | KERNEL_DROPPED):
            acc.need(roots, "overflow")
            continue
        if flags & (HISTORY_DONE | EVENT_IDS_WRAPPED) and not flags & MUST_SCAN_SUBDIRS:
            continue
        key = relative_key(path, bases)
        if key is None:
            if flags & MUST_SCAN_SUBDIRS:  # coalesced above base
                acc.need(roots, "must-scan-subdirs")
            continue
        if cookie_dir is not None and key.rpartition("/")[0] == cookie_dir:
            if flags & (ITEM_CREATED | ITEM_RENAMED):
                acc.cookies.add(key.rpartition("/")[2])
            continue
        root = root_of(key, roots)
        inner = [r for r in roots if under(r, key)]  # roots at or below this path
        if flags & (ROOT_CHANGED | MOUNT | UNMOUNT):
            why = (
                "root-changed"
                if flags & ROOT_CHANGED
                else "unmount"
                if flags & UNMOUNT
                else "mount"
            )
            acc.need([root] if root is not None else inner, why)
            continue
        if root is None:
            if flags & MUST_SCAN_SUBDIRS and inner:
                acc.need(inner, "must-scan-subdirs")
            continue
        if excluded(key, root, descend):
            continue
        if key != root and flags & ITEM_IS_DIR and not descend(key):
            continue
        acc.paths.add(key)
    return acc.batch()


def flags_from_names(names: Iterable[str]) -> int:
    """Fixture helper: ["ItemCreated", "ItemIsFile"] -> bits."""
    bits = 0
    for name in names:
        bits |= FLAG_NAMES[name]
    return bits


_Callback = ctypes.CFUNCTYPE(
    None,
    ctypes.c_void_p,  # ConstFSEventStreamRef
    ctypes.c_void_p,  # clientCallBackInfo
    ctypes.c_size_t,  # numEvents
    ctypes.POINTER(ctypes.c_char_p),  # eventPaths (char ** without UseCFTypes)
    ctypes.POINTER(ctypes.c_uint32),  # eventFlags
    ctypes.POINTER(ctypes.c_uint64),  # eventIds
)


def _library(name: str) -> ctypes.CDLL:
    path = ctypes.util.find_library(name)
    if path is None:
        raise OSError(0, f"{name} framework not found")
    return ctypes.CDLL(path)


class FSEventsWatcher:
    name = "fsevents"

    def __init__(
        self,
        base: Path | str,
        roots: Sequence[str],
        descend: Descend,
        cookie_dir: str | None = None,
        *,
        latency: float = 0.01,
    ) -> None:
        self.reason: str | None = None
        self.degraded: str | None = None
        base = os.fspath(base)
        self.roots = normalize_roots(roots)
        self.descend = descend
        self.cookie_dir = cookie_dir.strip("/") if cookie_dir is not None else None
        self._bases = (os.path.realpath(base), os.path.abspath(base))
        self._lock = threading.Lock()
        self._queue: list[tuple[str, int]] = []
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._stream: int | None = None
        self._dispatch_queue: int | None = None
        try:
            self._start(base, latency)
        except BaseException:
            self.close()
            raise

    def _start(self, base: str, latency: float) -> None:
        cf = _library("CoreFoundation")
        cs = _library("CoreServices")
        system = _library("System")
        cf.CFStringCreateWithCString.restype = ctypes.c_void_p
        cf.CFStringCreateWithCString.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32]
        cf.CFArrayCreate.restype = ctypes.c_void_p
        cf.CFArrayCreate.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_long,
            ctypes.c_void_p,
        ]
        cf.CFRelease.argtypes = [ctypes.c_void_p]
        cs.FSEventStreamCreate.restype = ctypes.c_void_p
        cs.FSEventStreamCreate.argtypes = [
            ctypes.c_void_p,
            _Callback,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_uint64,
            ctypes.c_double,
            ctypes.c_uint32,
        ]
        for fn in ("Start", "FlushSync", "Stop", "Invalidate", "Release", "SetDispatchQueue"):
            getattr(cs, f"FSEventStream{fn}").argtypes = [ctypes.c_void_p] + (
                [ctypes.c_void_p] if fn == "SetDispatchQueue" else []
            )
        cs.FSEventStreamStart.restype = ctypes.c_bool
        system.dispatch_queue_create.restype = ctypes.c_void_p
        system.dispatch_queue_create.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        system.dispatch_release.argtypes = [ctypes.c_void_p]
        self._cf, self._cs, self._system = cf, cs, system

        watch = [os.path.join(base, r) if r else base for r in self.roots]
        if self.cookie_dir is not None:
            watch.append(os.path.join(base, self.cookie_dir))
        strings = [cf.CFStringCreateWithCString(None, os.fsencode(p), UTF8) for p in watch]
        values = (ctypes.c_void_p * len(strings))(*strings)
        callbacks = ctypes.addressof(ctypes.c_char.in_dll(cf, "kCFTypeArrayCallBacks"))
        array = cf.CFArrayCreate(None, values, len(strings), callbacks)
        for s in strings:
            cf.CFRelease(s)
        self._callback = _Callback(self._on_events)  # kept alive as long as the stream
        flags = CREATE_NO_DEFER | CREATE_WATCH_ROOT | CREATE_FILE_EVENTS
        stream = cs.FSEventStreamCreate(
            None, self._callback, None, array, SINCE_NOW, latency, flags
        )
        cf.CFRelease(array)
        if not stream:
            raise OSError(0, "FSEventStreamCreate failed")
        self._stream = stream
        self._dispatch_queue = system.dispatch_queue_create(b"ctindex.fsevents", None)
        cs.FSEventStreamSetDispatchQueue(stream, self._dispatch_queue)
        if not cs.FSEventStreamStart(stream):
            raise OSError(0, "FSEventStreamStart failed")

    def _on_events(
        self,
        _stream: int | None,
        _info: int | None,
        n: int,
        paths: _Pointer[ctypes.c_char_p],
        flags: _Pointer[ctypes.c_uint32],
        _ids: _Pointer[ctypes.c_uint64],
    ) -> None:
        # What _Callback passes: the void pointers as ints (None for NULL),
        # the arrays as pointers, whose items read as bytes and ints.
        # Runs on the dispatch queue's thread: copy out, then wake the reader.
        batch = [(os.fsdecode(paths[i]), int(flags[i])) for i in range(n)]
        with self._lock:
            self._queue.extend(batch)
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wfd, b"\0")

    def fileno(self) -> int | None:
        return self._rfd if self._rfd >= 0 else None

    def _take(self) -> list[tuple[str, int]]:
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._rfd, 4096):
                pass
        with self._lock:
            records, self._queue = self._queue, []
        return records

    def read(self, timeout: float | None = 0.0) -> Batch:
        if self._rfd < 0:
            raise ValueError("watcher is closed")
        with self._lock:
            ready = bool(self._queue)
        if not ready and timeout != 0:
            select.select([self._rfd], [], [], timeout)
        args = (self._bases, self.roots, self.descend, self.cookie_dir)
        batch = translate(self._take(), *args)
        if batch.cookies and self._stream is not None:
            self._cs.FSEventStreamFlushSync(self._stream)
            batch = batch.merge(translate(self._take(), *args))
        return batch

    def close(self) -> None:
        if self._stream is not None:
            self._cs.FSEventStreamStop(self._stream)
            self._cs.FSEventStreamInvalidate(self._stream)
            self._cs.FSEventStreamRelease(self._stream)
            self._stream = None
        if self._dispatch_queue is not None:
            self._system.dispatch_release(self._dispatch_queue)
            self._dispatch_queue = None
        for fd in (self._rfd, self._wfd):
            if fd >= 0:
                os.close(fd)
        self._rfd = self._wfd = -1
