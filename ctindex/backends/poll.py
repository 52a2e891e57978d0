"""The poll lane: no kernel events, so every report is "reconcile the roots".

Used for filesystems without reliable events (NFS, SMB, FUSE, ...) and while
a native backend is degraded. It still answers barriers: a new cookie file in
the cookie folder is reported like a native backend would, together with a
rescan of every root, so a barrier on this lane always means a full reconcile.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ctindex.backends.base import Batch, key_path, normalize_roots

COOKIE_CHECK_S = 0.05  # how often a waiting read() lists the cookie folder


class PollWatcher:
    name = "poll"

    def __init__(
        self,
        base: Path | str,
        roots: Sequence[str],
        cookie_dir: str | None = None,
        *,
        reason: str | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base = os.fspath(base)
        self.roots = normalize_roots(roots)
        self.cookie_dir = cookie_dir.strip("/") if cookie_dir is not None else None
        self.reason = reason
        self.degraded: str | None = None
        self.interval = interval
        self._clock = clock
        self._sleep = sleep
        self._due = clock() + interval if interval else None
        self._requested = False
        self._request_reason = "poll"
        self._seen: set[str] = self._cookies()  # cookies already there are not news
        self._closed = False

    def fileno(self) -> int | None:
        return None

    def request(self, reason: str = "poll") -> None:
        """Make the next read() report a rescan of every root."""
        self._requested = True
        self._request_reason = reason

    def read(self, timeout: float | None = 0.0) -> Batch:
        if self._closed:
            raise ValueError("watcher is closed")
        deadline = None if timeout is None else self._clock() + timeout
        while True:
            batch = self._check()
            if batch or (deadline is not None and self._clock() >= deadline):
                return batch
            step = COOKIE_CHECK_S
            if deadline is not None:
                step = min(step, deadline - self._clock())
            if self._due is not None:
                step = min(step, self._due - self._clock())
            self._sleep(max(step, 0.0))

    def close(self) -> None:
        self._closed = True

    def _cookies(self) -> set[str]:
        if self.cookie_dir is None:
            return set()
        try:
            return set(os.listdir(key_path(self.base, self.cookie_dir)))
        except OSError:
            return set()

    def _check(self) -> Batch:
        now = self._clock()
        listing = self._cookies()
        fresh = listing - self._seen
        self._seen = listing  # a removed cookie name may be reused later
        reason = None
        if self._requested:
            reason = self._request_reason
        elif fresh or (self._due is not None and now >= self._due):
            reason = "poll"
        if reason is None:
            return Batch()
        self._requested = False
        if self.interval:
            self._due = now + self.interval
        return Batch(rescan=frozenset(self.roots), reason=reason, cookies=frozenset(fresh))
