"""Where the daemon's runtime files live, and how their folders are made safe.

Everything here is on the query path (the client computes the socket path on
every indexed search), so it imports only the standard library.

Layout (docs/daemon.md), all beneath the hard-excluded `.ct/okf/runtime/`:

    daemon.lock     portalocker lock held for the daemon's whole life
    spawn.claim     startup claim, created O_EXCL by the launching client
    spawn.failed    cached spawn failure (time, error, count) for back-off
    status.json     heartbeat + status record, replaced atomically
    daemon.sock     the IPC endpoint (or a short per-user fallback, below)
    daemon.log      lifecycle lines only, rotated at 32 KiB (.1, .2)
    cookies/c/      barrier cookies, nested two levels like git's fsmonitor so
                    creating one never changes the mtime of anything but `c`

Folders are 0700 and files 0600: the daemon sets umask 077, the client passes
explicit modes.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from ctindex.ipc.peer import owned_by_me, user_tag

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from ctindex.policy.project import Project

# sockaddr_un.sun_path includes the terminating NUL: 108 bytes on Linux,
# 104 on macOS and the BSDs (<sys/un.h>). An ABI size, not a feature Python
# exposes, so the platform decides (docs/decisions/portability.md).
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
# /tmp on POSIX; elsewhere (Windows) the per-user temporary folder.
FALLBACK_BASE = Path("/tmp") if os.name == "posix" else Path(os.environ.get("TEMP") or ".")


# RuntimePaths by (root, runtime folder), made once per project a process
# asks about: a long-lived reader (ctindex/api.py) asks on every query.
KEPT_MAX = 64
_KEPT: dict[tuple[object, object], RuntimePaths] = {}


class UnsafeRuntimeDir(OSError):
    """A runtime folder exists but is not safe to use (wrong owner, symlink, mode)."""


class RuntimePaths:
    """File names of one project's runtime folder (a plain class, not a
    dataclass: this module is imported by every indexed query)."""

    __slots__ = ("_files", "_socket", "dir", "root")

    def __init__(self, root: Path, runtime_dir: Path) -> None:
        self.root = root  # the project root (identity for the short-path hash)
        self.dir = runtime_dir  # .ct/okf/runtime
        self._socket: Path | None = None  # worked out once: every request asks for it
        self._files: dict[str, Path] = {}  # file names joined once: queries ask every time

    def __repr__(self) -> str:
        return f"RuntimePaths(root={self.root!r}, dir={self.dir!r})"

    @classmethod
    def for_project(cls, project: Project) -> RuntimePaths:
        """Paths for a ctindex.policy.project.Project (or anything with `.root`);
        the same object for the same folders while it is kept (`_KEPT`)."""
        runtime = getattr(project, "runtime_dir", None)
        key = (project.root, runtime)
        got = _KEPT.get(key)
        if got is None:
            root = Path(project.root)
            folder = Path(runtime) if runtime else root / ".ct" / "okf" / "runtime"
            if len(_KEPT) >= KEPT_MAX:
                _KEPT.clear()
            got = _KEPT[key] = cls(root, folder)
        return got

    def file(self, name: str) -> Path:
        """The runtime folder's file `name`."""
        got = self._files.get(name)
        if got is None:
            got = self._files[name] = self.dir / name
        return got

    @property
    def lock(self) -> Path:
        return self.file("daemon.lock")

    @property
    def claim(self) -> Path:
        return self.file("spawn.claim")

    @property
    def failed(self) -> Path:
        return self.file("spawn.failed")

    @property
    def status(self) -> Path:
        return self.file("status.json")

    @property
    def log(self) -> Path:
        return self.file("daemon.log")

    @property
    def cookies(self) -> Path:
        return self.dir / "cookies" / "c"

    @property
    def fallback_dir(self) -> Path:
        """Short per-user folder for what cannot live in `dir` (long socket
        paths, a spawn failure when `dir` itself is unwritable)."""
        import hashlib

        digest = hashlib.sha256(os.fsencode(self.root)).hexdigest()[:16]
        return FALLBACK_BASE / f"ctindex-{user_tag()}" / digest

    @property
    def fallback_failed(self) -> Path:
        return self.fallback_dir / "spawn.failed"

    @property
    def socket(self) -> Path:
        """The IPC endpoint: in `dir` when it fits in sun_path, else the fallback."""
        if self._socket is None:
            local = self.dir / "daemon.sock"
            fits = len(os.fsencode(local)) <= SUN_PATH_MAX
            self._socket = local if fits else self.fallback_dir / "daemon.sock"
        return self._socket

    @property
    def socket_is_fallback(self) -> bool:
        return self.socket != self.dir / "daemon.sock"


def ensure_private_dir(path: Path, *, within: Path | None = None) -> Path:
    """Create `path` (and parents) and make it a private 0700 folder.

    With `within`, every folder from `within` down to `path` is made private
    too (the runtime folder and its cookie subfolders); folders above are
    created with default modes (they belong to the index, not the daemon).
    A folder must be a real directory (not a symlink) owned by us. Raises
    OSError (errno set) so callers can tell EACCES/EROFS/ENOSPC apart.
    """
    levels = [path]
    if within is not None and path != within:
        rel = path.relative_to(within)
        levels = [within / Path(*rel.parts[:i]) for i in range(len(rel.parts) + 1)]
    for level in levels:
        _private_level(level)
    return path


STORE_FOLDERS = (".ct", "okf", "runtime")  # ctindex/policy/store_path.py NAMES


def store_link(root: str) -> bool:
    """True when a folder of the store path is a symbolic link (three
    lstats, no import: the query client runs it before it asks a daemon,
    and then leaves the search to the full CLI, which refuses it in its one
    line; nothing is written through such a folder here either)."""
    current = root
    for name in STORE_FOLDERS:
        current = os.path.join(current, name)
        try:
            st = os.lstat(current)
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode):
            return True
    return False


def ensure_runtime_dir(paths: RuntimePaths) -> Path:
    """The project's runtime folder, made private, every folder from the
    project root down to it opened without following a link and checked to
    be ours (ctindex/policy/store_path.py). A refused folder raises
    UnsafeRuntimeDir, like a runtime folder that is not safe itself."""
    if paths.dir == paths.root / ".ct" / "okf" / "runtime":
        from ctindex.errors import UnsafeStorePath
        from ctindex.policy.store_path import check_store

        try:
            check_store(paths.root, create=3)
        except UnsafeStorePath as exc:
            raise UnsafeRuntimeDir(errno.EPERM, str(exc), os.fspath(paths.dir)) from None
    return ensure_private_dir(paths.dir)


def _private_level(path: Path) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError as exc:  # the path is a file (or a dangling symlink)
        raise UnsafeRuntimeDir(errno.ENOTDIR, "not a folder", os.fspath(path)) from exc
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeRuntimeDir(errno.ENOTDIR, "not a real folder", os.fspath(path))
    if not owned_by_me(st):
        raise UnsafeRuntimeDir(errno.EPERM, "folder owned by another user", os.fspath(path))
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def ensure_fallback_dir(paths: RuntimePaths) -> Path:
    """The per-user short folder: /tmp/ctindex-<uid> must be ours and private
    (it is shared /tmp, so someone could have pre-created it to spy on us)."""
    return ensure_private_dir(paths.fallback_dir, within=paths.fallback_dir.parent)
