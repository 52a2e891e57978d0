"""Does this filesystem keep a change time of its own? Tested, not assumed.

The reconciler vouches for "unchanged" by the full fingerprint (size,
mtime_ns, ctime_ns, inode, device: ctindex/reconciler/fingerprint.py). On
a local disk a rewrite that restores the old modification time (`cp -p`,
`rsync -a`, `tar -x`, `touch -d`) still moves ctime, which nobody can set.
Some network filesystems report no ctime of their own: sshfs (sftp carries
none) gives ctime = mtime, so such a rewrite of a same-sized file leaves
the whole fingerprint as it was, and no walk through that mount can see it.

`ctime_kept` finds out by doing exactly that to a scratch file in a folder
on the mount: set its mtime far into the past, then look at its ctime. A
filesystem that keeps ctime shows the moment of the change; one that
mirrors mtime shows the past. One probe per folder per process (a few round
trips), only on the walk a query makes without a share host
(ctindex/query/freshness.py), and its answer goes into that answer's label
(docs/network-shares.md, "What bounds the walk's freshness").
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PROBE_PREFIX = ".ctime-probe-"  # in the index folder, which no scope indexes
PAST_NS = 1_000_000_000 * 10**9  # September 2001: no write happens at that instant

_known: dict[str, bool | None] = {}


def ctime_kept(folder: Path | str) -> bool | None:
    """True: the filesystem of `folder` keeps its own ctime; False: ctime
    follows a set mtime; None: it could not be tested (not writable, gone)."""
    key = os.fspath(folder)
    if key in _known:
        return _known[key]
    found = _probe(key)
    _known[key] = found
    return found


def _probe(folder: str) -> bool | None:
    path = os.path.join(folder, f"{PROBE_PREFIX}{os.getpid()}-{os.urandom(4).hex()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return None
    try:
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
        os.utime(path, ns=(PAST_NS, PAST_NS), follow_symlinks=False)
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if st.st_mtime_ns != PAST_NS:
        return None  # the filesystem did not take the time at all: no conclusion
    return st.st_ctime_ns != PAST_NS


def forget() -> None:
    """Test again at the next call (tests; a remount)."""
    _known.clear()
