"""The one stat fingerprint that may vouch for "unchanged", and its racy rule.

Anything that skips work because a file or folder "has not changed since we
looked" compares this whole fingerprint: size, mtime_ns, ctime_ns, inode and
device. A partial stamp is not enough with real tools: reproducible archives
(`tar --mtime`), `rsync -a` and `cp -p` restore mtimes, `tar x` and `cp -p`
reuse the inode, and equal sizes are common. ctime cannot be set back by a
user and moves on every write, rename into a folder, chmod or utime, so it
is what tells those versions apart.

A fingerprint recorded too close to the moment it was taken proves nothing
(git's racily-clean rule): a change within the same timestamp tick keeps
both stamps. ``racily_clean`` applies the rule to mtime *and* ctime.

Standard library only, and cheap to import (the search fast path uses it):
the hot loops of the differ inline the same comparison for speed
(ctindex/reconciler/walk.py ``Unchanged``, ctindex/reconciler/diff.py ``on_files``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

# FAT stores mtime in 2 s steps; anything finer (ext4, NTFS, HFS+ 1 s) is covered too.
DEFAULT_GRANULARITY_NS = 2_000_000_000


class Fingerprint(NamedTuple):
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int


def fingerprint_of(st: os.stat_result) -> Fingerprint:
    return Fingerprint(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def racily_clean(
    fp: Sequence[int], recorded_ns: int, granularity_ns: int = DEFAULT_GRANULARITY_NS
) -> bool:
    """True when `fp` (a Fingerprint, or any sequence laid out like one: a
    manifest entry, a JSON list; mtime at [1], ctime at [2]) is within one timestamp
    granularity of `recorded_ns`, a clock reading taken *before* the stat:
    a later change could then keep the same fingerprint, so it must not be
    trusted (or recorded) as unchanged."""
    return recorded_ns - fp[1] < granularity_ns or recorded_ns - fp[2] < granularity_ns


def from_json(value: object) -> Fingerprint | None:
    """A fingerprint stored as a JSON list of five integers; None for anything
    else (an older record holding an mtime alone, damage): never a match."""
    if not isinstance(value, list) or len(value) != 5:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return Fingerprint(*value)
