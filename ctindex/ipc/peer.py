"""Who is at the other end of the daemon's socket, and who we are.

The daemon serves only the user who owns it: the peer's uid as the kernel
recorded it at connect time (Linux SO_PEERCRED, getpeereid(3) on macOS and
the BSDs). Without either check the daemon is disabled (docs/daemon.md).
On the query path: standard library only, ctypes only where it is needed.
"""

from __future__ import annotations

# The C socket type, not the `socket` module (enums + selectors, ~3 ms the
# query path would pay for nothing): the type and its constants are the same.
import _socket
import errno
import os
import struct

from ctindex.reconciler import platform_features as features

# typing.TYPE_CHECKING without importing `typing` (~2 ms of every `ctindex`
# process, ctindex/fast_entry.py); type checkers treat the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

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
