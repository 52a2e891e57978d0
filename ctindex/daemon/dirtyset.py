"""The daemon's dirty set: watcher hints coalesced until they are applied.

A dirty key is only a hint: the narrowed reconcile decides what
really changed from the final filesystem state, so editor save sequences
(write temp, rename over) need no special casing here. Caps follow
Syncthing's aggregation: too many paths in one folder collapse to the
folder; too many overall turn into a full reconcile of the scopes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

FOLDER_CAP = 128
TOTAL_CAP = 4096
# Under constant churn the debounce window keeps moving; never hold a path
# back longer than this many debounce periods after its first event.
MAX_DELAY_FACTOR = 4


def parent_key(key: str) -> str:
    return key.rpartition("/")[0]


@dataclass
class Pending:
    """What take() hands to the applier."""

    paths: list[str]
    rescan: bool
    reason: str | None
    first_event: float | None  # monotonic time of the oldest event in this batch


@dataclass
class DirtySet:
    debounce_s: float
    folder_cap: int = FOLDER_CAP
    total_cap: int = TOTAL_CAP
    _paths: set[str] = field(default_factory=set)
    _children: dict[str, set[str]] = field(default_factory=dict)
    _rescan_reason: str | None = None
    _first: float | None = None
    _last: float | None = None

    def __len__(self) -> int:
        return len(self._paths)

    @property
    def rescan_reason(self) -> str | None:
        return self._rescan_reason

    def paths(self) -> list[str]:
        return sorted(self._paths)

    def add(self, keys: Iterable[str], now: float) -> None:
        touched = False
        for key in keys:
            touched = True
            if self._rescan_reason is None and not self._covered(key):
                self._insert(key)
        if touched:
            self._stamp(now)

    def request_rescan(self, reason: str, now: float | None = None) -> None:
        """A full reconcile of the scopes will replace every queued path."""
        if self._rescan_reason is None:
            self._rescan_reason = reason
        self._clear_paths()
        if now is not None:
            self._stamp(now)

    def ready(self, now: float) -> bool:
        """True once the debounce window has passed (or the max delay)."""
        deadline = self.deadline()
        return deadline is not None and now >= deadline

    def deadline(self) -> float | None:
        if self._first is None or self._last is None:
            return None
        return min(self._last + self.debounce_s, self._first + self.debounce_s * MAX_DELAY_FACTOR)

    def first_event(self) -> float | None:
        return self._first

    def take(self) -> Pending:
        """Hand everything over and start empty (the barrier path skips the
        debounce by calling this directly)."""
        pending = Pending(
            sorted(self._paths), self._rescan_reason is not None, self._rescan_reason, self._first
        )
        self._clear_paths()
        self._rescan_reason = None
        self._first = self._last = None
        return pending

    def restore(self, pending: Pending, now: float) -> None:
        """Put back a batch whose application failed, so nothing is lost."""
        if pending.rescan:
            self.request_rescan(pending.reason or "retry", now)
        else:
            self.add(pending.paths, now)
        if pending.first_event is not None and (
            self._first is None or pending.first_event < self._first
        ):
            self._first = pending.first_event

    # -- internals ---------------------------------------------------------

    def _stamp(self, now: float) -> None:
        if self._first is None:
            self._first = now
        self._last = now

    def _covered(self, key: str) -> bool:
        """Already queued, itself or through a queued ancestor (which can only
        be a folder key, i.e. its whole subtree is already dirty)."""
        probe = key
        while probe:
            if probe in self._paths:
                return True
            probe = parent_key(probe)
        return False

    def _insert(self, key: str) -> None:
        parent = parent_key(key)
        siblings = self._children.setdefault(parent, set())
        siblings.add(key)
        self._paths.add(key)
        if len(siblings) > self.folder_cap:
            self._collapse(parent)
        if len(self._paths) > self.total_cap:
            self.request_rescan("too-many-paths")

    def _collapse(self, folder: str) -> None:
        prefix = folder + "/" if folder else ""
        doomed = [k for k in self._paths if k.startswith(prefix) and k != folder]
        for k in doomed:
            self._paths.discard(k)
            self._children.get(parent_key(k), set()).discard(k)
        self._children.pop(folder, None)
        if folder:
            self._insert(folder)
        else:
            self.request_rescan("too-many-paths")

    def _clear_paths(self) -> None:
        self._paths.clear()
        self._children.clear()
