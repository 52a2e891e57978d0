"""A watch on every indexed file: writes through names no folder watch sees.

Folder watches report a write under the name it was made through. A file
that gains a second name outside every watched folder *after* the daemon's
last pass (so links.py never saw st_nlink > 1) can then be rewritten through
that name without a single folder event. inotify watches are per inode, so
a watch on the file itself reports that write (IN_MODIFY, IN_CLOSE_WRITE)
and the link(2) before it (IN_ATTRIB: link count). The backend holds the
watches (ctindex/backends/inotify.py); this module decides which keys it holds and
covers what it cannot hold (docs/daemon.md, "Changes no event announces").

* Every pass hands over what it recorded (`UpdateReport.seen`,
  ctindex/indexing/transaction.py): a full pass replaces the watched set,
  a narrowed one replaces it under its keys. A key already watched at the
  inode the pass recorded costs nothing; any other is watched (again): a
  name that now holds another inode is re-pointed.
* Watch first, or verify: a write between the pass reading a file and its
  watch existing has no event. So a narrowed pass's keys are watched before
  it runs (prewatch), and each file first watched after a pass read it is
  lstat'ed once the watch is in place and compared with what the pass
  recorded (the reconciler's rule, ctindex/daemon/links.vouches); a mismatch
  makes the key dirty.
* A file the backend cannot watch (over its budget) or whose record is
  racily clean while it has another name is kept here
  with its fingerprint and lstat'ed at every barrier, like links.py does,
  up to REST_MAX files. Beyond that a per-barrier check would cost more
  than the query, and a full pass per barrier would make every query pay
  for the corpus's size: the unwatched files are then left to the daemon's
  full passes (the audit, every `audit_seconds`), and what that leaves
  open is said in `status` and docs/reliability.md ("File watches"): a
  second name made for one of them outside the watched folders after the
  last full pass, and a write through it, wait for the next full pass.
  Writes through the indexed name are announced by the folder watches
  as always, so the barriers stay narrowed at any size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, TypedDict

from ctindex.backends.base import Watcher, file_watching
from ctindex.daemon.links import CheckRecord, LinkTracker, vouches
from ctindex.policy.project import key_within

if TYPE_CHECKING:
    from ctindex.store.filetable import RecordedFile as LinkedEntry

# Files re-checked by lstat per barrier when the watch budget is exhausted:
# ~2.5 µs each unloaded (docs/benchmarks.md: a bare lstat walk of 200,000
# files in 486 ms), 12-15 µs on the loaded 2-core test machine, so 1,000
# cost 2.5-15 ms, about what the rest of a daemon-answered query costs.
# Beyond that they are left to the audit (above).
REST_MAX = 1_000


class _Inodes(Mapping[str, int]):
    """key -> the inode number a pass recorded, read from its report (no copy)."""

    def __init__(self, seen: Mapping[str, LinkedEntry]) -> None:
        self._seen = seen

    def __getitem__(self, key: str) -> int:
        return self._seen[key][0].ino

    def __iter__(self) -> Iterator[str]:
        return iter(self._seen)

    def __len__(self) -> int:
        return len(self._seen)


class FileWatchStatus(TypedDict):
    available: bool  # the backend can watch single files
    watched: int
    budget: int
    over_budget: bool
    rechecked: int  # files re-checked by fingerprint at each barrier instead
    # More than rechecked_cap files over the budget: none is re-checked;
    # `unwatched` of them (as of the last full pass, plus files added since)
    # are left to the next full pass (the audit).
    rechecked_over_cap: bool
    rechecked_cap: int
    unwatched: int
    checks: int
    stats: int
    last_check: CheckRecord | None
    verified: int


class FileWatches:
    def __init__(self, base: str, rest_cap: int | None = None) -> None:
        self.base = base
        # Files nothing watches: re-checked per barrier (the LinkTracker's rule).
        self.rest = LinkTracker(base, cap=REST_MAX if rest_cap is None else rest_cap)
        self.verified = 0  # lstat calls made after adding watches, in total
        self.unwatched = 0  # indexed files without a watch, as the last pass left them

    def reset(self) -> None:
        """A new watcher holds no file watches; the full pass that follows
        every reopen hands them all over again."""
        self.rest.learn({}, True, ())

    def learn(
        self,
        watcher: Watcher | None,
        seen: Mapping[str, LinkedEntry] | None,
        full: bool,
        keys: Iterable[str],
    ) -> list[str]:
        """Take in what one pass recorded; returns keys to make dirty (the
        file moved between the pass and its watch)."""
        if seen is None:  # an engine that does not report them: nothing to act on
            return []
        backend = file_watching(watcher)
        if backend is None:
            # The poll lane (every barrier is a full pass anyway) or a backend
            # without file watches (docs/backends.md): nothing kept here.
            self.rest.learn({}, True, ())
            return []
        folders = set(keys)
        held = backend.watched_files()
        if full:
            gone = [k for k in held if k not in seen]
        else:
            # A narrowed pass is usually a few file keys: those decide
            # directly. Only a key that is neither (a folder, or a name now
            # gone) needs a scan of the watched set, O(watched * depth).
            gone, folder_keys = [], set()
            for k in folders:
                if k in seen:
                    continue
                if k in held:
                    gone.append(k)
                else:
                    folder_keys.add(k)
            if folder_keys:
                gone.extend(k for k in held if k not in seen and key_within(k, folder_keys))
        backend.unwatch_files(gone)
        new = backend.watch_files(seen, _Inodes(seen))
        dirty, rest, unwatched = self._verify(seen, held, new)
        self.rest.learn(rest, full, folders)
        # A full pass counts them all; a narrowed one adds those it met
        # (the count is exact again after the next full pass).
        self.unwatched = unwatched if full else self.unwatched + unwatched
        return dirty

    def prewatch(self, watcher: Watcher | None, keys: Iterable[str]) -> None:
        """Before a narrowed pass: watch its keys first, so the pass reads
        each file after its watch exists and no write can fall between
        (a folder key or a name that is gone is simply not watched; keys
        the pass does not record are dropped again by learn)."""
        backend = file_watching(watcher)
        if backend is not None:
            backend.watch_files(keys)

    def _verify(
        self, seen: Mapping[str, LinkedEntry], held: AbstractSet[str], new: set[str]
    ) -> tuple[list[str], dict[str, LinkedEntry], int]:
        """Only watches made after the pass read the file can have missed a
        write: those are lstat'ed now (`held` is live: what is watched).
        Returns the dirty keys, the files to re-check per barrier, and how
        many files have no watch."""
        dirty: list[str] = []
        rest: dict[str, LinkedEntry] = {}
        unwatched = 0
        gran = self.rest.granularity_ns
        lstat, join, base = os.lstat, os.path.join, self.base
        for key in seen:
            if key not in held:
                rest[key] = seen[key]
                unwatched += 1
                continue
            if key not in new:
                continue  # watched before the pass read it: any later write has an event
            entry = seen[key]
            fp, recorded_ns = entry
            try:
                st = lstat(join(base, key))
            except OSError:
                dirty.append(key)
                continue
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev) != fp:
                dirty.append(key)
            elif not vouches(st, fp, recorded_ns, gran) and st.st_nlink > 1:
                # Racily clean with another name: an equal fingerprint proves
                # nothing for a write through that name in the same tick,
                # before the watch existed. Re-checked at barriers until a
                # later pass records it cleanly. With one name, any write
                # since the pass read the file went through the indexed name
                # (a folder event) or after the watch existed (a file event),
                # save a name linked, written through and unlinked again
                # within one tick of that read (docs/reliability.md, "File
                # watches"); trusting it spares a narrowed pass per barrier
                # for every file a full pass met just after it was written.
                rest[key] = entry
        self.verified += len(new)
        return dirty, rest, unwatched

    def check(self) -> list[str]:
        """At a barrier: the files nothing watches, by their fingerprint."""
        return self.rest.check()

    def status(self, watcher: Watcher | None) -> FileWatchStatus:
        backend = file_watching(watcher)
        watched = len(backend.watched_files()) if backend is not None else 0
        budget = backend.file_budget if backend is not None else 0
        rest = self.rest.status()
        return {
            "available": backend is not None,
            "watched": watched,
            "budget": budget,
            "over_budget": backend is not None
            and (rest["tracked"] > 0 or rest["over_cap"])
            and watched >= budget,
            "rechecked": rest["tracked"],
            "rechecked_over_cap": rest["over_cap"],
            "rechecked_cap": rest["cap"],
            "unwatched": self.unwatched,
            "checks": rest["checks"],
            "stats": rest["stats"],
            "last_check": rest["last_check"],
            "verified": self.verified,
        }
