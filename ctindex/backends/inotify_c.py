"""Raw ctypes binding to Linux inotify(7): three syscalls and the event layout.

Hand-written because the design forbids a third-party watcher library and the
standard library exposes no inotify. Nothing here interprets events; that is
backends.inotify's job.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

# Event bits (linux/inotify.h).
IN_ACCESS = 0x00000001
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_CLOSE_NOWRITE = 0x00000010
IN_OPEN = 0x00000020
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
# Reported by the kernel, never requested.
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
# Watch flags.
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_MASK_CREATE = 0x10000000
IN_MASK_ADD = 0x20000000
IN_ISDIR = 0x40000000
IN_ONESHOT = 0x80000000
# inotify_init1 flags (same values as O_NONBLOCK / O_CLOEXEC).
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
HEADER_SIZE = _HEADER.size
# A buffer that always holds at least one event with the longest name.
READ_SIZE = 64 * 1024


class Event(NamedTuple):
    wd: int
    mask: int
    cookie: int
    name: bytes  # b"" for events about the watched folder itself


class Libc:
    """The three inotify calls; errors become OSError carrying errno."""

    def __init__(self) -> None:
        path = ctypes.util.find_library("c")
        lib = ctypes.CDLL(path, use_errno=True)
        self._init1 = lib.inotify_init1
        self._init1.argtypes = [ctypes.c_int]
        self._init1.restype = ctypes.c_int
        self._add = lib.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._add.restype = ctypes.c_int
        self._rm = lib.inotify_rm_watch
        self._rm.argtypes = [ctypes.c_int, ctypes.c_int]
        self._rm.restype = ctypes.c_int

    @staticmethod
    def _check(result: int, what: str, path: bytes | None = None) -> int:
        if result < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}", os.fsdecode(path) if path else None)
        return result

    def init1(self, flags: int = IN_NONBLOCK | IN_CLOEXEC) -> int:
        return self._check(self._init1(flags), "inotify_init1")

    def add_watch(self, fd: int, path: bytes, mask: int) -> int:
        return self._check(self._add(fd, path, mask), "inotify_add_watch", path)

    def rm_watch(self, fd: int, wd: int) -> None:
        self._check(self._rm(fd, wd), "inotify_rm_watch")


_libc: Libc | None = None


def libc() -> Libc:
    """The process-wide binding, loaded on first use (importing stays cheap)."""
    global _libc
    if _libc is None:
        _libc = Libc()
    return _libc


def parse(buf: bytes) -> Iterator[Event]:
    """Split one read(2) of an inotify fd into events.

    The kernel only returns whole events; names are NUL-padded to `len`."""
    offset, end = 0, len(buf)
    while offset + HEADER_SIZE <= end:
        wd, mask, cookie, length = _HEADER.unpack_from(buf, offset)
        offset += HEADER_SIZE
        raw = buf[offset : offset + length]
        offset += length
        yield Event(wd, mask, cookie, raw.split(b"\0", 1)[0])


def read_events(fd: int, size: int = READ_SIZE) -> Iterator[Event]:
    """Read until the (non-blocking) fd is drained."""
    while True:
        try:
            buf = os.read(fd, size)
        except BlockingIOError:
            return
        except InterruptedError:
            continue
        if not buf:
            return
        yield from parse(buf)
