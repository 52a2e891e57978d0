"""Which operating-system primitives this process may use: the one place the
reconciler (and ctindex, which imports it) asks, so the simulated-platform
test mode can hide them (docs/decisions/portability.md).

Every answer is feature detection (does `os` offer it here?), never a guess
from the platform's name. ``CTINDEX_SIMULATE`` in the environment, a comma
separated list, hides primitives a Linux machine has but macOS or Windows do
not, so the portable fallbacks run under the whole test suite here:

* ``no-dir-fd``: no ``dir_fd`` opens, no ``O_DIRECTORY`` (Windows);
* ``no-peercred``: no ``SO_PEERCRED`` (macOS, the BSDs, Windows);
* ``no-mountinfo``: no ``/proc/self/mountinfo`` (macOS, Windows; read by
  ctindex/backends/platform_features.py, since ctindex/backends/ may not import this room);
* ``no-prctl``: no ``prctl(2)`` (macOS, Windows);
* ``no-sighup``: no ``SIGHUP`` (Windows);
* ``no-getuid``: no ``os.getuid`` (Windows).

The environment is read once per process (``reset()`` reads it again, for
tests that flip it), and it only ever removes primitives: a name this module
does not know is ignored rather than turned into a failure at import time.
"""

from __future__ import annotations

import os

SIMULATE_ENV = "CTINDEX_SIMULATE"
KNOWN = frozenset(
    ("no-dir-fd", "no-peercred", "no-mountinfo", "no-prctl", "no-sighup", "no-getuid")
)
_hidden: list[frozenset[str]] = []


def hidden() -> frozenset[str]:
    """The primitives the simulation hides (empty outside the test mode)."""
    if not _hidden:
        raw = os.environ.get(SIMULATE_ENV, "")
        _hidden.append(frozenset(w.strip() for w in raw.split(",")) & KNOWN)
    return _hidden[0]


def reset() -> None:
    _hidden.clear()


def has_dir_fd() -> bool:
    """Folders can be opened, listed and stat'ed relative to an open folder
    descriptor (POSIX openat/fdopendir/fstatat), with O_DIRECTORY."""
    return (
        "no-dir-fd" not in hidden()
        and hasattr(os, "O_DIRECTORY")
        and os.open in os.supports_dir_fd
        and os.stat in os.supports_dir_fd
        and os.scandir in os.supports_fd
    )


def can_open_folders() -> bool:
    """os.open accepts a folder (POSIX O_DIRECTORY), e.g. to fsync it after
    a rename; Windows cannot, and its renames need no folder fsync."""
    return "no-dir-fd" not in hidden() and hasattr(os, "O_DIRECTORY")


def has_peercred() -> bool:
    """The kernel reports a Unix socket peer's uid (Linux SO_PEERCRED)."""
    import _socket  # the C module: `socket` costs the query path ~3 ms (ctindex/ipc/protocol.py)

    return "no-peercred" not in hidden() and hasattr(_socket, "SO_PEERCRED")


def has_prctl() -> bool:
    """The C library offers prctl(2) (Linux: PR_SET_PDEATHSIG)."""
    if "no-prctl" in hidden():
        return False
    import ctypes

    try:
        return hasattr(ctypes.CDLL(None), "prctl")
    except (OSError, TypeError):  # TypeError: no "main program" library (Windows)
        return False


def has_sighup() -> bool:
    import signal

    return "no-sighup" not in hidden() and hasattr(signal, "SIGHUP")


def has_unix_sockets() -> bool:
    import _socket

    return hasattr(_socket, "AF_UNIX")


def has_getuid() -> bool:
    return "no-getuid" not in hidden() and hasattr(os, "getuid")
