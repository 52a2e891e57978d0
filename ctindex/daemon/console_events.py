"""Windows console control events take the daemon's graceful path.

Windows delivers no SIGTERM or SIGHUP: a closed console window, a logoff or a
shutdown arrives as a console control event, on a thread the system creates,
through the routine SetConsoleCtrlHandler registered (consoleapi.h;
learn.microsoft.com "HandlerRoutine callback function"). For CTRL_CLOSE,
CTRL_LOGOFF and CTRL_SHUTDOWN the system ends the process as soon as the
routine returns (or after its timeout, 5 s for CTRL_CLOSE by default), so the
routine asks the loop to stop and then waits, bounded, until the daemon says
its shutdown (status record, lock release) is done.

Found by feature: where ctypes has no ``windll`` (every POSIX system) there is
nothing to install and POSIX signals (signals.py) are the path.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

# Event codes (wincon.h / consoleapi.h).
CTRL_C_EVENT = 0
CTRL_BREAK_EVENT = 1
CTRL_CLOSE_EVENT = 2
CTRL_LOGOFF_EVENT = 5
CTRL_SHUTDOWN_EVENT = 6
EVENT_NAMES = {
    CTRL_C_EVENT: "CTRL_C",
    CTRL_BREAK_EVENT: "CTRL_BREAK",
    CTRL_CLOSE_EVENT: "CTRL_CLOSE",
    CTRL_LOGOFF_EVENT: "CTRL_LOGOFF",
    CTRL_SHUTDOWN_EVENT: "CTRL_SHUTDOWN",
}
# The process ends when the routine returns for these: wait for the shutdown.
ENDS_PROCESS = frozenset((CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT))
# Below CTRL_CLOSE's default 5 s: returning on our own beats being cut off.
SHUTDOWN_WAIT_S = 4.0


class ConsoleEvents:
    """The handler routine's logic, testable anywhere; install() registers it."""

    def __init__(self, request_stop: Callable[[str], None], wake: Callable[[], None]) -> None:
        self._request_stop = request_stop
        self._wake = wake
        self._finished = threading.Event()
        self._routine: object | None = None  # the ctypes callback, kept alive while registered
        self.installed = False

    def handle(self, event: int) -> bool:
        """The HandlerRoutine: True (handled) for the five events, else False
        so the next handler (the default one) sees it."""
        name = EVENT_NAMES.get(event)
        if name is None:
            return False
        self._request_stop(f"console {name}")
        self._wake()
        if event in ENDS_PROCESS:
            self._finished.wait(SHUTDOWN_WAIT_S)
        return True

    def finished(self) -> None:
        """The daemon's shutdown is complete: a waiting routine may return."""
        self._finished.set()

    def install(self) -> bool:
        """Register with SetConsoleCtrlHandler; False where there is none."""
        windll = getattr(ctypes, "windll", None)
        winfunctype = getattr(ctypes, "WINFUNCTYPE", None)
        if windll is None or winfunctype is None:
            return False
        routine_type = winfunctype(ctypes.c_int, ctypes.c_uint32)  # BOOL (DWORD)
        routine = routine_type(lambda event: 1 if self.handle(int(event)) else 0)
        register = windll.kernel32.SetConsoleCtrlHandler
        register.argtypes = [routine_type, ctypes.c_int]
        register.restype = ctypes.c_int
        if not register(routine, 1):
            return False
        self._routine = routine
        self.installed = True
        return True
