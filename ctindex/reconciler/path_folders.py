"""The walk's folder primitives where there is no ``dir_fd`` (Windows, or the
``no-dir-fd`` simulation: ctindex/reconciler/platform_features.py).

The POSIX walk opens every folder relative to its open parent with
O_DIRECTORY|O_NOFOLLOW, so a folder swapped for a symlink cannot lead it
outside the root. Without ``dir_fd`` the same guarantee is approximated by
path and identity (docs/decisions/portability.md):

* a folder "handle" is a small integer naming a registered (path, device,
  inode) triple; opening it lstat's the path first and refuses a symlink or
  reparse point (``os.stat(follow_symlinks=False)``, the
  FILE_FLAG_OPEN_REPARSE_POINT view on Windows) and anything not a folder;
* listing it lstat's the path again after the listing and discards the
  listing if the path no longer names the same folder (device and inode), so
  a swap during the listing is seen as the folder having vanished;
* a file is lstat'ed before it is opened (a symlink is refused, as
  O_NOFOLLOW would) and the open descriptor's fstat must show the same
  device and inode, so the bytes read are those of the file the walk saw;
* a name opened inside a folder handle (file or folder) is resolved through
  the folder's path, and lstat follows a symlink in any earlier component;
  so after resolving it the folder's path must still name the folder (one
  more lstat), or an ancestor swapped for a symlink would lead the lstat
  and the open alike to a same-named entry outside, which both checks
  above would accept;
* a swap and swap back between those checks (ABA) would still pass them,
  so where the system tells the path an open file really has (Linux's
  /proc/self/fd, macOS's F_GETPATH), that path must lie under the real
  path of the root the handles descend from: a file outside the root is
  closed unread whatever the timing.

What remains: on a system that does not tell an open file's path (Windows
here: GetFinalPathNameByHandle is not used yet) the ABA window stays. The
POSIX walk has no such window; the portability note says so.

Handles are process-wide (one registry), so FsOps built separately (tests
wrap one primitive and keep the others) agree on them.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat as stat_mod
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

# "Open as a folder" where O_DIRECTORY does not exist: a bit no os.open flag
# uses, stripped before any real open (only this module's open sees it).
WANT_DIR = getattr(os, "O_DIRECTORY", 0) or (1 << 30)
_REPARSE = getattr(stat_mod, "FILE_ATTRIBUTE_REPARSE_POINT", 0x400)


class Folder(NamedTuple):
    path: str
    dev: int
    ino: int
    root: str  # the real path of the root it descends from (opened by path)


_folders: dict[int, Folder] = {}
_ids = itertools.count(1 << 20)  # far above real descriptors: a mix-up fails loudly
_lock = threading.Lock()  # the parallel walk opens folders from worker threads


def _gone(path: str) -> OSError:
    return OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _is_link(st: os.stat_result) -> bool:
    return stat_mod.S_ISLNK(st.st_mode) or bool(getattr(st, "st_file_attributes", 0) & _REPARSE)


def _folder(handle: int) -> Folder:
    """The folder a handle names (EBADF for anything else, as a bad fd)."""
    folder = _folders.get(handle)
    if folder is None:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    return folder


def _check(folder: Folder) -> None:
    """Raise ENOENT unless `folder`'s path still names that folder."""
    st = os.lstat(folder.path)
    if _is_link(st) or (st.st_dev, st.st_ino) != (folder.dev, folder.ino):
        raise _gone(folder.path)


def _resolve(name: str, dir_fd: int | None) -> str:
    return name if dir_fd is None else os.path.join(_folder(dir_fd).path, name)


def _still_there(dir_fd: int | None) -> None:
    """Raise ENOENT unless the folder `dir_fd` names is still at its path."""
    if dir_fd is not None:
        _check(_folder(dir_fd))


def open_at(name: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
    """os.open's signature: a folder handle when flags has WANT_DIR, else a
    real descriptor on the regular file or folder `name` names."""
    path = _resolve(name, dir_fd)
    st = os.lstat(path)  # raises ENOENT and friends like the open would
    if _is_link(st):
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)  # O_NOFOLLOW
    if flags & WANT_DIR:
        if not stat_mod.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        _still_there(dir_fd)  # the lstat went through the parent, not a swapped-in link
        root = os.path.realpath(path) if dir_fd is None else _folder(dir_fd).root
        with _lock:
            handle = next(_ids)
            _folders[handle] = Folder(path, st.st_dev, st.st_ino, root)
        return handle
    fd = os.open(path, flags & ~WANT_DIR, mode)
    try:
        now = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):  # swapped between lstat and open
        os.close(fd)
        raise _gone(path)
    try:
        _still_there(dir_fd)  # and both went through the parent
        if dir_fd is not None and not _inside(fd, _folder(dir_fd).root):
            raise _gone(path)  # swapped out and back between the checks (ABA)
    except OSError:
        os.close(fd)
        raise
    return fd


def _inside(fd: int, root: str) -> bool:
    """False only when the system tells where `fd` really is, and it is not
    under `root` (True where it can not tell: see the module's note)."""
    real = final_path(fd)
    if real is None:
        return True
    top = root.rstrip(os.sep) + os.sep
    return real == root or real.startswith(top)


def tells_final_path() -> bool:
    """Whether `final_path` can answer on this system."""
    return sys.platform == "darwin" or (
        sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")
    )


def final_path(fd: int) -> str | None:
    """The path the system holds for the open descriptor `fd`, or None where
    it does not tell (or the lookup fails)."""
    try:
        if sys.platform.startswith("linux"):
            return os.readlink(f"/proc/self/fd/{fd}")
        if sys.platform == "darwin":
            import fcntl

            got = fcntl.fcntl(fd, _F_GETPATH, bytes(_MAXPATHLEN))
            return os.fsdecode(got.split(b"\0", 1)[0])
    except OSError:
        return None
    return None


_F_GETPATH = 50  # <sys/fcntl.h> on macOS
_MAXPATHLEN = 1024  # <sys/param.h> on macOS: F_GETPATH's buffer


def close(handle: int) -> None:
    with _lock:
        if _folders.pop(handle, None) is not None:
            return
    os.close(handle)  # a file descriptor open_at handed out


class Entry:
    """A listed name whose stat is a full os.lstat of its path.

    os.DirEntry.stat() on Windows leaves st_ino, st_dev and st_nlink zero
    (the listing does not carry them), and the walk's "unchanged" rule needs
    the full fingerprint (size, mtime_ns, ctime_ns, inode, device) and the
    link count, so entries of a path listing stat the path itself."""

    __slots__ = ("_lstat", "name", "path")

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self._lstat: os.stat_result | None = None

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        if follow_symlinks:
            return os.stat(self.path)
        if self._lstat is None:
            self._lstat = os.stat(self.path, follow_symlinks=False)
        return self._lstat

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        try:
            return stat_mod.S_ISDIR(self.stat(follow_symlinks=follow_symlinks).st_mode)
        except OSError:
            return False


@contextmanager
def scandir(handle: int) -> Iterator[Iterator[Entry]]:
    """List the folder `handle` names; the listing counts only if the path
    still names that folder afterwards."""
    folder = _folder(handle)
    with os.scandir(folder.path) as it:
        entries = [Entry(e.name, e.path) for e in it]
    _check(folder)
    yield iter(entries)


def lstat_at(name: str, *, dir_fd: int) -> os.stat_result:
    return os.stat(_resolve(name, dir_fd), follow_symlinks=False)


def open_count() -> int:
    """Folder handles not closed yet (tests check the walk leaks none)."""
    return len(_folders)
