"""Which filesystems other machines change behind this one's back, and
whether a folder already stat'ed lies on one: the question a query asks
before it spends round trips on a daemon that cannot be there.

The table is the one ctindex/backends/mounts.py classifies every mount
by. `network_fstype` answers from a stat the caller already holds: a
folder on a block device (a local disk) is answered without reading
anything; otherwise the mount table's line for that device number
(`/proc/self/mountinfo`, field 3 is the `st_dev` of the mount) names the
filesystem. No path is resolved, so nothing is asked of a share. Standard
library only: ctindex/fast_entry.py imports it on every search.
"""

from __future__ import annotations

import os

from ctindex.backends.platform_features import MOUNTINFO, has_mountinfo

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


def remote_kind(fstype: str) -> str | None:
    """The kind of network filesystem `fstype` is, or None (local or unknown)."""
    kind = REMOTE.get(fstype)
    if kind is None and fstype.startswith("fuse."):
        kind = "FUSE filesystem"
    return kind


def network_fstype(st_dev: int, table: str | None = None) -> str | None:
    """The network filesystem holding a file of device `st_dev`, or None
    (local, or no mount table to tell: the caller's usual path decides)."""
    if os.major(st_dev) != 0:
        return None  # a block device: network and FUSE filesystems have none
    if table is None:
        if not has_mountinfo():
            return None
        try:
            with open(MOUNTINFO, "rb") as f:
                table = f.read().decode("utf-8", "surrogateescape")
        except OSError:
            return None
    device = f"{os.major(st_dev)}:{os.minor(st_dev)}"
    for line in table.splitlines():
        fields = line.split(" ", 3)
        if len(fields) > 2 and fields[2] == device:
            _, sep, rest = line.partition(" - ")
            fstype = rest.split(" ", 1)[0] if sep else ""
            return fstype if remote_kind(fstype) is not None else None
    return None
