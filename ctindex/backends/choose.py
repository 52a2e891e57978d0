"""open_watcher(): pick the backend, and keep a degraded native one honest.

Order: the mount table first (unreliable filesystems get the poll lane with a
reason; on macOS and Windows the volume type instead, ctindex/backends/volumes.py),
then the platform's native facility, then the poll lane if opening it fails.
A native watcher that hits a kernel limit is swapped for the poll lane and
retried with exponential back-off (60 s doubling to an hour, like
Syncthing), never in a loop.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ctindex.backends.base import Batch, Descend, Watcher, key_path, normalize_roots
from ctindex.backends.poll import PollWatcher

BACKOFF_FIRST_S = 60.0
BACKOFF_MAX_S = 3600.0

NativeOpener = Callable[[], Watcher]


def native_opener(
    base: Path | str, roots: Sequence[str], descend: Descend, cookie_dir: str | None
) -> tuple[str, NativeOpener] | None:
    """(backend name, opener) for this platform, or None when there is none."""
    if sys.platform.startswith("linux"):
        from ctindex.backends.inotify import InotifyWatcher

        return "inotify", lambda: InotifyWatcher(base, roots, descend, cookie_dir)
    if sys.platform == "darwin":
        from ctindex.backends.fsevents import FSEventsWatcher

        return "fsevents", lambda: FSEventsWatcher(base, roots, descend, cookie_dir)
    if sys.platform == "win32":
        from ctindex.backends.rdcw import RdcwWatcher

        return "rdcw", lambda: RdcwWatcher(base, roots, descend, cookie_dir)
    return None


class Supervised:
    """A native watcher that falls back to the poll lane while it cannot work.

    Looks like any Watcher; `name`, `reason`, `degraded` and `fileno()` follow
    the lane currently in use."""

    def __init__(
        self,
        open_native: NativeOpener,
        open_poll: Callable[[str], PollWatcher],
        roots: Sequence[str],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open_native = open_native
        self._open_poll = open_poll
        self._roots = frozenset(normalize_roots(roots))
        self._clock = clock
        self._backoff = BACKOFF_FIRST_S
        self._retry_at = 0.0
        self._pending = Batch()
        self._current: Watcher
        native = self._try_native()
        if native is not None:
            self._current = native

    # The lane in use.
    @property
    def name(self) -> str:
        return self._current.name

    @property
    def reason(self) -> str | None:
        return self._current.reason

    @property
    def degraded(self) -> str | None:
        return self._current.degraded

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(sorted(self._roots))

    @property
    def current(self) -> Watcher:
        return self._current

    def fileno(self) -> int | None:
        return self._current.fileno()

    def read(self, timeout: float | None = 0.0) -> Batch:
        if isinstance(self._current, PollWatcher) and self._clock() >= self._retry_at:
            native = self._try_native()
            if native is not None:
                # A cookie written before the native watches existed is only
                # visible to the poll lane: give it one last look.
                last = self._current.read(0.0)
                self._current.close()
                self._current = native
                self._backoff = BACKOFF_FIRST_S
                # Events between the last poll and the new watches are unknown.
                restored = Batch(rescan=self._roots, reason="native-restored")
                self._pending = self._pending.merge(last).merge(restored)
        if self._pending:
            timeout = 0.0
        batch = self._pending.merge(self._current.read(timeout))
        self._pending = Batch()
        if not isinstance(self._current, PollWatcher) and self._current.degraded:
            why = self._current.degraded
            self._current.close()
            self._fall_back(why)
            batch = batch.merge(Batch(rescan=self._roots, reason="watch-limit"))
        return batch

    def close(self) -> None:
        self._current.close()

    def _try_native(self) -> Watcher | None:
        try:
            native = self._open_native()
        except OSError as e:  # EMFILE from inotify_init1, a missing library, ...
            self._fall_back(f"native watcher failed: {e.strerror or e}")
            return None
        if native.degraded:
            why = native.degraded
            native.close()
            self._fall_back(why)
            self._pending = self._pending.merge(Batch(rescan=self._roots, reason="watch-limit"))
            return None
        return native

    def _fall_back(self, why: str) -> None:
        current = getattr(self, "_current", None)
        if isinstance(current, PollWatcher):
            current.reason = why  # keep its cookie listing: a barrier may be in flight
        else:
            self._current = self._open_poll(why)
        self._retry_at = self._clock() + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)


def open_watcher(
    base: Path | str,
    roots: Sequence[str],
    descend: Descend,
    cookie_dir: str | None = None,
    *,
    poll_interval: float | None = None,
    force_poll: str | None = None,
) -> Watcher:
    """Open the best watcher for `roots` (keys under `base`).

    `descend(key)` is the plan's folder filter: excluded folders get no kernel
    watch. `cookie_dir` (a key, created by the caller first) is watched
    non-recursively for barrier cookies. `force_poll` (a reason) skips native
    backends, e.g. when the user turned them off."""

    def poll(why: str | None) -> PollWatcher:
        return PollWatcher(base, roots, cookie_dir, reason=why, interval=poll_interval)

    if force_poll:
        return poll(force_poll)
    found = native_opener(base, roots, descend, cookie_dir)
    if found is None:
        return poll(f"no native watcher for platform {sys.platform}")
    paths = [key_path(base, r) for r in normalize_roots(roots)]
    if cookie_dir is not None:
        paths.append(key_path(base, cookie_dir))
    existing = [p for p in paths if os.path.exists(p)]
    if found[0] == "inotify":
        from ctindex.backends.mounts import check_paths

        unreliable = check_paths(existing)
    else:  # network volumes on macOS and Windows (ctindex/backends/volumes.py)
        from ctindex.backends.volumes import check_volumes

        unreliable = check_volumes(found[0], existing)
    if unreliable:
        return poll(unreliable)
    return Supervised(found[1], poll, roots)
