"""daemon.log: lifecycle lines only.

Start, stop reason and exceptional-exit detail; never query text, file
content or per-event activity. Rotation at 32 KiB keeping two older files is
exactly what the standard library's RotatingFileHandler does, so it is used
rather than re-implemented.
"""

from __future__ import annotations

import contextlib
import io
import logging
import logging.handlers
import os
import time
from pathlib import Path

from ctindex.base.statefile import UnsafeFile, open_regular

MAX_BYTES = 32 * 1024
BACKUPS = 2


class LifecycleLog:
    def __init__(self, path: Path, prefix: str = "") -> None:
        self._logger = logging.getLogger(f"ctindex.daemon.{path}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = _RegularFileHandler(
            path,
            maxBytes=MAX_BYTES,
            backupCount=BACKUPS,
            encoding="utf-8",
            errors="backslashreplace",  # an undecodable byte in a path must not drop the line
            delay=True,
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)
        self._prefix = prefix

    def line(self, event: str, **fields: object) -> None:
        """One line: UTC time, prefix (pid/instance), event, key=value fields."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        extra = " ".join(f"{k}={_clean(v)}" for k, v in fields.items())
        self._logger.info(" ".join(p for p in (stamp, self._prefix, event, extra) if p))

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()


class _RegularFileHandler(logging.handlers.RotatingFileHandler):
    """RotatingFileHandler whose (re)open never blocks or follows a symlink:
    a FIFO in daemon.log's place would otherwise hang the daemon at its
    first log line. The runtime folder is the daemon's own, so whatever is
    not a regular file there is removed and a fresh log started."""

    def _open(self) -> io.TextIOWrapper:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            fd = open_regular(self.baseFilename, flags)
        except UnsafeFile:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.baseFilename)
            fd = open_regular(self.baseFilename, flags | os.O_EXCL)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def _clean(value: object) -> str:
    """Single-line, bounded field value (exception text can be long or multi-line)."""
    text = str(value).replace("\n", " ").replace("\r", " ")
    return text if len(text) <= 300 else text[:297] + "..."
