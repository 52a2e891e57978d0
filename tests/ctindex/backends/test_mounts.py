"""Mount-table parsing and the filesystem classification table."""

from __future__ import annotations

import pytest

from ctindex.backends.mounts import check_paths, classify, mount_of, mounts_below, parse_mountinfo

SAMPLE = rb"""22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid - proc proc rw
30 22 0:40 / /home/u/My\040Docs rw,relatime shared:12 master:3 - nfs4 srv:/export/docs rw,vers=4.2
31 22 8:2 /sub /srv/data rw - xfs /dev/sdb1 rw
32 31 0:45 / /srv/data/fuse rw - fuse.sshfs u@h:/ rw
33 22 0:46 / /mnt/tab\011and\134back rw - cifs //h/s rw
34 22 0:47 / /srv/data rw - tmpfs tmpfs rw
garbage line without separator
35 22 0:48 / /weird rw
"""


def test_parse_undoes_octal_escapes_and_skips_garbage() -> None:
    mounts = parse_mountinfo(SAMPLE)
    points = [m.mount_point for m in mounts]
    assert "/home/u/My Docs" in points
    assert "/mnt/tab\tand\\back" in points
    assert len(mounts) == 7
    docs = next(m for m in mounts if m.mount_point == "/home/u/My Docs")
    assert (docs.fstype, docs.source) == ("nfs4", "srv:/export/docs")
    assert next(m for m in mounts if m.fstype == "xfs").root == "/sub"


def test_mount_of_longest_prefix_last_stacked_wins() -> None:
    mounts = parse_mountinfo(SAMPLE)

    def fstype(path: str) -> str | None:
        found = mount_of(path, mounts)
        return found.fstype if found else None

    assert fstype("/home/u/My Docs/kb/x.md") == "nfs4"
    assert fstype("/home/u/My Docsx") == "ext4"  # prefix of a name is not containment
    assert fstype("/srv/data/kb") == "tmpfs"  # mounted over the xfs later
    assert fstype("/srv/data/fuse/a") == "fuse.sshfs"
    assert fstype("/") == "ext4"
    assert [m.fstype for m in mounts_below("/srv", mounts)] == ["xfs", "fuse.sshfs", "tmpfs"]


@pytest.mark.parametrize(
    ("fstype", "native", "words"),
    [
        ("ext4", True, None),
        ("xfs", True, None),
        ("btrfs", True, None),
        ("tmpfs", True, None),
        ("zfs", True, None),
        ("overlay", True, None),
        ("nfs", False, "nfs: remote filesystem, no reliable events"),
        ("nfs4", False, "remote filesystem"),
        ("cifs", False, "SMB share"),
        ("smb3", False, "SMB share"),
        ("fuse.sshfs", False, "FUSE filesystem"),
        ("fuseblk", False, "FUSE filesystem"),
        ("9p", False, "host-shared"),
        ("virtiofs", False, "host-shared"),
        ("ceph", False, "cluster"),
        ("afs", False, "remote"),
        ("mysteryfs", False, "unknown filesystem type"),
    ],
)
def test_classify(fstype: str, native: bool, words: str | None) -> None:
    ok, reason = classify(fstype)
    assert ok is native
    if words is None:
        assert reason is None
    else:
        assert reason is not None and words in reason


def test_check_paths_sees_nested_remote_mounts() -> None:
    mounts = parse_mountinfo(SAMPLE)
    assert check_paths(["/"], [m for m in mounts if m.fstype in ("ext4",)]) is None
    reason = check_paths(["/srv"], mounts)
    assert reason is not None and reason.startswith("fuse.sshfs") and "/srv/data/fuse" in reason
    assert check_paths(["/nowhere"], []) == "/nowhere: no mount found"
