"""Windows ReadDirectoryChangesW backend (ctypes over kernel32), behind the Watcher interface.

Only the buffer parsing and translation (`parse_notify`, `translate`) are
exercised here, on recorded-format fixtures; the overlapped-I/O plumbing has
not run on Windows yet (docs/backends.md). Importing this module loads no
Windows library: that happens in RdcwWatcher.__init__.

One recursive handle per root and one non-recursive handle for the cookie
folder. A read that completes with zero bytes (the kernel buffer overflowed)
or fails with ERROR_NOTIFY_ENUM_DIR rescans that root, as Watchman does.
Excluded folders cannot be left out of a recursive kernel watch here; their
events are dropped in translate().
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctindex.backends.base import Batch, BatchBuilder, Descend, excluded, join_key, normalize_roots

FILE_ACTION_ADDED = 1
FILE_ACTION_REMOVED = 2
FILE_ACTION_MODIFIED = 3
FILE_ACTION_RENAMED_OLD_NAME = 4
FILE_ACTION_RENAMED_NEW_NAME = 5

FILE_NOTIFY_CHANGE_FILE_NAME = 0x001
FILE_NOTIFY_CHANGE_DIR_NAME = 0x002
FILE_NOTIFY_CHANGE_ATTRIBUTES = 0x004
FILE_NOTIFY_CHANGE_SIZE = 0x008
FILE_NOTIFY_CHANGE_LAST_WRITE = 0x010
FILE_NOTIFY_CHANGE_CREATION = 0x040
NOTIFY_FILTER = (
    FILE_NOTIFY_CHANGE_FILE_NAME
    | FILE_NOTIFY_CHANGE_DIR_NAME
    | FILE_NOTIFY_CHANGE_ATTRIBUTES
    | FILE_NOTIFY_CHANGE_SIZE
    | FILE_NOTIFY_CHANGE_LAST_WRITE
    | FILE_NOTIFY_CHANGE_CREATION
)

ERROR_ACCESS_DENIED = 5
ERROR_INVALID_HANDLE = 6
ERROR_OPERATION_ABORTED = 995
ERROR_IO_INCOMPLETE = 996
ERROR_IO_PENDING = 997
ERROR_NOTIFY_ENUM_DIR = 1022

_RECORD = struct.Struct("<III")  # NextEntryOffset, Action, FileNameLength (bytes)
BUFFER_SIZE = 64 * 1024  # ReadDirectoryChangesW rejects more than 64 KiB on network paths


def parse_notify(buf: bytes) -> list[tuple[int, str]]:
    """FILE_NOTIFY_INFORMATION chain -> [(action, '/'-separated name)].

    Names are UTF-16LE, not NUL-terminated, relative to the watched folder.
    Lone surrogates (legal in NTFS names) survive via surrogatepass.
    Raises ValueError on a truncated or looping chain."""
    out: list[tuple[int, str]] = []
    offset = 0
    while True:
        if offset + _RECORD.size > len(buf):
            raise ValueError(f"truncated FILE_NOTIFY_INFORMATION at offset {offset}")
        step, action, length = _RECORD.unpack_from(buf, offset)
        start = offset + _RECORD.size
        if start + length > len(buf):
            raise ValueError(f"file name overruns the buffer at offset {offset}")
        name = buf[start : start + length].decode("utf-16-le", "surrogatepass")
        out.append((action, name.replace("\\", "/")))
        if step == 0:
            return out
        if step < _RECORD.size or step % 4:
            raise ValueError(f"bad NextEntryOffset {step} at offset {offset}")
        offset += step


@dataclass(frozen=True)
class Completion:
    """One finished ReadDirectoryChangesW on one handle."""

    key: str  # the watched folder's key (a root, or the cookie folder)
    error: int = 0  # Win32 error of the read, 0 on success
    data: bytes = b""  # the bytes returned (zero bytes on success = overflow)
    cookie: bool = False  # the handle watches the cookie folder


def translate(completions: Iterable[Completion], roots: Sequence[str], descend: Descend) -> Batch:
    roots = normalize_roots(roots)
    acc = BatchBuilder()
    for done in completions:
        scope = list(roots) if done.cookie else [done.key]
        if done.error == ERROR_NOTIFY_ENUM_DIR or (done.error == 0 and not done.data):
            acc.need(scope, "overflow")
            continue
        if done.error in (ERROR_ACCESS_DENIED, ERROR_INVALID_HANDLE, ERROR_OPERATION_ABORTED):
            acc.need(scope, "root-deleted")
            continue
        if done.error:
            acc.need(scope, f"error: winerror {done.error}")
            continue
        try:
            records = parse_notify(done.data)
        except ValueError as e:
            acc.need(scope, f"error: {e}")
            continue
        acc.events += len(records)
        for action, name in records:
            if done.cookie:
                if action in (FILE_ACTION_ADDED, FILE_ACTION_RENAMED_NEW_NAME) and "/" not in name:
                    acc.cookies.add(name)
                continue
            key = join_key(done.key, name)
            if not excluded(key, done.key, descend):
                acc.paths.add(key)
    return acc.batch()


class _Overlapped(ctypes.Structure):
    _fields_ = [
        ("Internal", ctypes.c_void_p),
        ("InternalHigh", ctypes.c_void_p),
        ("Offset", ctypes.c_uint32),
        ("OffsetHigh", ctypes.c_uint32),
        ("hEvent", ctypes.c_void_p),
    ]


class _Handle:
    def __init__(self, key: str, handle: int, event: int, cookie: bool) -> None:
        self.key, self.handle, self.event, self.cookie = key, handle, event, cookie
        self.overlapped = _Overlapped(hEvent=event)
        self.buffer = ctypes.create_string_buffer(BUFFER_SIZE)
        self.pending = False


GENERIC_FILE_LIST_DIRECTORY = 0x0001
SHARE_ALL = 0x1 | 0x2 | 0x4
OPEN_EXISTING = 3
FLAG_BACKUP_SEMANTICS = 0x02000000
FLAG_OVERLAPPED = 0x40000000
INVALID_HANDLE = ctypes.c_void_p(-1).value
WAIT_TIMEOUT = 0x102
INFINITE = 0xFFFFFFFF


class RdcwWatcher:
    name = "rdcw"

    def __init__(
        self,
        base: Path | str,
        roots: Sequence[str],
        descend: Descend,
        cookie_dir: str | None = None,
    ) -> None:
        self.reason: str | None = None
        self.degraded: str | None = None
        self.base = os.fspath(base)
        self.roots = normalize_roots(roots)
        self.descend = descend
        # Windows-only ctypes names are looked up dynamically so this module
        # imports (and type-checks) everywhere.
        win_dll = getattr(ctypes, "WinDLL", None)
        if win_dll is None:
            raise OSError(0, "ReadDirectoryChangesW needs Windows")
        self._k32: ctypes.CDLL = win_dll("kernel32", use_last_error=True)
        self._last_error = getattr(ctypes, "get_last_error")  # noqa: B009
        self._k32.CreateFileW.restype = ctypes.c_void_p
        self._k32.CreateEventW.restype = ctypes.c_void_p
        self._handles: list[_Handle] = []
        self._pending = Batch()
        try:
            for root in self.roots:
                self._open(root, cookie=False)
            if cookie_dir is not None:
                self._open(cookie_dir.strip("/"), cookie=True)
        except BaseException:
            self.close()
            raise

    def _open(self, key: str, cookie: bool) -> None:
        path = os.path.join(self.base, key) if key else self.base
        handle = self._k32.CreateFileW(
            path,
            GENERIC_FILE_LIST_DIRECTORY,
            SHARE_ALL,
            None,
            OPEN_EXISTING,
            FLAG_BACKUP_SEMANTICS | FLAG_OVERLAPPED,
            None,
        )
        if not handle or handle == INVALID_HANDLE:
            err = self._last_error()
            raise OSError(0, f"CreateFileW failed (winerror {err})", path)
        event = self._k32.CreateEventW(None, True, False, None)
        self._handles.append(_Handle(key, handle, event, cookie))

    def _arm(self, h: _Handle) -> Completion | None:
        ok = self._k32.ReadDirectoryChangesW(
            ctypes.c_void_p(h.handle),
            h.buffer,
            BUFFER_SIZE,
            not h.cookie,  # bWatchSubtree
            NOTIFY_FILTER,
            None,
            ctypes.byref(h.overlapped),
            None,
        )
        if not ok:
            return Completion(h.key, self._last_error(), cookie=h.cookie)
        h.pending = True
        return None

    def fileno(self) -> int | None:
        return None  # handles are not selectable: the daemon reads with a timeout

    def read(self, timeout: float | None = 0.0) -> Batch:
        done: list[Completion] = []
        for h in self._handles:
            if not h.pending:
                failed = self._arm(h)
                if failed:
                    done.append(failed)
        if self._handles and not done:
            events = (ctypes.c_void_p * len(self._handles))(*[h.event for h in self._handles])
            ms = INFINITE if timeout is None else int(timeout * 1000)
            self._k32.WaitForMultipleObjects(len(self._handles), events, False, ms)
        for h in self._handles:
            if not h.pending:
                continue
            nbytes = ctypes.c_uint32(0)
            ok = self._k32.GetOverlappedResult(
                ctypes.c_void_p(h.handle), ctypes.byref(h.overlapped), ctypes.byref(nbytes), False
            )
            if not ok:
                err = self._last_error()
                if err == ERROR_IO_INCOMPLETE:
                    continue
                h.pending = False
                done.append(Completion(h.key, err, cookie=h.cookie))
                continue
            h.pending = False
            self._k32.ResetEvent(ctypes.c_void_p(h.event))
            done.append(Completion(h.key, 0, h.buffer.raw[: nbytes.value], h.cookie))
        return translate(done, self.roots, self.descend)

    def close(self) -> None:
        for h in self._handles:
            if h.pending:
                self._k32.CancelIoEx(ctypes.c_void_p(h.handle), ctypes.byref(h.overlapped))
            self._k32.CloseHandle(ctypes.c_void_p(h.handle))
            self._k32.CloseHandle(ctypes.c_void_p(h.event))
        self._handles.clear()
