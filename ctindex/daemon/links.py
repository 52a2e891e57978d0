"""Files with several names: changes no event announces (docs/daemon.md).

inotify reports a write under the name it was made through, and only to
watchers of that name's folder. A file with a second name elsewhere (a
`cp -al` copy, `os.link`, a name outside the project) can be rewritten in
place through that other name (vim does so for files with several links)
without a single event for the name we index. So the daemon keeps the files
its passes saw with st_nlink > 1, with the fingerprint the index recorded
for them, and re-checks them at every barrier with the reconciler's rule
(docs/reliability.md, "What vouches for unchanged"): unchanged only if size, mtime_ns,
ctime_ns, inode and device all match and the entry was not racily clean.
Every other outcome makes the key dirty, so the barrier's narrowed pass
decides from the file itself.

Cost: one lstat per tracked file per barrier, reported in status. Above
LINKED_MAX tracked files they are not kept at all; every barrier then runs a
full reconciliation instead (correct, and the cost is visible as the reason).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from ctindex.policy.project import key_within
from ctindex.reconciler import DEFAULT_GRANULARITY_NS, Fingerprint

if TYPE_CHECKING:
    from ctindex.store.filetable import RecordedFile as LinkedEntry

LINKED_MAX = 20_000  # ~ the stat cost of a small full pass per barrier; memory ~ 4 MiB


def vouches(st: os.stat_result, fp: Fingerprint, recorded_ns: int, gran: int) -> bool:
    """The reconciler's rule: `st` proves the file is what the
    index recorded only if all five fingerprint fields match and the record
    was not racily clean (taken within the granularity of the file's stamps)."""
    return (
        (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev) == fp
        and recorded_ns - fp.mtime_ns >= gran
        and recorded_ns - fp.ctime_ns >= gran
    )


class CheckRecord(TypedDict):
    """The last barrier re-check (status detail)."""

    files: int
    changed: int
    duration_ms: float


class LinkStatus(TypedDict):
    tracked: int
    over_cap: bool
    cap: int
    checks: int
    stats: int
    last_check: CheckRecord | None


@dataclass
class LinkTracker:
    base: str  # the project root: keys are relative to it
    cap: int = LINKED_MAX
    granularity_ns: int = DEFAULT_GRANULARITY_NS
    entries: dict[str, LinkedEntry] = field(default_factory=dict)
    over_cap: bool = False  # the last full pass saw more than `cap` such files
    checks: int = 0  # barriers that re-checked
    stats: int = 0  # lstat calls made by those checks, in total
    last_check: CheckRecord | None = None
    _inodes: dict[tuple[int, int], int] = field(default_factory=dict)
    _paths: dict[str, str] = field(default_factory=dict)  # key -> absolute path, joined once

    def __len__(self) -> int:
        return len(self.entries)

    def learn(
        self, linked: Mapping[str, LinkedEntry] | None, full: bool, keys: Iterable[str]
    ) -> bool:
        """Take in what one pass saw. `full`: it walked every root (the set
        is replaced); else it was narrowed to `keys` (tracked keys under them
        are replaced by what it saw). Returns True when the pass met a
        multi-linked inode not tracked before: its other indexed names (which
        no pass since has stat'ed) are unknown, and only a full pass finds them."""
        if linked is None:  # an engine that does not report links: keep what we know
            return False
        if full:
            self._clear()
            self.over_cap = len(linked) > self.cap
            if not self.over_cap:
                for key, entry in linked.items():
                    self._add(key, entry)
            return False
        if self.over_cap:  # every barrier is a full pass until one finds fewer
            return False
        unknown = any((fp.dev, fp.ino) not in self._inodes for fp, _ in linked.values())
        folders = set(keys)
        if self.entries and folders:
            for key in [k for k in self.entries if key_within(k, folders)]:
                self._drop(key)
        for key, entry in linked.items():
            self._add(key, entry)
        if len(self.entries) > self.cap:
            self._clear()
            self.over_cap = True
        return unknown

    def check(self) -> list[str]:
        """Keys whose file may differ from what the index recorded: the
        fingerprint moved, the file is gone or unreadable, or the record is
        racily clean (taken within the timestamp granularity of the file's
        own stamps, when an equal fingerprint proves nothing: git's rule)."""
        if not self.entries:
            return []
        t0 = time.perf_counter()
        changed: list[str] = []
        gran = self.granularity_ns
        paths = self._paths
        lstat = os.lstat
        for key, (fp, recorded_ns) in self.entries.items():
            try:
                # lstat, never opened: a mismatch only makes the key dirty, and
                # the narrowed pass then walks to it without following symlinks.
                st = lstat(paths[key])
            except OSError:
                changed.append(key)
                continue
            if not vouches(st, fp, recorded_ns, gran):
                changed.append(key)
        self.checks += 1
        self.stats += len(self.entries)
        self.last_check = {
            "files": len(self.entries),
            "changed": len(changed),
            "duration_ms": round((time.perf_counter() - t0) * 1000, 3),
        }
        return changed

    def status(self) -> LinkStatus:
        return {
            "tracked": len(self.entries),
            "over_cap": self.over_cap,
            "cap": self.cap,
            "checks": self.checks,
            "stats": self.stats,
            "last_check": self.last_check,
        }

    def _clear(self) -> None:
        self.entries.clear()
        self._inodes.clear()
        self._paths.clear()

    def _add(self, key: str, entry: LinkedEntry) -> None:
        if key in self.entries:
            self._drop(key)
        fp: Fingerprint = entry[0]
        self.entries[key] = entry
        self._paths[key] = os.path.join(self.base, key)
        inode = (fp.dev, fp.ino)
        self._inodes[inode] = self._inodes.get(inode, 0) + 1

    def _drop(self, key: str) -> None:
        fp = self.entries.pop(key)[0]
        del self._paths[key]
        inode = (fp.dev, fp.ino)
        left = self._inodes.get(inode, 0) - 1
        if left > 0:
            self._inodes[inode] = left
        else:
            self._inodes.pop(inode, None)
