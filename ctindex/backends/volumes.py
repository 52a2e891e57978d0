"""Is a watched folder on a network volume? macOS and Windows (Linux reads its
mount table: ctindex/backends/mounts.py).

Network volumes get the poll lane, never native events: FSEvents and
ReadDirectoryChangesW report only what this machine did to an SMB, NFS, AFP
or WebDAV volume, so a change made by another client would go unseen and an
answer could be labelled watcher-clean while stale.

* macOS: statfs(2). A volume is local only if ``f_flags`` has MNT_LOCAL and
  its ``f_fstypename`` is not a known network type (a FUSE or third-party
  filesystem may set MNT_LOCAL without deserving it). The struct is the
  64-bit-inode ``struct statfs`` of <sys/mount.h> (tests/ctindex/backends/
  test_volumes.py checks its layout against the documented offsets).
* Windows: a UNC path (``\\\\server\\share``, ``\\\\?\\UNC\\...``) is remote;
  otherwise GetDriveTypeW on the path's root, DRIVE_REMOTE (4) is remote and
  DRIVE_UNKNOWN / DRIVE_NO_ROOT_DIR are not trusted either.

The C calls are found by feature (the symbol exists in the loaded library);
only the struct layout is the platform's, so macOS' statfs is used only
where the C library also has getattrlist (macOS-only), never glibc's
different ``struct statfs``.
"""

from __future__ import annotations

import ctypes
import ntpath
import os
from collections.abc import Callable, Iterable
from typing import NamedTuple

MNT_LOCAL = 0x00001000  # <sys/mount.h>
MFSTYPENAMELEN = 16
MAXPATHLEN = 1024
# f_fstypename values of network filesystems macOS ships (mount_smbfs(8),
# mount_nfs(8), mount_afp(8), mount_webdav(8)) and common FUSE ones.
MAC_REMOTE = {
    "smbfs": "SMB share",
    "nfs": "NFS",
    "afpfs": "AFP share",
    "webdav": "WebDAV",
    "cifs": "SMB share",
    "macfuse": "FUSE filesystem",
    "osxfuse": "FUSE filesystem",
    "fuse-t": "FUSE filesystem",
}
DRIVE_UNKNOWN, DRIVE_NO_ROOT_DIR, DRIVE_REMOTE = 0, 1, 4  # GetDriveTypeW (fileapi.h)


class MacStatfs(ctypes.Structure):
    """struct statfs with 64-bit inodes (macOS 10.6+, the only one on arm64)."""

    _fields_ = [
        ("f_bsize", ctypes.c_uint32),
        ("f_iosize", ctypes.c_int32),
        ("f_blocks", ctypes.c_uint64),
        ("f_bfree", ctypes.c_uint64),
        ("f_bavail", ctypes.c_uint64),
        ("f_files", ctypes.c_uint64),
        ("f_ffree", ctypes.c_uint64),
        ("f_fsid", ctypes.c_int32 * 2),
        ("f_owner", ctypes.c_uint32),
        ("f_type", ctypes.c_uint32),
        ("f_flags", ctypes.c_uint32),
        ("f_fssubtype", ctypes.c_uint32),
        ("f_fstypename", ctypes.c_char * MFSTYPENAMELEN),
        ("f_mntonname", ctypes.c_char * MAXPATHLEN),
        ("f_mntfromname", ctypes.c_char * MAXPATHLEN),
        ("f_flags_ext", ctypes.c_uint32),
        ("f_reserved", ctypes.c_uint32 * 7),
    ]


class Volume(NamedTuple):
    """What statfs says about the volume holding a path."""

    fstype: str
    flags: int
    mount_point: str


def mac_reason(volume: Volume) -> str | None:
    """None when native events can be trusted on `volume`, else why not."""
    kind = MAC_REMOTE.get(volume.fstype)
    if kind is not None:
        return f"{volume.fstype}: {kind}, no reliable events ({volume.mount_point})"
    if not volume.flags & MNT_LOCAL:
        return (
            f"{volume.fstype or '?'}: not a local volume, no reliable events ({volume.mount_point})"
        )
    return None


def is_unc(path: str) -> bool:
    r"""\\server\share\..., //server/share, \\?\UNC\server\share: remote by
    name. \\?\C:\... and \\.\... name local devices."""
    p = path.replace("/", "\\")
    if p.upper().startswith("\\\\?\\UNC\\"):
        return True
    if p.startswith(("\\\\?\\", "\\\\.\\")):
        return False
    return p.startswith("\\\\")


def windows_reason(path: str, drive_type: Callable[[str], int]) -> str | None:
    if is_unc(path):
        return f"{path}: network share (UNC path), no reliable events"
    drive, _ = ntpath.splitdrive(path)
    if not drive:
        return f"{path}: no drive letter, events not trusted"
    kind = drive_type(drive + "\\")
    if kind == DRIVE_REMOTE:
        return f"{drive}: network drive, no reliable events"
    if kind in (DRIVE_UNKNOWN, DRIVE_NO_ROOT_DIR):
        return f"{drive}: unknown drive type, events not trusted"
    return None


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except (OSError, TypeError):  # TypeError: no "main program" library (Windows)
        return None


def mac_statfs() -> Callable[[str], Volume] | None:
    """statfs(2) with the macOS struct, or None where that is not the ABI."""
    libc = _libc()
    if libc is None or not hasattr(libc, "getattrlist"):  # getattrlist: macOS only
        return None
    fn = getattr(libc, "statfs$INODE64", None) or getattr(libc, "statfs", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(MacStatfs)]
    fn.restype = ctypes.c_int

    def statfs(path: str) -> Volume:
        buf = MacStatfs()
        if fn(os.fsencode(path), ctypes.byref(buf)) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return Volume(os.fsdecode(buf.f_fstypename), buf.f_flags, os.fsdecode(buf.f_mntonname))

    return statfs


def windows_drive_type() -> Callable[[str], int] | None:
    windll = getattr(ctypes, "windll", None)
    if windll is None:
        return None
    fn = windll.kernel32.GetDriveTypeW
    fn.argtypes = [ctypes.c_wchar_p]
    fn.restype = ctypes.c_uint
    return lambda root: int(fn(root))


def check_volumes(backend: str, paths: Iterable[str]) -> str | None:
    """None when every path is on a volume whose native events `backend`
    ("fsevents", "rdcw") can trust, else the first reason to poll. A volume
    that cannot be classified is not trusted."""
    if backend == "fsevents":
        statfs = mac_statfs()
        if statfs is None:
            return "volume type unknown: statfs unavailable"
        for path in paths:
            try:
                why = mac_reason(statfs(path))
            except OSError as e:
                return f"{path}: statfs failed: {e.strerror or e}"
            if why:
                return why
        return None
    if backend == "rdcw":
        drive_type = windows_drive_type()
        if drive_type is None:
            return "volume type unknown: GetDriveTypeW unavailable"
        for path in paths:
            why = windows_reason(os.path.abspath(path), drive_type)
            if why:
                return why
        return None
    return None
