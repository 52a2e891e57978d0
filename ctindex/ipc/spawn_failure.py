"""The spawn-failure record: a failed daemon start, remembered for back-off.

A client that could not start a daemon (an unwritable runtime folder, a
spawn that failed) and a daemon that stopped itself (memory limit) leave
this record, so the next commands do not try again within a window of
60 s doubling to an hour (docs/daemon.md). It lives in the runtime folder,
or, when that is what failed, in the per-user fallback folder.
"""

from __future__ import annotations

import contextlib
import os

from ctindex.errors import IndexWriteError
from ctindex.ipc.records import read_record, write_record
from ctindex.ipc.runtime_dir import RuntimePaths, ensure_fallback_dir, store_link

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from ctindex.ipc.records import Record

BACKOFF_FIRST_S = 60.0
BACKOFF_MAX_S = 3600.0
# A cached "failure" that is a daemon's own stop (memory-limit) rather than a
# failed spawn: the freshness reason names it as it is (ctindex/client/spawn.py).
STOPPED_PREFIX = "daemon stopped: "


def record_spawn_failure(paths: RuntimePaths, error: str, now: float | None = None) -> bool:
    """Remember a failed spawn so later commands back off (60 s doubling to an
    hour). Written in the runtime folder, or, when that is what failed, in the
    per-user fallback folder. False when neither can be written."""
    import time

    now = time.time() if now is None else now
    previous = _read_failure(paths)
    count = _count(previous) + 1
    window = min(BACKOFF_FIRST_S * 2 ** (count - 1), BACKOFF_MAX_S)
    record: Record = {"time": now, "error": error, "count": count, "retry_after": now + window}
    # Never through a linked store folder (the failure may be that refusal).
    with contextlib.suppress(OSError, IndexWriteError):
        if not store_link(os.fspath(paths.root)):
            write_record(paths.failed, record)
            return True
    with contextlib.suppress(OSError, IndexWriteError):
        ensure_fallback_dir(paths)
        write_record(paths.fallback_failed, record)
        return True
    return False


def spawn_failure(paths: RuntimePaths, now: float | None = None) -> Record | None:
    """The cached failure while its back-off window is open, else None."""
    import time

    now = time.time() if now is None else now
    record = _read_failure(paths)
    if record is None:
        return None
    retry_after = record.get("retry_after")
    if not isinstance(retry_after, (int, float)) or now >= retry_after:
        return None
    return record


def clear_spawn_failure(paths: RuntimePaths) -> None:
    for path in (paths.failed, paths.fallback_failed):
        with contextlib.suppress(OSError):
            os.unlink(path)


def _read_failure(paths: RuntimePaths) -> Record | None:
    """The newest of the two possible records (a corrupt one counts as absent)."""
    found = [
        (when, r)
        for r in (read_record(paths.failed), read_record(paths.fallback_failed))
        if r is not None and isinstance(when := r.get("time"), (int, float))
    ]
    return max(found, key=lambda found: found[0])[1] if found else None


def _count(previous: Record | None) -> int:
    """How many spawns failed in a row before this one (0 without a record
    or with a count that is not a number)."""
    count = previous.get("count", 0) if previous else 0
    return int(count) if isinstance(count, (int, float)) else 0
