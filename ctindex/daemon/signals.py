"""The signals that ask the daemon to stop gracefully, where they exist.

SIGINT and SIGTERM exist everywhere CPython runs; SIGHUP (the terminal went
away) is POSIX only. Asked by feature (ctindex/reconciler/platform_features.py,
so the ``no-sighup`` simulation applies), never by platform name. Windows
console control events take the same path through console_events.py.
"""

from __future__ import annotations

import signal

from ctindex.reconciler.platform_features import has_sighup


def graceful_signals() -> tuple[int, ...]:
    found = [signal.SIGINT, signal.SIGTERM]
    if has_sighup():
        found.append(signal.SIGHUP)
    return tuple(found)
