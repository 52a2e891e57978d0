"""ctindex/policy/netfs.py: the mount options the barrier through a share relies
on, read from a mount table (proc(5) mountinfo format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctindex.policy import netfs

TABLE = (
    "36 25 0:32 / /mnt/nfs rw,relatime shared:1 - nfs4 srv:/e rw,vers=4.2,nocto,addr=10.0.0.1\n"
    "37 25 0:33 / /mnt/nfs\\040ok rw,relatime - nfs4 srv:/b rw,vers=4.2,addr=10.0.0.1\n"
    "38 25 0:34 / /mnt/smb rw - cifs //srv/s rw,vers=3.1.1,actimeo=1\n"
    "39 25 0:35 / /mnt/smb0 rw - cifs //srv/t rw,actimeo=0\n"
    "40 25 0:36 / /mnt/ssh rw,nosuid,nodev - fuse.sshfs u@h:/x rw,user_id=0,group_id=0\n"
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text(TABLE)
    return path


@pytest.fixture
def patched(table: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """netfs reads `table` as its mount table."""
    real = netfs.mount_options
    monkeypatch.setattr(netfs, "mount_options", lambda point: real(point, str(table)))
    return table


def test_mount_options_joins_per_mount_and_filesystem_options(table: Path) -> None:
    opts = netfs.mount_options("/mnt/nfs", str(table))
    assert {"relatime", "nocto", "vers=4.2"} <= opts
    assert "nocto" not in netfs.mount_options("/mnt/nfs ok", str(table))  # \040 unescaped
    assert netfs.mount_options("/nowhere", str(table)) == set()
    assert netfs.mount_options("/mnt/nfs", str(table.parent / "absent")) == set()


@pytest.mark.parametrize(
    ("share", "says"),
    [
        (netfs.Share("nfs4", "/mnt/nfs", "NFS"), "nocto"),
        (netfs.Share("nfs4", "/mnt/nfs ok", "NFS"), None),
        (netfs.Share("cifs", "/mnt/smb", "SMB share"), "caches attributes for 1 s"),
        (netfs.Share("cifs", "/mnt/smb0", "SMB share"), None),
        (netfs.Share("fuse.sshfs", "/mnt/ssh", "FUSE filesystem"), None),
    ],
)
def test_cache_note_names_what_delays_an_answer(
    patched: Path, share: netfs.Share, says: str | None
) -> None:
    note = netfs.cache_note(share)
    if says is None:
        assert note is None
    else:
        assert note is not None and says in note and share.mount_point in note
