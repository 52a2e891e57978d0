"""Read a file completely and consistently, or say why not.

A read is trusted only if the file did not change while we read it: fstat
before and after the read must agree (size, mtime_ns, ctime_ns) and the byte
count must equal the size; with an injected ``stat`` the injected view taken
after the read must also equal the one the decision was based on, so the
fingerprint stored next to the digest is the one the next pass will compare.
"""

from __future__ import annotations

import enum
import os
import stat as stat_mod
from collections.abc import Callable
from dataclasses import dataclass

from ctindex.reconciler import native
from ctindex.reconciler.fingerprint import Fingerprint, fingerprint_of
from ctindex.reconciler.oserr import GONE

# O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC are POSIX (path_folders.open_at
# refuses a reparse point itself); O_BINARY is Windows', where a descriptor
# opened without it would translate line endings as it reads.
FILE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
DEFAULT_RETRIES = 3


class Outcome(enum.Enum):
    OK = "ok"
    GONE = "gone"  # vanished, replaced by a symlink / non-regular file
    ERROR = "error"  # EACCES and friends: see `error`
    DIRTY = "dirty"  # kept changing across every retry


@dataclass
class ReadResult:
    outcome: Outcome
    fp: Fingerprint | None = None
    digest: bytes = b""
    data: bytes = b""
    recorded_ns: int = 0
    error: OSError | None = None
    attempts: int = 0


def _read_all(fd: int, size: int) -> bytes:
    """Every byte up to EOF; `size` (the caller's fstat) sizes the first read.

    Plain os.read calls: a FileIO's readall would fstat twice more and lseek
    once to size its buffer, for every file. It still reads until a read
    returns nothing, so a file longer than its stat says (an NFS attribute
    cache serving an old size) is read whole and the size check fails."""
    data = os.read(fd, size + 1)
    if not data:
        return data
    parts = [data]
    while more := os.read(fd, max(size, 1 << 16)):
        parts.append(more)
    return data if len(parts) == 1 else b"".join(parts)


def read_stable(
    dir_fd: int,
    name: str,
    path: str,
    seen: Fingerprint,
    stat: Callable[[str], os.stat_result] | None,
    clock_ns: Callable[[], int],
    retries: int = DEFAULT_RETRIES,
    opener: Callable[..., int] = os.open,
) -> ReadResult:
    """Read `name` (relative to the open folder dir_fd) until two views agree.

    `seen` is the fingerprint the walk decided on. `stat` is the injected stat
    callable, or None when the default lstat is in use (then the fd's own
    fstat is the fingerprint: same inode, no extra syscall).
    """
    import xxhash

    attempt_once = _attempt_native() if opener is os.open else None
    ref = seen if stat is not None else None  # compared with the injected view
    for attempt in range(1, retries + 2):
        # Clock read *before* opening: a later edit stamped within the
        # granularity of this instant is then always inside the racy window.
        recorded = clock_ns()
        try:
            if attempt_once is not None:
                got = attempt_once(dir_fd, name, FILE_FLAGS)
            else:
                got = _attempt(dir_fd, name, opener)
        except OSError as exc:
            return _failed(exc, attempt)
        if got is None:
            return ReadResult(Outcome.GONE, attempts=attempt)
        data, stable, *fp = got
        if stat is None:
            now = Fingerprint(*fp)
        else:
            try:
                now = fingerprint_of(stat(path))
            except OSError as exc:
                return _failed(exc, attempt)
            # The recorded fingerprint must describe the bytes hashed: a view
            # that disagrees with them (an NFS attribute cache serving an old
            # size) is not recorded; the file stays dirty until it agrees.
            stable = stable and now == ref and now[0] == len(data)
        if stable:
            return ReadResult(
                Outcome.OK, now, xxhash.xxh3_128_digest(data), data, recorded, attempts=attempt
            )
        ref = now
    return ReadResult(Outcome.DIRTY, attempts=retries + 1)


# One attempt: (data, stable, *fingerprint after the read), or None for a
# file that is not regular; OSError as the os calls raise it.
_Attempt = tuple[bytes, bool, int, int, int, int, int]


def _attempt(dir_fd: int, name: str, opener: Callable[..., int]) -> _Attempt | None:
    """Open, fstat, read to EOF, fstat: the specification of
    ctindex/reconciler/_native.c read_file. `stable`: both fstats agree on size,
    mtime and ctime, and the bytes read are that size."""
    fd = opener(name, FILE_FLAGS, dir_fd=dir_fd)
    try:
        before = os.fstat(fd)
        if not stat_mod.S_ISREG(before.st_mode):
            return None
        data = _read_all(fd, before.st_size)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    stable = (
        before.st_size == after.st_size == len(data)
        and before.st_mtime_ns == after.st_mtime_ns
        and before.st_ctime_ns == after.st_ctime_ns
    )
    return (data, stable, *fingerprint_of(after))


def _attempt_native() -> Callable[[int, str, int], _Attempt | None] | None:
    """ctindex/reconciler/_native.c read_file, when the extension is in use."""
    mod = native.module()
    return getattr(mod, "read_file", None) if mod is not None else None


def _failed(exc: OSError, attempt: int) -> ReadResult:
    if exc.errno in GONE:
        return ReadResult(Outcome.GONE, attempts=attempt)
    return ReadResult(Outcome.ERROR, error=exc, attempts=attempt)
