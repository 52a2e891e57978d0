"""How to start the daemon detached from the launching command (docs/daemon.md).

POSIX: a new session (``start_new_session``), so the terminal's hang-up and
Ctrl+C reach the command, not the daemon. Windows has no sessions: a new
process group (a Ctrl+C in the launching console is not delivered to it) and
CREATE_NO_WINDOW, so no console window flashes up; the daemon keeps a hidden
console of its own, which is what lets CTRL_CLOSE, CTRL_LOGOFF and
CTRL_SHUTDOWN reach its handler (ctindex/daemon/console_events.py), unlike
DETACHED_PROCESS, which would leave it no console at all.

By feature: the Windows flags exist in `subprocess` only where they apply.
"""

from __future__ import annotations

import subprocess
from typing import NamedTuple


class Detach(NamedTuple):
    """The two Popen arguments that detach a child here."""

    start_new_session: bool
    creationflags: int


def detach_options() -> Detach:
    no_window = getattr(subprocess, "CREATE_NO_WINDOW", None)
    new_group = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", None)
    if no_window is not None and new_group is not None:
        return Detach(start_new_session=False, creationflags=no_window | new_group)
    return Detach(start_new_session=True, creationflags=0)
