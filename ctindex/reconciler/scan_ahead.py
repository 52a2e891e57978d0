"""The native folder scan of folders a walk will enter later, on one more thread.

A full walk with the native scan (ctindex/reconciler/walk.py `_scan_native`)
spends nearly all its time in C, listing folders and stat-ing files with
the GIL released: one thread keeps one core busy. `ScanAhead` scans some
of the folders the walk will enter later on a second thread, while the
walk itself stays one ordered pass: it opens every folder, in its own
order, so a failed open is reported where it always was, and it takes
each scan's result when it reaches that folder.

The walk enters a folder's sub-folders first to last; the thread takes the
last one offered and not yet begun, so the two work from opposite ends of
the same list and rarely want the same folder. A folder the walk reaches
before the thread began it is taken back and scanned by the walk itself:
neither waits for work the other has not started.

Only what the C scan does runs on the thread: it reads the open folder and
marks the table's unchanged entries in the walk's `seen` bytes (an entry
belongs to one folder, so the two threads never mark the same byte).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ctindex.reconciler.native import NativeTable, encode_key

# Folders opened for the thread ahead of the walk, at most (descriptors held).
WINDOW = 64
# Scanning ahead is on unless set to False (tests compare both walks).
ENABLED = True

# What Table.scan returns: (entries, trusted, symlinks, other, pending).
ScanResult = tuple[int, int, int, int, list[tuple[str, int]]]
OpenDir = Callable[[str, int], int]  # (name, parent descriptor) -> descriptor
Closer = Callable[[int], None]

_TODO, _RUNNING, _DONE = range(3)


class Ahead:
    """A folder opened ahead of the walk: its descriptor, or why it could
    not be opened; once taken, its scan's result or error (both None: the
    walk scans it itself)."""

    __slots__ = ("error", "fd", "result", "state")

    def __init__(self, fd: int | None, error: OSError | None) -> None:
        self.fd = fd
        self.error = error
        self.result: ScanResult | None = None
        self.state = _TODO if fd is not None else _DONE


class ScanAhead:
    """Scans ahead of one walk; `close()` it when the walk ends."""

    def __init__(
        self,
        table: NativeTable,
        seen: bytearray,
        granularity_ns: int,
        open_dir: OpenDir,
        closer: Closer,
    ) -> None:
        self._table = table
        self._seen = seen
        self._gran = granularity_ns
        self._open_dir = open_dir
        self._close = closer
        self._cv = threading.Condition()
        self._ahead: dict[str, Ahead] = {}
        self._todo: list[str] = []  # offered, not begun: the thread takes the last
        self._thread: threading.Thread | None = None
        self._closing = False

    def offer(self, parent_fd: int, children: list[tuple[str, str]]) -> None:
        """Open `children` ((name, key) in the order the walk will enter
        them) while the window has room, and queue their scans."""
        for name, key in children:
            if len(self._ahead) >= WINDOW:
                break
            if key in self._ahead:
                continue
            try:
                fd = self._open_dir(name, parent_fd)
            except OSError as exc:
                self._ahead[key] = Ahead(None, exc)
                continue
            with self._cv:
                self._ahead[key] = Ahead(fd, None)
                self._todo.append(key)
                self._cv.notify()
        if self._todo and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ctindex-scan", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._todo and not self._closing:
                    self._cv.wait()
                if self._closing:
                    return
                key = self._todo.pop()
                got = self._ahead[key]
                got.state = _RUNNING
            assert got.fd is not None
            try:
                got.result = self._table.scan(got.fd, encode_key(key), self._seen, self._gran)
            except OSError as exc:
                got.error = exc
            with self._cv:
                got.state = _DONE
                self._cv.notify_all()

    def take(self, key: str) -> Ahead | None:
        """The folder `key` opened ahead, its scan done or taken back (then
        `result` and `error` are None), or None when it was not offered."""
        with self._cv:
            got = self._ahead.pop(key, None)
            if got is None:
                return None
            if got.state == _TODO:
                self._todo.remove(key)
                got.state = _DONE
            while got.state != _DONE:
                self._cv.wait()
        return got

    def close(self) -> None:
        """End the thread (after the scan it is running: none is left running,
        and a rebuild forks next) and close what the walk never took."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for got in self._ahead.values():
            if got.fd is not None:
                self._close(got.fd)
        self._ahead.clear()
        self._todo.clear()
