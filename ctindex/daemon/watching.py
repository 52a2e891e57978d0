"""The daemon's watcher and mount table, kept registered with its selector.

The watcher's fd can change between reads (a lane switch) and the watcher is
replaced whole when the plan or the mount table changes; this module keeps
the selector's registrations current through all of that, so the loop
(ctindex/daemon/lifecycle.py) only ever sees selector keys "watcher" and
"mounts".
"""

from __future__ import annotations

import contextlib
import selectors
from collections.abc import Callable
from pathlib import Path

from ctindex.backends.base import Batch, Watcher, key_path
from ctindex.backends.mounts import MountTable
from ctindex.daemon.filewatch import FileWatches

WATCHER_KEY = "watcher"
MOUNTS_KEY = "mounts"


class WatchSlot:
    def __init__(
        self,
        sel: selectors.BaseSelector,
        root: Path,
        files: FileWatches,
        opener: Callable[[str], Watcher],
    ) -> None:
        self.sel = sel
        self.root = root
        self.files = files
        self.opener = opener  # cookie key -> a watcher of the current plan's roots
        self.current: Watcher | None = None
        self.mounts: MountTable | None = None
        self.cookie_key = ""
        self._fd: int | None = None

    @property
    def watcher(self) -> Watcher:
        assert self.current is not None, "watcher used before open"
        return self.current

    def open(self, cookie_key: str) -> None:
        """Open the watcher of the current plan, and a mount table over its
        roots and the cookie folder."""
        self.cookie_key = cookie_key
        # The table is read before the watcher classifies and watches, so a
        # mount made while it opens is a change the next check sees.
        table = MountTable()
        self.current = watcher = self.opener(cookie_key)
        self.files.reset()  # a new watcher holds no file watches: the next full pass adds them
        self._sync_fd()
        keys = [key_path(self.root, r) for r in watcher.roots]
        table.track([*keys, key_path(self.root, cookie_key)])
        old, self.mounts = self.mounts, table
        if old is not None:
            self._unregister(old.fileno())
            old.close()
        fd = table.fileno()
        if fd is not None:
            self.sel.register(fd, selectors.EVENT_READ, MOUNTS_KEY)

    def reopen(self) -> None:
        """Close the watcher and open it anew (classification and watches)."""
        self._unregister(self._fd)
        self._fd = None
        self.watcher.close()
        self.open(self.cookie_key)

    def read(self) -> Batch:
        batch = self.watcher.read(0.0)
        self._sync_fd()
        return batch

    def mounts_changed(self, reread: bool = False) -> bool:
        return self.mounts is not None and self.mounts.changed(reread)

    def polled(self) -> bool:
        """No fd to select on (the poll lane): the loop must read it itself."""
        return self.watcher.fileno() is None

    def close(self) -> None:
        if self.current is not None:
            with contextlib.suppress(Exception):
                self.current.close()
        if self.mounts is not None:
            self.mounts.close()

    def _sync_fd(self) -> None:
        """The watcher's fd can change (a lane switch): keep the selector current."""
        fd = self.watcher.fileno()
        if fd == self._fd:
            return
        self._unregister(self._fd)
        if fd is not None:
            self.sel.register(fd, selectors.EVENT_READ, WATCHER_KEY)
        self._fd = fd

    def _unregister(self, fd: int | None) -> None:
        if fd is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(fd)
