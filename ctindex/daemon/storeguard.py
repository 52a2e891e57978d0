"""The daemon's trust in its own store: one class owns it.

The daemon vouches for the generation its passes published. The store can be
changed behind it by no writer of ctindex: a backup restore, `git checkout`
or `git stash` of a committed `.ct/`, `rsync -a --delete` from another
project, a truncated segment. No watch reports these (the store is
hard-excluded from the watched scopes), and its narrowed passes would apply
later edits on top of whatever base it finds. So before every pass and
every barrier answer, `StoreGuard.check` reads the published manifest and
accepts it only when it is the generation the daemon knows, or one that
writers published on top of it (its lineage names it) in this very folder;
each segment it names must still have its recorded size. Anything else is
reported, and the driver (ctindex/daemon/reconcile.py) rebuilds from the
files before the next answer: the file table of a manifest nobody vouches
for is not trusted (docs/daemon.md, "Index changed outside ctindex").

A generation published on top of ours *through a network mount* (its
manifest records no home folder) is in the lineage but was built from what
that client's mount showed, which its caches may hold back for seconds
(a listing without the file just added on the host). It is not vouched for
until a full pass of this daemon's own has compared it with the files as
this host sees them (`Distrust.verify`): the share host answers only for
generations it built or checked (docs/network-shares.md, "One writer").

The manifest is read through ctindex/store/generation.py's ManifestReader:
not again while its full stat fingerprint is the one it had once settled.
The segments' sizes are checked every time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import ManifestReader, StoreManifest


class Distrust(NamedTuple):
    """Why the published store is not vouched for, and what makes it so
    again: a rebuild from the files, or (`verify`) a full pass over the
    generation found (its file table is a writer's, only its view is in doubt)."""

    why: str
    verify: bool = False


PUBLISHED_THROUGH_A_MOUNT = "published-through-a-mount"


class StoreGuard:
    def __init__(self, index_dir: Path, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.index_dir = index_dir
        self.manifest = ManifestReader(index_dir, clock_ns)
        # The identity of the generation this daemon vouches for; None until
        # its first pass (which builds on what it finds, checked by the
        # indexer like any writer's full pass).
        self.known: str | None = None

    def learn(self, identity: str) -> None:
        """A pass published (or checked) the generation of `identity`."""
        self.known = identity or None

    def check(self) -> Distrust | None:
        """None when the store is still the one vouched for (and then the
        identity a local writer's later pass published is learnt); else why
        not, and whether a full pass can vouch for it again."""
        if self.known is None:
            return None
        try:
            m = self.manifest.read()
        except IndexCorrupt as exc:
            return Distrust(f"{exc}")
        except OSError as exc:  # the folder itself is gone or unreadable
            return Distrust(f"{self.index_dir}: {exc.strerror or exc}")
        if m is None:
            return Distrust("MANIFEST removed")
        why = self._foreign(m)
        if why is not None:
            return Distrust(why)
        if m.home is None and m.identity != self.known:
            return Distrust(
                f"generation {m.generation} was published through a network mount", verify=True
            )
        self.known = m.identity
        return None

    def _foreign(self, m: StoreManifest) -> str | None:
        try:
            st = os.stat(self.index_dir)
        except OSError as exc:
            return f"{self.index_dir}: {exc.strerror or exc}"
        if m.home is not None and m.home != [st.st_dev, st.st_ino]:
            return f"MANIFEST of generation {m.generation} was published in another folder"
        assert self.known is not None
        if not m.descends_from(self.known):
            return (
                f"MANIFEST replaced by generation {m.generation}, "
                "not one published on top of the generation vouched for"
            )
        for ref in m.segments:
            try:
                size = os.stat(self.index_dir / ref.name).st_size
            except OSError as exc:
                return f"{ref.name}: {exc.strerror or exc}"
            if ref.size and size != ref.size:
                return f"{ref.name}: {size} bytes, the manifest says {ref.size}"
        return None
