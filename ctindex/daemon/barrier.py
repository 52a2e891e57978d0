"""Barrier cookies: one file per waiting request, and the waiters themselves.

A cookie is created in the watched cookie folder; when its name comes back
through the same watcher, every event queued before it has been read
(Watchman's CookieSync, git's fsmonitor). This module only keeps the books;
the lifecycle loop decides what to apply and answers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ctindex.daemon.server import Connection
from ctindex.daemon.singleton import repair_folder, touch

BARRIER_SHARE = 0.8  # answer within this share of the client's budget


@dataclass
class Waiter:
    conn: Connection
    started: float
    deadline: float
    seen: bool = False


class Cookies:
    def __init__(self, folder: Path, runtime_dir: Path, instance: str) -> None:
        self.folder = folder
        self.runtime_dir = runtime_dir
        self.instance = instance
        self.waiters: dict[str, Waiter] = {}
        self._seq = 0

    def __bool__(self) -> bool:
        return bool(self.waiters)

    def create(
        self, conn: Connection, now: float, budget: float, before_retry: Callable[[], object]
    ) -> Waiter:
        """Write a new cookie and register its waiter; raises OSError.

        A removed or replaced cookie folder is repaired once, calling
        `before_retry` (a watcher read, so the folder is watched again before
        the cookie appears in it)."""
        self._seq += 1
        name = f"{self.instance}-{self._seq}"
        try:
            touch(self.folder / name)
        except (FileNotFoundError, NotADirectoryError):
            repair_folder(self.folder, self.runtime_dir)
            before_retry()
            touch(self.folder / name)
        waiter = Waiter(conn, now, now + budget * BARRIER_SHARE)
        self.waiters[name] = waiter
        return waiter

    def seen(self, names: Iterable[str]) -> None:
        """Cookies reported by the watcher: mark their waiters, delete the files
        (ours or a previous instance's)."""
        for name in names:
            waiter = self.waiters.get(name)
            if waiter is not None:
                waiter.seen = True
            self._remove(name)

    def all_seen(self) -> None:
        """Count every waiting cookie as seen (the caller guarantees a full
        pass starts before they are answered, which covers their requests)."""
        for name in list(self.waiters):
            self.seen([name])

    def expired(self, now: float) -> list[Waiter]:
        """Waiters whose cookie did not come back in time (removed here)."""
        late = [n for n, w in self.waiters.items() if not w.seen and w.deadline <= now]
        for name in late:
            self._remove(name)
        return [self.waiters.pop(n) for n in late]

    def ready(self) -> list[Waiter]:
        """Waiters whose cookie was seen (removed here)."""
        names = [n for n, w in self.waiters.items() if w.seen]
        return [self.waiters.pop(n) for n in names]

    def drain(self) -> list[Waiter]:
        """Every waiter (shutdown)."""
        waiters = list(self.waiters.values())
        self.waiters.clear()
        return waiters

    def deadline(self) -> float | None:
        return min((w.deadline for w in self.waiters.values()), default=None)

    def _remove(self, name: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.folder / name)
