"""Writing a file so that a reader never sees half of it.

Two primitives, and the test hook placed between their steps:

* ``write_new``: create a file that must not exist yet, write it, fsync it;
* ``atomic_write``: replace a file in place through a temp sibling and an
  atomic rename (with ``sync``, the temp file and then its folder are
  fsynced, so the rename survives a power cut).

Every file ctindex replaces in place goes through ``atomic_write``: the
store's manifest and records (ctindex/store/durable.py), the daemon's
runtime records (ctindex/ipc/records.py), the config editor
(ctindex/policy/config_edit.py), the roots cache (ctindex/policy/plan.py),
the metrics file (ctindex/audit/metrics.py) and the shared-index request,
answer and heartbeat files (ctindex/client/share.py,
ctindex/daemon/share_barrier.py), each with the mode, fsync and temp name
it needs. A written file gets the mode its
folder implies (``file_mode``): 0600 in a private folder, 0660 in one shared
with a group (docs/format.md, "Modes").
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ctindex.errors import IndexWriteError
from ctindex.reconciler.platform_features import can_open_folders

# POSIX-only / Windows-only open flags (0 where absent).
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

FAULT_ENV = "CTINDEX_FAULT"


class WriteFailed(IndexWriteError):
    """A write failed at `stage`: "create" (the new file could not be made),
    "write" (writing or syncing it failed) or "rename" (it could not replace
    the target). The message is the store's one line; errno, strerror and
    filename are the system's, for writers that word their own
    (`as_os_error`)."""

    def __init__(self, message: str, stage: str, exc: OSError, filename: Path) -> None:
        super().__init__(message)
        self.stage = stage
        self.errno = exc.errno
        self.strerror = exc.strerror
        self.filename = exc.filename or str(filename)

    def as_os_error(self) -> OSError:
        return OSError(self.errno, self.strerror, self.filename)


def file_mode(folder: str | os.PathLike[str]) -> int:
    """The mode of a file made in the folder `folder`: its read and write
    bits (0600 in a 0700 folder, 0660 in a group-shared one)."""
    try:
        bits = stat.S_IMODE(os.stat(folder).st_mode)
    except OSError:
        return 0o600
    return bits & 0o666


def fault(point: str) -> None:
    """Test hook: die abruptly at a named point when CTINDEX_FAULT names it.

    ``CTINDEX_FAULT=point`` or ``point:N`` (die the N-th time the point is
    reached in this process). ``os._exit`` skips every cleanup, like SIGKILL.
    ``pause@point[:N]`` waits there instead, after creating the file
    CTINDEX_FAULT_READY names, so a test can send a signal (Ctrl-C's SIGINT)
    that lands at exactly that point; the wait is bounded (PAUSE_S).
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    pause = spec.startswith(PAUSE_PREFIX)
    name, _, count = spec.removeprefix(PAUSE_PREFIX).partition(":")
    if name != point:
        return
    remaining = int(count or "1") - 1
    if remaining > 0:
        os.environ[FAULT_ENV] = f"{PAUSE_PREFIX if pause else ''}{name}:{remaining}"
    elif pause:
        del os.environ[FAULT_ENV]  # once
        _pause_here()
    else:
        os._exit(137)


PAUSE_PREFIX = "pause@"
READY_ENV = "CTINDEX_FAULT_READY"
PAUSE_S = 60.0  # a hang guard: the test's signal normally ends the wait at once


def _pause_here() -> None:
    import time

    ready = os.environ.get(READY_ENV)
    if ready:
        with open(ready, "w", encoding="utf-8") as fh:
            fh.write(str(os.getpid()))
    deadline = time.monotonic() + PAUSE_S
    while time.monotonic() < deadline:
        time.sleep(0.05)  # a signal's handler runs (KeyboardInterrupt) within this


def write_new(
    path: Path,
    chunks: list[bytes] | bytes,
    *,
    fault_point: str | None = None,
    sync: bool = True,
    mode: int | None = None,
    exact_mode: bool = False,
) -> int:
    """Create `path` (must not exist: O_EXCL, so a name placed there
    beforehand, a link to another file, is never written through), write
    every chunk, fsync (unless not `sync`). Returns the size. The mode is
    its folder's (``file_mode``) unless `mode` is given: then it is created
    with `mode` through the umask, or set to exactly `mode` with
    `exact_mode`. A file not completely written is removed. Raises
    WriteFailed (an IndexWriteError)."""
    if isinstance(chunks, (bytes, bytearray)):
        chunks = [bytes(chunks)]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY
    try:
        fd = os.open(path, flags, 0o600 if mode is None or exact_mode else mode)
    except OSError as exc:
        raise WriteFailed(
            f"{path}: cannot create index file ({exc.strerror})", "create", exc, path
        ) from exc
    size = 0
    written = False
    try:
        if mode is None:
            _give_mode(fd, path.parent)
        elif exact_mode and mode != 0o600 and hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        for i, chunk in enumerate(chunks):
            view = memoryview(chunk)
            while view:
                n = os.write(fd, view)
                view = view[n:]
                size += n
            if fault_point and i == len(chunks) // 2:
                fault(fault_point)  # a torn file on disk, never named by a manifest
        if sync:
            os.fsync(fd)
        written = True
    except OSError as exc:
        raise WriteFailed(
            f"{path}: cannot write index file ({exc.strerror})", "write", exc, path
        ) from exc
    finally:
        os.close(fd)
        if not written:
            # Ours (O_EXCL) and never named: remove it now, or a full disk stays
            # full of our own partial file until the grace period has passed.
            with contextlib.suppress(OSError):
                os.unlink(path)
    return size


def _give_mode(fd: int, folder: Path) -> None:
    """The file mode derived from its folder's (``file_mode``): created
    0600, widened to 0660 only in a folder shared with a group."""
    mode = file_mode(folder)
    if mode != 0o600 and hasattr(os, "fchmod"):
        os.fchmod(fd, mode)


def fsync_dir(folder: Path) -> None:
    if not can_open_folders():  # Windows: a rename needs no folder fsync
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # some filesystems do not let folders be opened; nothing more we can do
    try:
        os.fsync(fd)
    except OSError:
        pass  # e.g. EINVAL on filesystems without folder fsync
    finally:
        os.close(fd)


def atomic_write(
    target: Path,
    data: bytes,
    *,
    sync: bool = True,
    fault_label: str | None = None,
    mode: int | None = None,
    exact_mode: bool = False,
    tmp_name: str | None = None,
) -> None:
    """The one way to replace a file in place: temp sibling (fresh
    name), rename over `target`. A reader sees the old file or the new one,
    never a torn one. With `sync` (MANIFEST) the temp file and then the
    folder are fsynced, so the rename survives a power cut; a best-effort
    record (store/passlog.py) skips both. `fault_label` names the test hooks
    around the rename (``before-<label>-rename``, ``after-...``). `mode`
    and `exact_mode` as for write_new. `tmp_name`: the temp sibling's name
    (default ``<name>.<pid>.<random>.tmp``), for a folder whose readers
    skip files by name (``hidden_tmp_name``). The temp file never outlives
    a failure. Raises WriteFailed (an IndexWriteError)."""
    tmp = target.with_name(tmp_name or f"{target.name}.{os.getpid()}.{os.urandom(3).hex()}.tmp")
    write_new(tmp, data, sync=sync, mode=mode, exact_mode=exact_mode)
    if fault_label:
        fault(f"before-{fault_label}-rename")
    try:
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteFailed(
            f"{target}: cannot publish ({exc.strerror})", "rename", exc, target
        ) from exc
    if sync:
        fsync_dir(target.parent)
    if fault_label:
        fault(f"after-{fault_label}-rename")


def hidden_tmp_name(target: Path) -> str:
    """A temp name folder readers skip: ``.<name>.<pid>.<random>.tmp``."""
    return f".{target.name}.{os.getpid()}.{os.urandom(3).hex()}.tmp"
