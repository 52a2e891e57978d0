"""Which filesystem holds a path, and whether its native events can be trusted.

Parses /proc/self/mountinfo (proc(5)); hand-written because the standard
library has no mount-table reader and psutil's disk_partitions() drops pseudo
and FUSE mounts and does not undo the octal escapes of odd mount points.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

MOUNTINFO = "/proc/self/mountinfo"

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
# Filesystems whose content other machines (or a host) change behind our back.
REMOTE = {
    "nfs": "remote filesystem",
    "nfs4": "remote filesystem",
    "cifs": "SMB share",
    "smb3": "SMB share",
    "smbfs": "SMB share",
    "ncpfs": "remote filesystem",
    "ceph": "cluster filesystem",
    "afs": "remote filesystem",
    "coda": "remote filesystem",
    "gfs2": "cluster filesystem",
    "ocfs2": "cluster filesystem",
    "lustre": "cluster filesystem",
    "gpfs": "cluster filesystem",
    "beegfs": "cluster filesystem",
    "9p": "host-shared filesystem",
    "virtiofs": "host-shared filesystem",
    "vboxsf": "host-shared filesystem",
    "prl_fs": "host-shared filesystem",
    "davfs": "remote filesystem",
    "fuseblk": "FUSE filesystem",
    "fuse": "FUSE filesystem",
}

_ESCAPE = re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    mount_point: str  # absolute, unescaped (os.fsdecode of the raw bytes)
    fstype: str  # "ext4", "nfs4", "fuse.sshfs", ...
    source: str
    root: str  # the folder of the source filesystem mounted here (bind mounts)


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
        except (ValueError, IndexError):
            continue
        mounts.append(Mount(unescape(point), unescape(fstype), unescape(source), unescape(root)))
    return mounts


def read_mounts(path: str = MOUNTINFO) -> list[Mount]:
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
    kind = REMOTE.get(fstype)
    if kind is None and fstype.startswith("fuse."):
        kind = "FUSE filesystem"
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
