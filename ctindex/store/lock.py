"""The update lock: every writer (update, rebuild, daemon, fallback) holds it."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ctindex.errors import IndexBusy as IndexBusy  # re-exported: its old home
from ctindex.errors import IndexWriteError
from ctindex.policy.store_path import file_mode

LOCK_NAME = "update.lock"
DEFAULT_TIMEOUT_S = 60.0
# File descriptors of locks this process holds: a forked helper closes them
# (release_inherited) so that only this process keeps the lock alive.
HELD_FDS: set[int] = set()


class IndexReadOnly(IndexWriteError):
    """The index folder cannot be written at all (a read-only share or mount,
    a folder of another user): `update`/`rebuild` still exit 2,
    while a query answers from the files (docs/network-shares.md)."""


# errno values that mean "this index cannot be written by us", not a fault.
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def release_inherited() -> None:
    """In a forked child: drop the inherited lock descriptors, so the lock
    dies with the parent. Each is replaced by /dev/null rather than closed:
    the inherited file object still owns the number and will close it."""
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for fd in HELD_FDS:
            with suppress(OSError):
                os.dup2(null, fd)
    finally:
        os.close(null)
    HELD_FDS.clear()


# How often a waiting writer retries (the wait itself is bounded): portalocker's
# default, so writers queue behind each other as they did when it took the lock.
POLL_S = 0.25


def write_error(exc: OSError, what: str) -> IndexWriteError:
    kind = IndexReadOnly if exc.errno in READ_ONLY_ERRNOS else IndexWriteError
    return kind(f"{what} ({exc.strerror})")


@contextmanager
def update_lock(index_dir: Path, timeout: float = DEFAULT_TIMEOUT_S) -> Iterator[None]:
    """Exclusive flock on `.ct/okf/update.lock`, bounded wait."""
    path = index_dir / LOCK_NAME
    try:
        os.makedirs(index_dir, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, f"{index_dir}: cannot create index folder") from exc
    try:
        import fcntl
    except ImportError:  # not POSIX: portalocker's portable lock
        with _portable_lock(path, timeout):
            yield
        return
    # flock directly, as portalocker does on POSIX (the same lock, so both
    # exclude each other): importing portalocker cost a nothing-changed
    # update of 200k files up to 135 ms of a ~1 s run (importlib.metadata),
    # measured in docs/decisions/native.md.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise write_error(exc, f"{path}: cannot take the update lock") from exc
    mode = file_mode(index_dir)
    if mode != 0o600:  # a group-shared store (ctindex/policy/store_path.py): members take it too
        with suppress(OSError):
            os.fchmod(fd, mode)
    try:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise IndexBusy(
                        f"{path}: another writer held the update lock for more than {timeout:g} s"
                    ) from None
                time.sleep(min(POLL_S, left))
            except OSError as exc:
                raise write_error(exc, f"{path}: cannot take the update lock") from exc
        HELD_FDS.add(fd)
        try:
            yield
        finally:
            HELD_FDS.discard(fd)
            with suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def _portable_lock(path: Path, timeout: float) -> Iterator[None]:
    import portalocker  # lazy: only where fcntl is missing

    flags = portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING
    lock = portalocker.Lock(str(path), mode="a", timeout=timeout, flags=flags)
    try:
        lock.acquire()
    except portalocker.exceptions.LockException as exc:
        raise IndexBusy(
            f"{path}: another writer held the update lock for more than {timeout:g} s"
        ) from exc
    except OSError as exc:
        raise write_error(exc, f"{path}: cannot take the update lock") from exc
    fd = lock.fh.fileno() if lock.fh is not None else -1
    HELD_FDS.add(fd)
    try:
        yield
    finally:
        HELD_FDS.discard(fd)
        lock.release()
