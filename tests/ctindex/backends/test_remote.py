"""Network filesystems told from a stat (ctindex/backends/remote.py): the
device number's line of the mount table, never a path resolved through the
share; a block device answered without reading anything."""

from __future__ import annotations

import os

import pytest

from ctindex.backends import mounts, remote

TABLE = "\n".join(
    [
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw",
        "30 27 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw",
        "41 27 0:53 / /mnt/a\\040share rw,nosuid - fuse.sshfs user@server:/export rw",
        "42 27 0:54 / /mnt/nfs rw - nfs4 server:/export rw,vers=4.2",
        "43 27 0:55 / /mnt/odd rw shared:7 - cifs //server/share rw",
    ]
)


@pytest.mark.parametrize(
    ("fstype", "kind"),
    [
        ("nfs4", "remote filesystem"),
        ("cifs", "SMB share"),
        ("fuse.sshfs", "FUSE filesystem"),
        ("virtiofs", "host-shared filesystem"),
        ("ext4", None),
        ("tmpfs", None),
        ("overlay", None),
    ],
)
def test_the_kind_of_each_filesystem(fstype: str, kind: str | None) -> None:
    assert remote.remote_kind(fstype) == kind
    assert mounts.classify(fstype)[0] is (kind is None and fstype in mounts.LOCAL)


def test_the_device_number_names_the_mount() -> None:
    assert remote.network_fstype(os.makedev(0, 53), TABLE) == "fuse.sshfs"
    assert remote.network_fstype(os.makedev(0, 54), TABLE) == "nfs4"
    assert remote.network_fstype(os.makedev(0, 55), TABLE) == "cifs"  # optional fields before " - "
    assert remote.network_fstype(os.makedev(0, 27), TABLE) is None  # tmpfs: local
    assert remote.network_fstype(os.makedev(0, 99), TABLE) is None  # no such line: not known remote


def test_a_block_device_is_local_without_reading_the_table() -> None:
    # The table would say otherwise; it is not read for a block device.
    assert remote.network_fstype(os.makedev(254, 0), "1 1 254:0 / / - nfs4 s:/ rw") is None


def test_agrees_with_the_mount_table_for_every_mount_here() -> None:
    """Differential: the device rule against the path rule of
    ctindex/backends/mounts.py, on this machine's own mounts."""
    try:
        table = mounts.read_mounts()
    except OSError:
        pytest.skip("no mount table")
    checked = 0
    for m in table:
        try:
            st = os.stat(m.mount_point)
        except OSError:
            continue
        holder = mounts.mount_of(m.mount_point, table)
        if holder is None or holder is not m:
            continue  # stacked over, or shadowed: the path rule sees another mount
        want = m.fstype if remote.remote_kind(m.fstype) is not None else None
        assert remote.network_fstype(st.st_dev) == want, m
        checked += 1
    assert checked > 0
