"""Network volumes on macOS and Windows go to the poll lane (ctindex/backends/volumes.py).

Layout numbers: Apple's <sys/mount.h> (macOS SDK, `struct statfs` with
__DARWIN_64_BIT_INO_T): fields in the order below, MFSTYPENAMELEN 16,
MAXPATHLEN 1024, sizeof 2168 on 64-bit macOS. Drive types: Microsoft's
GetDriveTypeW documentation (fileapi.h): DRIVE_UNKNOWN 0, DRIVE_NO_ROOT_DIR 1,
DRIVE_REMOTE 4.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from ctindex.backends import choose, volumes
from ctindex.backends.poll import PollWatcher
from ctindex.backends.volumes import MacStatfs, Volume

STATFS_OFFSETS = {
    "f_bsize": 0,
    "f_iosize": 4,
    "f_blocks": 8,
    "f_bfree": 16,
    "f_bavail": 24,
    "f_files": 32,
    "f_ffree": 40,
    "f_fsid": 48,
    "f_owner": 56,
    "f_type": 60,
    "f_flags": 64,
    "f_fssubtype": 68,
    "f_fstypename": 72,
    "f_mntonname": 88,
    "f_mntfromname": 1112,
    "f_flags_ext": 2136,
    "f_reserved": 2140,
}


def test_macos_statfs_layout_matches_sys_mount_h() -> None:
    assert ctypes.sizeof(MacStatfs) == 2168
    got = {name: getattr(MacStatfs, name).offset for name, *_ in MacStatfs._fields_}
    assert got == STATFS_OFFSETS
    assert volumes.MNT_LOCAL == 0x1000


@pytest.mark.parametrize(
    ("volume", "local"),
    [
        (Volume("apfs", volumes.MNT_LOCAL, "/"), True),
        (Volume("hfs", volumes.MNT_LOCAL | 1, "/Volumes/Disk"), True),
        (Volume("smbfs", 0, "/Volumes/share"), False),
        (Volume("nfs", 0, "/net/home"), False),
        (Volume("afpfs", 0, "/Volumes/afp"), False),
        (Volume("webdav", 0, "/Volumes/dav"), False),
        (Volume("macfuse", volumes.MNT_LOCAL, "/Volumes/sshfs"), False),  # MNT_LOCAL, not trusted
        (Volume("exfat", 0, "/Volumes/odd"), False),  # no MNT_LOCAL
    ],
)
def test_macos_volumes_are_classified(volume: Volume, local: bool) -> None:
    why = volumes.mac_reason(volume)
    assert (why is None) == local
    if why is not None:
        assert volume.mount_point in why


@pytest.mark.parametrize(
    ("path", "unc"),
    [
        ("\\\\server\\share\\docs", True),
        ("//server/share/docs", True),
        ("\\\\?\\UNC\\server\\share", True),
        ("\\\\?\\C:\\docs", False),
        ("\\\\.\\PhysicalDrive0", False),
        ("C:\\docs", False),
    ],
)
def test_unc_paths_are_remote_by_name(path: str, unc: bool) -> None:
    assert volumes.is_unc(path) is unc


def test_windows_drive_types() -> None:
    types = {"C:\\": 3, "Z:\\": volumes.DRIVE_REMOTE, "Q:\\": volumes.DRIVE_NO_ROOT_DIR}
    asked: list[str] = []

    def drive_type(root: str) -> int:
        asked.append(root)
        return types[root]

    assert volumes.windows_reason("C:\\docs", drive_type) is None
    assert "network drive" in str(volumes.windows_reason("Z:\\docs", drive_type))
    assert "unknown drive type" in str(volumes.windows_reason("Q:\\x", drive_type))
    assert "UNC" in str(volumes.windows_reason("\\\\srv\\share\\x", drive_type))
    assert asked == ["C:\\", "Z:\\", "Q:\\"]  # a UNC path needs no call


def test_no_macos_statfs_abi_on_this_c_library_unless_it_is_macos() -> None:
    # glibc has a statfs with another struct: it must never be read as macOS'.
    if sys.platform != "darwin":
        assert volumes.mac_statfs() is None
        assert volumes.check_volumes("fsevents", ["/"]) == "volume type unknown: statfs unavailable"


@pytest.mark.parametrize(("platform", "backend"), [("darwin", "fsevents"), ("win32", "rdcw")])
def test_choose_selects_the_native_backend_and_polls_network_volumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str, backend: str
) -> None:
    monkeypatch.setattr(sys, "platform", platform)
    found = choose.native_opener(tmp_path, [""], lambda key: True, None)
    assert found is not None and found[0] == backend
    monkeypatch.setattr(
        volumes, "check_volumes", lambda name, paths: f"{name}: smbfs: SMB share ({len(paths)})"
    )
    watcher = choose.open_watcher(tmp_path, [""], lambda key: True, None)
    try:
        assert isinstance(watcher, PollWatcher)
        assert watcher.reason == f"{backend}: smbfs: SMB share (1)"
    finally:
        watcher.close()
