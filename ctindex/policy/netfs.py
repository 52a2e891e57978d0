"""Is this project on a network filesystem, and how should it be walked?

docs/network-shares.md is the user's page; the rules here:

* A project whose index folder or any scope root lies on a network
  filesystem (NFS, SMB/CIFS, FUSE such as sshfs, 9p, virtiofs, cluster
  filesystems: ctindex/backends/remote.py REMOTE and every `fuse.*`) gets no
  daemon: no event reaches this host for a change made on the server or on
  another client, so a daemon could only walk the share on every barrier,
  the walk the query makes itself (synchronous reconciliation is
  the fallback for filesystems without reliable events). The query's own
  walk is its freshness: one walk per query, never two, and no spawn that
  is bound to fail (a Unix socket cannot be created on most shares).
* That walk lists and stats folders with WALK_THREADS requests in flight
  (ctindex/reconciler/parallel_walk.py); on local disks the serial walk stays.
  `CTINDEX_WALK_THREADS=N` overrides both (0: serial everywhere).

The mount table is read once per process (and only off the search fast
path: importing backends.mounts and parsing the table costs ~1 ms).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project

WALK_THREADS = 16  # measured on the sshfs rig (docs/network-shares.md)
WALK_THREADS_MAX = 64
THREADS_ENV = "CTINDEX_WALK_THREADS"


class Share(NamedTuple):
    fstype: str  # "fuse.sshfs", "nfs4", "cifs", ...
    mount_point: str
    kind: str  # "FUSE filesystem", "remote filesystem", "SMB share", ...


def is_network(fstype: str) -> str | None:
    """The kind of network filesystem `fstype` is, or None (local or unknown)."""
    from ctindex.backends.remote import remote_kind

    return remote_kind(fstype)


_cache: dict[tuple[str, ...], Share | None] = {}


def share_of(paths: list[str], *, below: bool = True, resolve: bool = True) -> Share | None:
    """The first network filesystem holding one of `paths` or (`below`)
    mounted below one of them; None when all are local (or the mount table
    is unreadable: then the usual lanes decide, ctindex/backends/choose.py).
    `resolve` False takes the paths as they are spelt (absolute, no
    realpath): through a share, realpath costs a round trip per component."""
    key = (*paths, str(below), str(resolve))
    if key in _cache:
        return _cache[key]
    from ctindex.backends.mounts import mount_of, mounts_below, read_mounts

    found: Share | None = None
    try:
        table = read_mounts()
    except OSError:
        table = []
    for raw in paths:
        path = os.path.realpath(raw) if resolve else os.path.abspath(raw)
        holder = mount_of(path, table)
        for m in ([holder] if holder is not None else []) + (
            mounts_below(path, table) if below else []
        ):
            kind = is_network(m.fstype)
            if kind is not None:
                found = Share(m.fstype, m.mount_point, kind)
                break
        if found is not None:
            break
    _cache[key] = found
    return found


def project_share(project: Project, plan: Plan | None = None) -> Share | None:
    """The network filesystem the project's index or scopes live on, if any.
    The index folder and the root are looked at first: on a share, one
    `lexists` per scope root would cost a round trip each."""
    found = share_of([os.fspath(project.index_dir), os.fspath(project.root)], below=False)
    if found is not None:
        return found
    paths = [os.fspath(project.index_dir)]
    if plan is not None:
        paths += [os.fspath(project.path(r)) for r in plan.path_filter().roots()]
    else:
        paths.append(os.fspath(project.root))
    return share_of([p for p in paths if os.path.lexists(p)] or [os.fspath(project.root)])


def ctime_kept_on(project: Project, share: Share) -> bool | None:
    """Whether `share` keeps a ctime of its own (ctindex/reconciler/ctime_probe.py),
    tested in the index folder when it lies on that share (None: untested)."""
    from ctindex.reconciler.ctime_probe import ctime_kept

    index_dir = os.fspath(project.index_dir)
    mount = share.mount_point.rstrip("/") + "/"
    if not (index_dir + "/").startswith(mount) or not os.path.isdir(index_dir):
        return None
    return ctime_kept(index_dir)


def ctime_blind(project: Project) -> bool:
    """True when the project's files are seen through a network filesystem
    found to keep no ctime of its own (sshfs): its walks compare size and
    mtime only (ctindex/reconciler/diff.py reconcile(ctime_blind=...)), and
    what that cannot see is said by freshness_reason and BLIND_NOTE. A
    filesystem not tested is not blind: its walk keeps the full rule."""
    share = project_share(project)
    return share is not None and ctime_kept_on(project, share) is False


def walk_threads(root: Path | str) -> int:
    """How many metadata requests the reconciler keeps in flight under `root`:
    WALK_THREADS on a network filesystem, 0 (the serial walk) elsewhere."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if raw:
        try:
            return max(0, min(int(raw), WALK_THREADS_MAX))
        except ValueError:
            pass  # a malformed override is ignored, never a failure of the query
    return WALK_THREADS if share_of([os.fspath(root)]) is not None else 0


def mount_options(mount_point: str, path: str = "/proc/self/mountinfo") -> set[str]:
    """The per-mount and filesystem options of `mount_point` (empty when
    the table cannot say): what the barrier through a share relies on."""
    from ctindex.backends.mounts import unescape

    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    found: set[str] = set()
    for line in lines:
        head, sep, tail = line.partition(b" - ")
        fields = head.split(b" ")
        if not sep or len(fields) < 6 or unescape(fields[4]) != mount_point:
            continue
        extra = tail.split(b" ")
        found = set(os.fsdecode(fields[5]).split(","))
        if len(extra) >= 3:
            found |= set(os.fsdecode(extra[2]).split(","))
    return found


def cache_note(share: Share) -> str | None:
    """A note when the mount table shows client caching that delays what a
    query sees (docs/network-shares.md, "What the barrier needs"); None when
    it shows none, or cannot show it (FUSE keeps its cache options to itself)."""
    opts = mount_options(share.mount_point)
    if share.fstype.startswith("nfs"):
        if "nocto" in opts:
            return (
                f"{share.mount_point} is mounted nocto: re-opening a file may not ask "
                "the server, so the share host's answer can be missed"
            )
        return None
    if share.fstype in ("cifs", "smb3"):
        ttl = next((o.split("=", 1)[1] for o in opts if o.startswith("actimeo=")), None)
        if ttl not in (None, "0"):
            return (
                f"{share.mount_point} caches attributes for {ttl} s (actimeo): "
                "changes made elsewhere can stay unseen that long"
            )
    return None


def freshness_reason(
    share: Share, reconcile_ms: float | None, ctime_kept: bool | None = True
) -> str:
    """The honest freshness line: which filesystem, what the answer cost,
    and which change the walk cannot see where the filesystem keeps no
    ctime of its own (`ctime_kept` False; None: it could not be tested:
    ctindex/reconciler/ctime_probe.py)."""
    spent = f"{reconcile_ms:.0f} ms" if reconcile_ms is not None else "?"
    line = f"network filesystem {share.fstype}: reconciled in {spent}"
    if ctime_kept is False:
        return f"{line}; {NO_CTIME}: {UNSEEN}"
    if ctime_kept is None:
        return f"{line}; {CTIME_UNTESTED}: {UNSEEN}"
    return line


NO_CTIME = "no ctime of its own"
CTIME_UNTESTED = "ctime not tested"
# What a walk cannot see without a ctime: size and mtime stay the same.
UNSEEN = (
    "a rewrite of the same size that restores its mtime (cp -p, rsync -a, tar -x)"
    " is not seen (--direct reads the files; a share host daemon sees it)"
)

# An update's note where its walk was ctime-blind (ctime_blind).
BLIND_NOTE = f"the files are seen through a filesystem with {NO_CTIME}: {UNSEEN}"
