"""A daemon that did not answer, remembered so later queries skip it.

A stopped (SIGSTOP, a suspended terminal job) or wedged daemon still has
its socket, and the kernel still completes connections to it: only the
missing ACK line (ctindex/ipc/protocol.py) tells it apart, after
ACK_WAIT_S. That wait is paid once: the query that paid it writes a record
into the runtime folder, and every query (of any process) that finds the
record in force goes straight to its own fallback, labelled with the reason
`daemon not answering: backed off until HH:MM:SS` (docs/daemon.md,
"A daemon that does not answer").

The record names the daemon it is about (the pid and instance token of its
lock file, the socket's device and inode): another daemon, or none, makes
it void. It is in force until its expiry, a bounded exponential back-off
(BACKOFF_FIRST_S doubling per repeated strike up to BACKOFF_MAX_S), and
only while the daemon shows no sign of life: its heartbeat rewrites
status.json every second (ctindex/daemon/schedule.py HEARTBEAT_S), so a
status.json whose full stat fingerprint differs from the one recorded
means the loop runs again (SIGCONT) and the next query asks it. A daemon
that answers clears the record the query found when it asked (`check`).

Standard library only, and cheap when there is no record (one failed
open): the query path (ctindex/fast_entry.py) checks it before every request.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ctindex.ipc.protocol import ACK_WAIT_S as ACK_WAIT_S  # what a strike waited for
from ctindex.ipc.records import read_record, write_record

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from ctindex.ipc.records import Record
    from ctindex.ipc.runtime_dir import RuntimePaths

BACKOFF_FIRST_S = 2.0
BACKOFF_MAX_S = 60.0
REASON = "daemon not answering"
RECORD_NAME = "unanswered.json"
LOCK_RECORD_LIMIT = 4096  # ctindex/client/control.py: the lock file holds "pid instance"

# Strikes this process could not write down (a read-only runtime folder),
# by socket path: (reason, until). The in-process fallback after the query
# path's wait must not wait again even then.
_unwritten: dict[str, tuple[str, float]] = {}


def record_path(paths: RuntimePaths) -> Path:
    return paths.file(RECORD_NAME)


def skipped(paths: RuntimePaths, now: float | None = None) -> str | None:
    """The reason to skip the project's daemon (a freshness reason), or None
    when it should be asked."""
    return check(paths, now)[0]


def check(paths: RuntimePaths, now: float | None = None) -> tuple[str | None, bool]:
    """(`skipped`'s reason, whether there is a strike to `clear` once the
    daemon answers). Without one, an answer clears nothing: the query path
    skips the unlink, one system call on a missing name per query. A
    strike another process writes between this check and the answer then
    stays, void at the daemon's next heartbeat (it answers, so it beats)."""
    now = time.time() if now is None else now
    path = record_path(paths)
    # The usual case, no record, in one call that raises nothing; a file in
    # its place that is no readable record (a symlink, a torn write) is
    # absent to the reading below, and cleared by the next answer.
    present = _exists(path)
    record = read_record(path, 4096) if present else None
    if record is None:
        kept = _unwritten.get(os.fspath(paths.socket))
        if kept is None:
            return None, present
        return (kept[0] if now < kept[1] else None), True
    until = record.get("until")
    if not isinstance(until, (int, float)) or now >= until:
        return None, True  # expired: ask again (a failure strikes anew, for longer)
    daemon = _identity(paths)
    if record.get("daemon") != daemon or record.get("status") != _status_mark(paths):
        return None, True  # another daemon, none, or a heartbeat since: ask
    if not _lock_held(paths):
        return None, True  # it died (SIGKILL leaves its socket and lock file): a new one may start
    return _reason(until), True


def _exists(path: Path) -> bool:
    """Something (a symlink too) is at `path`."""
    if _ACCESS_NOFOLLOW:
        return os.access(path, os.F_OK, follow_symlinks=False)
    return os.path.lexists(path)


_ACCESS_NOFOLLOW = os.access in os.supports_follow_symlinks


def strike(paths: RuntimePaths, now: float | None = None) -> str:
    """Remember that the daemon did not acknowledge within ACK_WAIT_S;
    returns the reason the answer is labelled with."""
    now = time.time() if now is None else now
    daemon = _identity(paths)
    old = read_record(record_path(paths), 4096) or {}
    strikes = old.get("strikes") if old.get("daemon") == daemon else 0
    strikes = (strikes if isinstance(strikes, int) and strikes > 0 else 0) + 1
    window = min(BACKOFF_FIRST_S * 2 ** min(strikes - 1, 16), BACKOFF_MAX_S)
    until = now + window
    record: Record = {
        "daemon": daemon,
        "status": _status_mark(paths),
        "strikes": strikes,
        "since": old.get("since", now) if strikes > 1 else now,
        "until": until,
    }
    reason = _reason(until)
    from ctindex.errors import IndexWriteError

    try:
        write_record(record_path(paths), record)
    except (OSError, IndexWriteError):  # unwritable: this process still remembers
        _unwritten[os.fspath(paths.socket)] = (reason, until)
    return reason


def clear(paths: RuntimePaths) -> None:
    """The daemon answered: forget any strike against it."""
    _unwritten.pop(os.fspath(paths.socket), None)
    with contextlib.suppress(OSError):
        os.unlink(record_path(paths))


def _reason(until: float) -> str:
    return f"{REASON}: backed off until {time.strftime('%H:%M:%S', time.localtime(until))}"


def _identity(paths: RuntimePaths) -> list[list[str] | int] | None:
    """[lock record words, socket device, socket inode]: which daemon this is."""
    try:
        st = os.lstat(paths.socket)
    except OSError:
        return None
    return [_lock_words(paths), st.st_dev, st.st_ino]


def _lock_held(paths: RuntimePaths) -> bool:
    """True while some process holds the daemon's lock (a stopped one does;
    a killed one, even a zombie nobody reaps, does not). The probe takes a
    shared lock for an instant, as ctindex/client/control.py `lock_held` does."""
    try:
        import fcntl  # the lock is flock(2)'s (portalocker's POSIX locker)
    except ImportError:  # elsewhere the socket and lock record identify it
        return True
    try:
        fd = os.open(paths.lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True  # cannot tell: keep the record's word
    finally:
        os.close(fd)  # drops the probe's lock, if it got it
    return False


def _lock_words(paths: RuntimePaths) -> list[str]:
    try:
        fd = os.open(paths.lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        return os.read(fd, LOCK_RECORD_LIMIT).decode("utf-8", "replace").split()[:2]
    except OSError:
        return []
    finally:
        os.close(fd)


def _status_mark(paths: RuntimePaths) -> list[int] | None:
    """The full stat fingerprint of status.json (replaced at every heartbeat)."""
    try:
        st = os.stat(paths.status)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
