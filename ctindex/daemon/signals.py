"""Signals and wake-ups for the one selector loop.

A signal handler may run between any two bytecodes; all it does here is note
the stop reason. Python writes the signal number to the wake-up socket
(signal.set_wakeup_fd), so a select() in progress returns at once instead of
sleeping until its timeout. The query worker thread wakes the loop through the
same socket (poke).

SIGINT and SIGTERM exist everywhere CPython runs; SIGHUP (the terminal went
away) is POSIX only. Asked by feature (ctindex/reconciler/platform_features.py,
so the ``no-sighup`` simulation applies), never by platform name. Windows
console control events take the same path through console_events.py.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable

from ctindex.reconciler.platform_features import has_sighup


def graceful_signals() -> tuple[int, ...]:
    """The stop signals this platform has."""
    found = [signal.SIGINT, signal.SIGTERM]
    if has_sighup():
        found.append(signal.SIGHUP)
    return tuple(found)


class SignalWake:
    def __init__(self, on_stop: Callable[[str], None]) -> None:
        self._on_stop = on_stop
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)

    @property
    def socket(self) -> socket.socket:
        """The end to register with the selector."""
        return self._read

    def install(self) -> None:
        signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        for signum in graceful_signals():
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        self._on_stop(f"signal {signal.Signals(signum).name}")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while self._read.recv(256):
                pass

    def poke(self) -> None:
        """Wake the loop from another thread."""
        with contextlib.suppress(OSError):
            self._write.send(b"q")

    def close(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)
        self._read.close()
        self._write.close()
