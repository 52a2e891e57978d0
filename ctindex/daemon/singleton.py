"""Small filesystem helpers of the daemon: the singleton lock and the folders
it owns inside the runtime folder."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path
from typing import IO

from ctindex.base.statefile import open_regular
from ctindex.ipc.runtime_dir import ensure_private_dir

LOCK_ATTEMPTS = 5  # a `watch status` probe can hold the lock for an instant
LOCK_RETRY_S = 0.02
# A daemon launched as `--successor` replaces one that is leaving
# (another build, docs/daemon.md "Build identity"): it waits up to 2 s for
# that one's graceful exit. Detached, so no query waits with it.
SUCCESSOR_ATTEMPTS = 100


def acquire_lock(path: Path, attempts: int = LOCK_ATTEMPTS) -> IO[str] | None:
    """The singleton lock, non-blocking (`attempts` tries LOCK_RETRY_S apart).
    The returned file must stay open for the daemon's life."""
    import portalocker

    # Held for the daemon's life. Opened without blocking or following a
    # symlink: a FIFO put in its place must not hang the daemon's start.
    fh = os.fdopen(open_regular(path, os.O_RDWR | os.O_CREAT | os.O_APPEND), "a+", encoding="utf-8")
    for attempt in range(attempts):
        try:
            portalocker.lock(fh, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except portalocker.exceptions.LockException:
            if attempt + 1 < attempts:
                time.sleep(LOCK_RETRY_S)
            continue
        fh.seek(0)
        fh.truncate()
        return fh
    fh.close()
    return None


def lock_intact(path: Path, held: IO[str]) -> bool:
    """True while `path` is still the file we hold the lock on. A lock on a
    deleted or replaced file no longer excludes anyone."""
    try:
        here, ours = os.stat(path), os.fstat(held.fileno())
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (ours.st_dev, ours.st_ino)


def repair_folder(folder: Path, within: Path) -> None:
    """Make every level from `within` to `folder` a private folder again,
    removing whatever non-folder took a level's place (runtime files only)."""
    level = within
    for part in (None, *folder.relative_to(within).parts):
        level = level if part is None else level / part
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISDIR(os.lstat(level).st_mode):
                os.unlink(level)
    ensure_private_dir(folder, within=within)


def touch(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def clear_folder(folder: Path) -> None:
    with os.scandir(folder) as it:
        for entry in it:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
