"""Garbage collection of retired index files, and the live/retired split.

A writer that publishes a generation lists the files the previous one named
and the new one does not as *retired* (MANIFEST `retired`, with the time),
and removes them once they are older than the readers' grace period
(store/writer.py GRACE_NS): a reader that read the previous MANIFEST just
before the swap can still open everything it names. `collect` runs at the
end of every writing command (update, rebuild, the daemon's and the
fallback's passes, `verify --repair`), under the update lock, whether or
not anything was published: were it run only on publishing, a run of
`rebuild`s, or no-change `update`s after them, would keep every retired
generation on disk until the next real change.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import StoreManifest, read_manifest
from ctindex.store.writer import collect_garbage

clock_ns: Callable[[], int] = time.time_ns  # tests move it past the grace period


def collect(index_dir: Path) -> int:
    """Remove what the published manifest retired more than the grace period
    ago, and strays of writers that died. The caller holds the update lock.
    Returns the files still kept as retired. The manifest's `retired` list is
    not rewritten here (that would be a publish): the next publish drops the
    names that are gone, and removing a missing name again is harmless."""
    try:
        m = read_manifest(index_dir)
    except IndexCorrupt:
        return 0  # the next update rebuilds; its publish collects
    if m is None:
        return 0
    return len(collect_garbage(index_dir, m, clock_ns()))


def index_bytes(index_dir: Path, m: StoreManifest | None) -> tuple[int, int]:
    """(live, retired) bytes of the index folder's files: retired are the
    files the manifest retired and leftovers no manifest names (both wait
    for collection); live is everything else (the published generation's
    files, MANIFEST, the lock and the pass record). The runtime folder is
    counted separately by `status`."""
    from ctindex.store.writer import OURS

    referenced = m.referenced() if m is not None else set()
    retired_names = {r[0] for r in m.retired} if m is not None else set()
    live = retired = 0
    try:
        entries = list(os.scandir(index_dir))
    except OSError:
        return 0, 0
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            size = entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
        name = entry.name
        if name in retired_names or (name.startswith(OURS) and name not in referenced):
            retired += size
        else:
            live += size
    return live, retired
