"""Which filesystem holds a path, and whether its native events can be trusted.

Parses /proc/self/mountinfo (proc(5)); hand-written because the standard
library has no mount-table reader and psutil's disk_partitions() drops pseudo
and FUSE mounts and does not undo the octal escapes of odd mount points.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import select
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from ctindex.backends.platform_features import MOUNTINFO, has_mountinfo
from ctindex.backends.remote import remote_kind

# Local, kernel-owned filesystems: every change passes through this kernel, so
# inotify sees it. Overlay counts as local: the kernel documentation forbids
# changing its lower layers while mounted, so every allowed write goes through
# the overlay and is reported (docs/backends.md).
LOCAL = frozenset(
    {
        "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "f2fs", "zfs",
        "bcachefs", "jfs", "reiserfs", "reiser4", "nilfs2", "hfs", "hfsplus",
        "vfat", "msdos", "exfat", "ntfs3", "udf", "iso9660", "squashfs", "erofs",
        "overlay", "btrfs_subvol", "minix",
    }
)  # fmt: skip
# Filesystems whose content other machines change: ctindex/backends/remote.py.

_ESCAPE = re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    mount_point: str  # absolute, unescaped (os.fsdecode of the raw bytes)
    fstype: str  # "ext4", "nfs4", "fuse.sshfs", ...
    source: str
    root: str  # the folder of the source filesystem mounted here (bind mounts)
    # proc(5)'s mount ID: a filesystem unmounted and another mounted in its
    # place with the same type and source is still a different mount.
    mount_id: int = 0


def unescape(field: bytes) -> str:
    """Undo mountinfo's octal escapes (\\040 space, \\011 tab, \\012 newline, \\134 backslash)."""
    return os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def parse_mountinfo(text: bytes) -> list[Mount]:
    """Parse the whole table; malformed lines are skipped, never fatal."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        fields = line.split(b" ")
        try:
            sep = fields.index(b"-", 6)  # optional fields end at a lone "-"
            root, point = fields[3], fields[4]
            fstype, source = fields[sep + 1], fields[sep + 2]
            mount_id = int(fields[0])
        except (ValueError, IndexError):
            continue
        mounts.append(
            Mount(unescape(point), unescape(fstype), unescape(source), unescape(root), mount_id)
        )
    return mounts


def read_mounts(path: str | None = None) -> list[Mount]:
    """The mount table; OSError where there is none (macOS, Windows, the
    ``no-mountinfo`` simulation): callers then decide without it."""
    if path is None:
        if not has_mountinfo():
            raise FileNotFoundError(errno.ENOENT, "no mount table on this platform", MOUNTINFO)
        path = MOUNTINFO
    with open(path, "rb") as f:
        return parse_mountinfo(f.read())


def _contains(folder: str, path: str) -> bool:
    return folder == "/" or path == folder or path.startswith(folder.rstrip("/") + "/")


def mount_of(path: str, mounts: Iterable[Mount]) -> Mount | None:
    """The mount holding an absolute, symlink-free path: the longest mount
    point containing it; among mounts stacked on one point, the last wins."""
    best: Mount | None = None
    for m in mounts:
        if _contains(m.mount_point, path) and (
            best is None or len(m.mount_point) >= len(best.mount_point)
        ):
            best = m
    return best


def mounts_below(path: str, mounts: Iterable[Mount]) -> list[Mount]:
    """Mounts strictly inside `path` (a watch tree crosses into them)."""
    return [m for m in mounts if m.mount_point != path and _contains(path, m.mount_point)]


def classify(fstype: str) -> tuple[bool, str | None]:
    """(native events reliable?, reason when not)."""
    if fstype in LOCAL:
        return True, None
    kind = remote_kind(fstype)
    if kind is not None:
        return False, f"{fstype}: {kind}, no reliable events"
    return False, f"{fstype or '?'}: unknown filesystem type, events not trusted"


def check_paths(paths: Iterable[str], mounts: list[Mount] | None = None) -> str | None:
    """None when every path (and every mount nested below it) is on a local
    filesystem, else the first reason to use the poll lane."""
    if mounts is None:
        try:
            mounts = read_mounts()
        except OSError as e:
            return f"mount table unreadable: {e.strerror or e}"
    for raw in paths:
        path = os.path.realpath(raw)
        found = mount_of(path, mounts)
        if found is None:
            return f"{path}: no mount found"
        for m in [found, *mounts_below(path, mounts)]:
            ok, why = classify(m.fstype)
            if not ok:
                return f"{why} ({m.mount_point})"
    return None


def relevant(paths: Iterable[str], mounts: list[Mount]) -> list[Mount]:
    """The mounts that decide what `paths` show: the one holding each path
    (a mount on the path or on any folder above it replaces the whole
    tree) and every mount below it (the watch tree and the walk cross into
    them). Exactly the mounts check_paths classifies."""
    found: dict[int, Mount] = {}
    for raw in paths:
        path = os.path.realpath(raw)
        for m in [mount_of(path, mounts), *mounts_below(path, mounts)]:
            if m is not None:
                found[id(m)] = m
    return sorted(found.values(), key=lambda m: (m.mount_point, m.mount_id))


class MountTable:
    """Tells when the part of the mount table that matters for `paths` changed.

    No filesystem event announces a mount or an unmount, but the kernel marks
    /proc/self/mountinfo with POLLPRI|POLLERR whenever the table changes
    (proc(5)). Those flags are not selectable through the selectors module
    (it only knows readable/writable, and mountinfo is always readable), so
    they are watched by a private epoll whose own fd turns readable on a
    change: that fd goes into the caller's selector (`fileno()`).

    `changed()` is the confirmation for the moments that must not trust a
    notification (a barrier). It asks a second, private descriptor of the
    kernel's table with a zero-timeout poll(): the kernel compares its
    namespace's mount event counter with the one this descriptor last saw,
    synchronously, inside the call, so a change made before the call is
    never missed, and no change means the table read last is still the
    table. That costs one system call where re-reading and comparing the
    table cost tens of microseconds on every query. The probe has its own
    descriptor because the counter is kept per open file: the descriptor
    the selector polls is consumed by the loop at times of its own. When
    the probe says changed, or there is none (another source, no poll), the
    table is read and its bytes compared; only when those differ are the
    lines relevant to `paths` parsed and compared. `changed(reread=True)`
    (the heartbeat) always reads. The first reading is taken at
    construction, so open this before classifying or watching anything.
    """

    def __init__(self, source: str | None = None) -> None:
        self.paths: tuple[str, ...] = ()
        # No table (macOS, Windows, the simulation): every reading is the
        # same "unreadable", so changed() never fires.
        self.source = source if source is not None else MOUNTINFO if has_mountinfo() else None
        self.checks = 0  # checks (barriers, heartbeats and notifications)
        self.reads = 0  # of which read the table (the probe could not vouch)
        self.changes = 0  # relevant changes found
        self._file: BinaryIO | None = None
        self._poll: select.epoll | None = None
        self._probe: BinaryIO | None = None
        self._probe_poll: select.poll | None = None
        if source is None and self.source is not None:
            self._open_probe(self.source)  # before the first reading: see changed()
        try:
            if self.source is None:
                raise FileNotFoundError(errno.ENOENT, "no mount table on this platform")
            self._file = open(self.source, "rb")  # noqa: SIM115 -- held open: its fd is polled
            self._poll = select.epoll()
            self._poll.register(self._file.fileno(), select.EPOLLPRI | select.EPOLLERR)
        except (OSError, AttributeError):  # no table or no epoll: the checks still run
            self.close()
        self._raw = self._read()
        self.digest = self._digest(self._raw)

    def track(self, paths: Sequence[str]) -> None:
        """Set the paths, judged against the table as it was read at
        construction: a mount made since then shows up in the next changed()."""
        self.paths = tuple(paths)
        self.digest = self._digest(self._raw)

    def fileno(self) -> int | None:
        return self._poll.fileno() if self._poll is not None else None

    def _open_probe(self, source: str) -> None:
        try:
            self._probe = open(source, "rb")  # noqa: SIM115 -- held open: its counter is polled
            self._probe_poll = select.poll()
            self._probe_poll.register(self._probe.fileno(), select.POLLPRI)
        except (OSError, AttributeError):  # no poll(): every check reads the table
            self._close_probe()

    def _probed_unchanged(self) -> bool:
        """True when the kernel says the table is the one read last (the
        probe's poll consumes the mark: a read follows whenever it is set)."""
        if self._probe_poll is None or not isinstance(self._raw, bytes):
            return False
        try:
            events = self._probe_poll.poll(0)
        except OSError:
            self._close_probe()  # cannot ask any more: read from now on
            return False
        return not any(mask & (select.POLLPRI | select.POLLERR) for _, mask in events)

    def changed(self, reread: bool = False) -> bool:
        """True when the mounts relevant to the paths differ from the last
        reading (an unreadable table differs from any readable one). The
        table is read again unless the probe vouches for it (see the class
        docstring); `reread` reads it regardless."""
        self.checks += 1
        if self._poll is not None:
            with contextlib.suppress(OSError):
                self._poll.poll(0)  # consume the notification, if any
        # Ask before reading: a change after the question shows in this
        # reading or in the next question's answer.
        if self._probed_unchanged() and not reread:
            return False
        self.reads += 1
        raw = self._read()
        if isinstance(raw, bytes) and raw == self._raw:
            return False  # the common case: one read and a comparison
        self._raw = raw
        digest = self._digest(raw)
        if digest == self.digest:
            return False  # a mount elsewhere on the machine
        self.digest = digest
        self.changes += 1
        return True

    def _read(self) -> bytes | str:
        if self.source is None:
            return "unreadable: no mount table on this platform"
        try:
            with open(self.source, "rb") as f:
                return f.read()
        except OSError as e:
            return f"unreadable: {e.strerror or e}"

    def _digest(self, raw: bytes | str) -> str:
        if isinstance(raw, str):
            return raw
        lines = [
            f"{m.mount_id} {m.mount_point} {m.root} {m.fstype} {m.source}"
            for m in relevant(self.paths, parse_mountinfo(raw))
        ]
        data = "\n".join(lines).encode(errors="surrogateescape")
        return hashlib.blake2b(data, digest_size=16).hexdigest()

    def _close_probe(self) -> None:
        self._probe_poll = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def close(self) -> None:
        self._close_probe()
        if self._poll is not None:
            self._poll.close()
            self._poll = None
        if self._file is not None:
            self._file.close()
            self._file = None
