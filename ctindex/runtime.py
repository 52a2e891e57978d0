"""Where the daemon's runtime files live, and how they are created safely.

Everything here is on the query path (the client computes the socket path on
every indexed search), so it imports only the standard library.

Layout (spec §8, docs/daemon.md), all beneath the hard-excluded `.ct/okf/runtime/`:

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

# The C socket type, not the `socket` module (enums + selectors, ~3 ms the
# query path would pay for nothing): the type and its constants are the same.
import _socket
import contextlib
import errno
import json
import os
import stat
import struct
import sys
from pathlib import Path

from ctindex.reconciler import platform_features as features

# typing.TYPE_CHECKING without importing `typing` (~2 ms of every `ctindex`
# process, ctindex/fast_entry.py); type checkers treat the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ctindex.policy.project import Project

# sockaddr_un.sun_path includes the terminating NUL: 108 bytes on Linux,
# 104 on macOS and the BSDs (<sys/un.h>). An ABI size, not a feature Python
# exposes, so the platform decides (docs/decisions/portability.md).
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
# /tmp on POSIX; elsewhere (Windows) the per-user temporary folder.
FALLBACK_BASE = Path("/tmp") if os.name == "posix" else Path(os.environ.get("TEMP") or ".")
UCRED = struct.Struct("3i")  # Linux struct ucred: pid, uid, gid


def no_peer_check() -> str | None:
    """Why this platform cannot tell who is at the other end of the daemon's
    socket, or None when it can (docs/decisions/portability.md). Without that
    check the daemon is disabled: it refuses to start and clients answer by
    reconciling themselves ("fallback (daemon disabled: ...)")."""
    if not features.has_unix_sockets():
        return "daemon disabled: no Unix sockets on this platform"
    if not features.has_getuid():
        return "daemon disabled: no user ids on this platform"
    if features.has_peercred() or _getpeereid() is not None:
        return None
    return "daemon disabled: no peer credential check on this platform (SO_PEERCRED, getpeereid)"


def _getpeereid() -> Callable[..., int] | None:
    """The C library's getpeereid(3) (macOS, the BSDs), or None (glibc has none)."""
    if _peereid:
        return _peereid[0]
    import ctypes

    try:
        found = getattr(ctypes.CDLL(None, use_errno=True), "getpeereid", None)
    except (OSError, TypeError):  # TypeError: no "main program" library (Windows)
        found = None
    if found is not None:
        uid_t = ctypes.c_uint32  # uid_t and gid_t are 32-bit unsigned on macOS and the BSDs
        found.argtypes = [ctypes.c_int, ctypes.POINTER(uid_t), ctypes.POINTER(uid_t)]
        found.restype = ctypes.c_int
    _peereid.append(found)
    return found


_peereid: list[Callable[..., int] | None] = []


def peer_uid(sock: _socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, as the kernel
    recorded it at connect time: Linux SO_PEERCRED, else getpeereid(3)
    (LOCAL_PEERCRED underneath on macOS). Raises OSError, also when the
    platform has neither (no_peer_check() says so first)."""
    if features.has_peercred():
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, UCRED.size)
        uid: int = UCRED.unpack(raw)[1]
        return uid
    getpeereid = _getpeereid()
    if getpeereid is None:
        raise OSError(errno.EOPNOTSUPP, "no peer credential check on this platform")
    import ctypes

    got_uid, got_gid = ctypes.c_uint32(), ctypes.c_uint32()
    if getpeereid(sock.fileno(), ctypes.byref(got_uid), ctypes.byref(got_gid)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return got_uid.value


def peer_is_owner(sock: _socket.socket) -> bool:
    """The peer runs as this user (False when that cannot be proven)."""
    try:
        return peer_uid(sock) == os.getuid()
    except (OSError, AttributeError):  # AttributeError: no os.getuid (Windows)
        return False


def user_tag() -> str:
    """This user's name for shared folders (/tmp/ctindex-<tag>): the uid where
    there are uids, else the login name (Windows, whose temporary folder is
    per user already)."""
    if features.has_getuid():
        return str(os.getuid())
    import getpass

    name = getpass.getuser()
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "user"


def owned_by_me(st: os.stat_result) -> bool:
    """The file's owner is this user; without uids (Windows reports st_uid 0)
    ownership is the per-user temporary folder's ACL, not ours to check."""
    if not features.has_getuid():
        return True
    return st.st_uid == os.getuid()


class UnsafeRuntimeDir(OSError):
    """A runtime folder exists but is not safe to use (wrong owner, symlink, mode)."""


class RuntimePaths:
    """File names of one project's runtime folder (a plain class, not a
    dataclass: this module is imported by every indexed query)."""

    __slots__ = ("dir", "root")

    def __init__(self, root: Path, runtime_dir: Path) -> None:
        self.root = root  # the project root (identity for the short-path hash)
        self.dir = runtime_dir  # .ct/okf/runtime

    def __repr__(self) -> str:
        return f"RuntimePaths(root={self.root!r}, dir={self.dir!r})"

    @classmethod
    def for_project(cls, project: Project) -> RuntimePaths:
        """Paths for a ctindex.policy.project.Project (or anything with `.root`)."""
        root = Path(project.root)
        runtime = getattr(project, "runtime_dir", None)
        return cls(root, Path(runtime) if runtime else root / ".ct" / "okf" / "runtime")

    @property
    def lock(self) -> Path:
        return self.dir / "daemon.lock"

    @property
    def claim(self) -> Path:
        return self.dir / "spawn.claim"

    @property
    def failed(self) -> Path:
        return self.dir / "spawn.failed"

    @property
    def status(self) -> Path:
        return self.dir / "status.json"

    @property
    def log(self) -> Path:
        return self.dir / "daemon.log"

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
        local = self.dir / "daemon.sock"
        if len(os.fsencode(local)) <= SUN_PATH_MAX:
            return local
        return self.fallback_dir / "daemon.sock"

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


def write_atomic(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Replace `path` with `data` via a 0600 temp sibling and rename, so a
    reader sees the old or the new record, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: Path, record: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(record, sort_keys=True) + "\n").encode())


def read_json(path: Path, limit: int = 1 << 20) -> dict[str, Any] | None:
    """A JSON object from `path`, or None when missing, unreadable or corrupt
    (runtime files are hints: a bad one is treated as absent, never trusted).
    A FIFO, device or symlink in its place is absent too: it is never opened
    in a way that could block or follow it (ctindex/base/statefile.py)."""
    from ctindex.base.statefile import read_bounded

    try:
        value = json.loads(read_bounded(path, limit))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# -- spawn-failure cache (spec §8: a failed spawn is cached where possible) --

BACKOFF_FIRST_S = 60.0
BACKOFF_MAX_S = 3600.0
# A cached "failure" that is a daemon's own stop (memory-limit) rather than a
# failed spawn: the freshness reason names it as it is (client.spawn).
STOPPED_PREFIX = "daemon stopped: "


def record_spawn_failure(paths: RuntimePaths, error: str, now: float | None = None) -> bool:
    """Remember a failed spawn so later commands back off (60 s doubling to an
    hour). Written in the runtime folder, or, when that is what failed, in the
    per-user fallback folder. False when neither can be written."""
    import time

    now = time.time() if now is None else now
    previous = _read_failure(paths)
    count = int(previous.get("count", 0)) + 1 if previous else 1
    window = min(BACKOFF_FIRST_S * 2 ** (count - 1), BACKOFF_MAX_S)
    record = {"time": now, "error": error, "count": count, "retry_after": now + window}
    # Never through a linked store folder (the failure may be that refusal).
    with contextlib.suppress(OSError):
        if not store_link(os.fspath(paths.root)):
            write_json(paths.failed, record)
            return True
    with contextlib.suppress(OSError):
        ensure_fallback_dir(paths)
        write_json(paths.fallback_failed, record)
        return True
    return False


def spawn_failure(paths: RuntimePaths, now: float | None = None) -> dict[str, Any] | None:
    """The cached failure while its back-off window is open, else None."""
    import time

    now = time.time() if now is None else now
    record = _read_failure(paths)
    if record is None:
        return None
    retry_after = record.get("retry_after")
    if not isinstance(retry_after, (int, float)) or now >= retry_after:
        return None
    return record


def clear_spawn_failure(paths: RuntimePaths) -> None:
    for path in (paths.failed, paths.fallback_failed):
        with contextlib.suppress(OSError):
            os.unlink(path)


def _read_failure(paths: RuntimePaths) -> dict[str, Any] | None:
    """The newest of the two possible records (a corrupt one counts as absent)."""
    found = [
        r
        for r in (read_json(paths.failed), read_json(paths.fallback_failed))
        if r is not None and isinstance(r.get("time"), (int, float))
    ]
    return max(found, key=lambda r: r["time"]) if found else None


# -- build identity (docs/daemon.md "Build identity") --
#
# A daemon must serve only clients running the same code (spec §7: never
# treat an unacknowledged cache as clean; an older build's daemon would vouch
# for an index under its own plan and provider). The id is a digest of the
# *content* of every module of the three packages, so two installs of
# identical code (two venvs) are one build, and an editable install whose
# code changed is another. Hashing ~450 KB costs a few ms (hashlib's import
# alone ~5 ms), too much for every search, so the digest is cached in the
# per-user folder against each module's full stat fingerprint (size,
# mtime_ns, ctime_ns, inode, device: never mtime alone) and computed at most
# once per process.

# The code folders below package_base(): a wheel has everything inside ctindex/
# (and a reconciler/ beside it there would be some other distribution's);
# an editable install maps ctindex.reconciler and ctindex.backends to the
# repository's top-level folders (pyproject.toml).
WHEEL_PACKAGES = ("ctindex",)
SOURCE_PACKAGES = ("ctindex", "reconciler", "backends")
_CODE_SUFFIXES = (".py", ".so", ".pyd")  # sources and native extension modules
BUILD_CACHE_NAME = "build-ids.json"
BUILD_CACHE_KEEP = 8  # package folders remembered (venvs, checkouts)
BUILD_RACY_NS = 2_000_000_000  # a module changed this recently may change again unseen
_build_id: str | None = None


def package_base() -> Path:
    """The folder holding the package's code: the repository for an editable
    install (ctindex/, reconciler/, backends/ side by side), site-packages for
    a wheel (ctindex/ with ctindex/reconciler/ and ctindex/backends/ inside);
    the walk below covers both."""
    return Path(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _code_files(base: Path) -> list[tuple[str, os.stat_result]]:
    """(relative name, lstat) of every code file of the packages, sorted."""
    found: list[tuple[str, os.stat_result]] = []
    nested = os.path.isdir(base / "ctindex" / "reconciler")
    for package in WHEEL_PACKAGES if nested else SOURCE_PACKAGES:
        stack = [package]
        while stack:
            rel = stack.pop()
            try:
                with os.scandir(base / rel) as it:
                    entries = list(it)
            except OSError:
                continue  # a package that is not there is part of the identity too
            for entry in entries:
                name = f"{rel}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__" and not entry.name.startswith("."):
                        stack.append(name)
                elif entry.name.endswith(_CODE_SUFFIXES):
                    with contextlib.suppress(OSError):
                        found.append((name, entry.stat(follow_symlinks=False)))
    found.sort(key=lambda item: item[0])
    return found


def compute_build_id(base: Path) -> str:
    """Digest of the names and contents of the packages' code below `base`
    (uncached: reads every file)."""
    import hashlib  # only on a cache miss

    digest = hashlib.sha256()
    for name, _st in _code_files(base):
        try:
            with open(base / name, "rb") as fh:
                data = fh.read()
        except OSError:
            data = b"\0unreadable"
        digest.update(
            b"%d:%s\0%d:" % (len(name), name.encode("utf-8", "surrogateescape"), len(data))
        )
        digest.update(data)
    return digest.hexdigest()[:32]


def _is_private(folder: Path) -> bool:
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and owned_by_me(st) and not st.st_mode & 0o077


def _fingerprints(files: list[tuple[str, os.stat_result]]) -> list[list[Any]]:
    return [
        [name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        for name, st in files
    ]


def build_id() -> str:
    """This process's build id (computed once; see compute_build_id)."""
    global _build_id
    if _build_id is None:
        _build_id = _cached_build_id(package_base())
    return _build_id


def _cached_build_id(base: Path) -> str:
    import time

    files = _code_files(base)
    prints = _fingerprints(files)
    cache = FALLBACK_BASE / f"ctindex-{user_tag()}" / BUILD_CACHE_NAME
    # Shared /tmp: trust the record only in a private folder of ours.
    records = (read_json(cache) if _is_private(cache.parent) else None) or {}
    entries = records.get("bases")
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    where = os.fspath(base)
    for entry in entries:
        if (
            entry.get("base") == where
            and entry.get("files") == prints
            and isinstance(entry.get("id"), str)
        ):
            return str(entry["id"])
    found = compute_build_id(base)
    newest = max((max(p[2], p[3]) for p in prints), default=0)
    if newest > time.time_ns() - BUILD_RACY_NS:
        return found  # racily clean: an edit now could keep these fingerprints
    kept = [e for e in entries if e.get("base") != where][: BUILD_CACHE_KEEP - 1]
    with contextlib.suppress(OSError):
        ensure_private_dir(cache.parent)
        write_json(cache, {"bases": [{"base": where, "files": prints, "id": found}, *kept]})
    return found
