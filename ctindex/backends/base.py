"""The one narrow interface every watcher backend implements.

Backends only *report*: which keys may have changed, which roots need a full
reconcile and why, and which barrier cookies came back. They never decide what
is indexed (the daemon filters every key through the effective plan) and never
import ctindex or reconciler.

Keys follow docs/architecture.md: base-relative, '/'-separated, decoded with
os.fsdecode (surrogateescape). A key may name a file or a folder; a folder key
means "this whole subtree may be dirty".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

Descend = Callable[[str], bool]

EMPTY: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Batch:
    """What one read() observed. Every field may be empty."""

    paths: frozenset[str] = EMPTY  # dirty keys (files or folder subtrees)
    rescan: frozenset[str] = EMPTY  # root keys (or folders) needing a full reconcile
    reason: str | None = None  # why rescan is non-empty: overflow, watch-limit, unmount, ...
    cookies: frozenset[str] = EMPTY  # names of barrier cookie files seen in cookie_dir
    events: int = field(default=0, compare=False)  # raw events translated (metrics only)

    def __bool__(self) -> bool:
        return bool(self.paths or self.rescan or self.cookies)

    def merge(self, other: Batch) -> Batch:
        """Union of two batches; the first non-empty reason wins."""
        reason = self.reason if self.rescan else None
        if other.rescan and reason is None:
            reason = other.reason
        return Batch(
            self.paths | other.paths,
            self.rescan | other.rescan,
            reason,
            self.cookies | other.cookies,
            self.events + other.events,
        )


class BatchBuilder:
    """Mutable accumulator every backend's translation fills during one read()."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.rescan: set[str] = set()
        self.reason: str | None = None
        self.cookies: set[str] = set()
        self.events = 0

    def need(self, keys: Iterable[str], reason: str) -> None:
        """Ask for a full reconcile of `keys`; the first reason given is kept."""
        self.rescan.update(keys)
        if self.reason is None:
            self.reason = reason

    def batch(self) -> Batch:
        return Batch(
            frozenset(self.paths),
            frozenset(self.rescan),
            self.reason if self.rescan else None,
            frozenset(self.cookies),
            self.events,
        )


@runtime_checkable
class Watcher(Protocol):
    """A source of Batches for a fixed set of roots.

    name:     "inotify", "poll", "fsevents" or "rdcw" (the backend now in use).
    reason:   why this backend was chosen when it is not the native one
              ("nfs: remote filesystem, no reliable events"), else None.
    degraded: set when the backend lost coverage it cannot repair by itself
              (watch limit hit); the daemon keeps reconciling, see docs/backends.md.
    """

    @property
    def name(self) -> str: ...

    @property
    def roots(self) -> Sequence[str]: ...  # the normalized root keys watched

    @property
    def reason(self) -> str | None: ...

    @property
    def degraded(self) -> str | None: ...

    def fileno(self) -> int | None:
        """A readable fd to select on, or None (then call read() with a timeout).

        May change between reads (a lane switch); ask again each loop."""
        ...

    def read(self, timeout: float | None = 0.0) -> Batch:
        """Drain what is ready and translate it; wait at most `timeout` seconds
        for something to arrive (None = until something arrives)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class FileWatching(Protocol):
    """A backend that can also watch single files (per inode: inotify).

    A folder watch sees writes made through the names in that folder only; a
    watch on the file itself sees writes through any of its names and the
    link count changing (docs/backends.md, "File watches"). The daemon hands
    over the keys of the files that reached the index; events on them come
    back as dirty keys in Batch.paths like any other."""

    @property
    def file_budget(self) -> int: ...  # at most this many file watches are held

    def watch_files(self, keys: Iterable[str], inodes: Mapping[str, int] | None = None) -> set[str]:
        """Watch each key's file (re-pointing a key whose name now holds
        another inode); returns the keys whose watch is new (not watched
        before, or re-pointed). `inodes`: the inode number the caller
        recorded for a key; a key already watched at that inode is skipped.
        A key not in watched_files() afterwards is not watched: gone, a
        folder, or over the budget. Never raises for a key."""
        ...

    def unwatch_files(self, keys: Iterable[str]) -> None: ...

    def watched_files(self) -> AbstractSet[str]: ...


def file_watching(watcher: object) -> FileWatching | None:
    """The FileWatching backend in use behind `watcher`, if any. A wrapper
    that switches lanes (backends.choose.Supervised) exposes the backend in
    use as `current`."""
    seen = 0
    while not isinstance(watcher, FileWatching):
        watcher = getattr(watcher, "current", None)
        seen += 1
        if watcher is None or seen > 4:
            return None
    return watcher


def join_key(parent: str, name: str) -> str:
    """Child key of a folder key; the base itself is the empty key."""
    return f"{parent}/{name}" if parent else name


def key_path(base: os.PathLike[str] | str, key: str) -> str:
    """Absolute filesystem path of a key (str; bytes round-trip via fsencode)."""
    return os.path.join(os.fspath(base), key) if key else os.fspath(base)


def under(key: str, folder: str) -> bool:
    """True when `key` is `folder` itself or inside it."""
    return not folder or key == folder or key.startswith(folder + "/")


def root_of(key: str, roots: Iterable[str]) -> str | None:
    """The longest root containing key, or None when outside every root."""
    best: str | None = None
    for root in roots:
        if under(key, root) and (best is None or len(root) > len(best)):
            best = root
    return best


def normalize_roots(roots: Sequence[str]) -> tuple[str, ...]:
    """Drop duplicates and roots nested in another root (the outer walk covers them)."""
    cleaned = sorted({r.strip("/") for r in roots})
    kept: list[str] = []
    for root in cleaned:
        if not any(under(root, k) for k in kept):
            kept.append(root)
    return tuple(kept)


def excluded(key: str, root: str, descend: Descend) -> bool:
    """True when a folder between `root` (exclusive) and `key` (exclusive) is
    pruned by the plan. Recursive native watches (FSEvents, RDCW) cannot skip
    excluded folders in the kernel, so their events are dropped here."""
    rest = key[len(root) + 1 :] if root else key
    parts = rest.split("/")[:-1]
    folder = root
    for part in parts:
        folder = join_key(folder, part)
        if not descend(folder):
            return True
    return False
