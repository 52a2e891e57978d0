"""Iterative, symlink-proof tree walk that hands accepted regular files to a callback.

Every folder is opened relative to its already-open parent with
O_DIRECTORY|O_NOFOLLOW, so a folder swapped for a symlink mid-walk fails to
open instead of leading outside the root, and path length never limits depth.
The open folders form an explicit stack (one fd per level), never Python
recursion. Files are handed over together with their parent's fd so the
hasher can open them relative to it as well.

Where the platform has no ``dir_fd`` (Windows; the ``no-dir-fd`` simulation)
FsOps defaults to ctindex/reconciler/path_folders.py: the same walk over folder
handles that name (path, device, inode), checked by lstat before and after
(docs/decisions/portability.md).
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ctindex.reconciler import path_folders, scan_ahead
from ctindex.reconciler.manifest import RawEntry
from ctindex.reconciler.native import CODE_DIRHINT, CODE_DONE, CODE_LINKED, NativeTable, encode_key
from ctindex.reconciler.oserr import DENIED, GONE
from ctindex.reconciler.platform_features import has_dir_fd
from ctindex.reconciler.report import PassMetrics, WalkReport
from ctindex.reconciler.scan_ahead import Ahead, ScanAhead

StatFn = Callable[[str], os.stat_result]
# on_files(parent_fd, [(name, key, st), ...]): the accepted regular files of one folder,
# handed over in one batch while the folder is open (one call per folder, not per file).
FileBatch = list[tuple[str, str, os.stat_result]]
FilesFn = Callable[[int, FileBatch], None]
# keep(key): previous entries at or under key must be carried over (we could not look)
KeepFn = Callable[[str], None]


@dataclass
class Unchanged:
    """The differ's "unchanged without reading" rule, applied inside the listing loop.

    Checking the fingerprint where the stat is made saves a tuple, a list
    append and a second loop per file (measured in docs/decisions/walk.md);
    only files that fail the check are handed to on_files, which applies the
    full rule again. Must stay identical to _Pass.on_files in diff.py.
    """

    previous: dict[str, RawEntry]
    granularity_ns: int
    seen: list[str]
    count: int = 0


@dataclass
class NativeScan:
    """The same rule applied by the native folder scan (ctindex/reconciler/_native.c)
    against the previous table in place: `seen` holds one byte per table
    entry, set for each entry trusted as unchanged; `trusted` counts them.

    The scan skips the path filter for a key the previous table holds with
    an unchanged full fingerprint: that table was built by this same filter
    (the caller vouches for it, reconcile(trust_filter=True)), and accept()
    decides on the key and the size alone, both unchanged.
    """

    table: NativeTable
    seen: bytearray
    granularity_ns: int
    trusted: int = 0


S_IFMT = 0o170000  # inline mode tests: the hot loop runs once per entry
S_IFREG, S_IFDIR, S_IFLNK = stat_mod.S_IFREG, stat_mod.S_IFDIR, stat_mod.S_IFLNK
# O_NOFOLLOW and O_CLOEXEC do not exist on Windows (its descriptors are not
# inherited by default; path_folders refuses reparse points itself).
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
ROOT_FLAGS = os.O_RDONLY | path_folders.WANT_DIR | CLOEXEC
DIR_FLAGS = ROOT_FLAGS | NOFOLLOW
DEFAULT_MAX_DEPTH = 512


class PathFilter(Protocol):
    def roots(self) -> Sequence[str]: ...  # base-relative keys of folders to walk ("" = base)
    def descend(self, key: str) -> bool: ...  # False prunes the folder
    def accept(self, key: str, st: os.stat_result) -> bool: ...  # regular file may enter


def _lstat_at(name: str, *, dir_fd: int) -> os.stat_result:
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


class ListedEntry(Protocol):
    """What a folder listing yields: os.DirEntry, or path_folders.Entry
    where there is no dir_fd."""

    @property
    def name(self) -> str: ...
    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result: ...
    def is_dir(self, *, follow_symlinks: bool = True) -> bool: ...


# Lists the folder a handle names: entered, it yields the entries.
Scandir = Callable[[int], AbstractContextManager[Iterator[ListedEntry]]]
_Op = TypeVar("_Op", bound=Callable[..., object])


def _pick(with_dir_fd: _Op, without: _Op) -> _Op:
    return with_dir_fd if has_dir_fd() else without


def _listing() -> Scandir:
    # Not _pick: the two listings share no type but Scandir.
    return os.scandir if has_dir_fd() else path_folders.scandir


@dataclass
class FsOps:
    """The listing/opening primitives; tests swap them to simulate EACCES as root.

    The defaults are the dir_fd primitives, or path_folders' where there is
    no dir_fd (chosen when the FsOps is made, so the simulation applies)."""

    scandir: Scandir = field(default_factory=_listing)
    open: Callable[..., int] = field(default_factory=lambda: _pick(os.open, path_folders.open_at))
    close: Callable[[int], None] = field(
        default_factory=lambda: _pick(os.close, path_folders.close)
    )
    lstat_at: Callable[..., os.stat_result] = field(
        default_factory=lambda: _pick(_lstat_at, path_folders.lstat_at)
    )


def record_failure(report: WalkReport, key: str, exc: OSError, is_dir: bool) -> bool:
    """File `exc` (met opening or reading `key`) in the report's bucket for
    it. True if the entry is still there and its previous state must be
    kept; False if it is gone, which is the truth (its entries go)."""
    code = exc.errno
    if code in GONE:
        report.vanished.add(key)
        return False
    if code in DENIED:
        (report.unreadable_dirs if is_dir else report.unreadable_files).add(key)
    elif code == errno.ENAMETOOLONG:
        report.too_deep.add(key)
    else:
        report.errors.add(f"{key}: {exc.strerror or exc}")
    return True


def join_key(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


class Walker:
    def __init__(
        self,
        base: str,
        flt: PathFilter,
        stat: StatFn,
        on_files: FilesFn,
        keep: KeepFn,
        report: WalkReport,
        metrics: PassMetrics,
        max_depth: int = DEFAULT_MAX_DEPTH,
        ops: FsOps | None = None,
        unchanged: Unchanged | None = None,
        native: NativeScan | None = None,
    ) -> None:
        self.base = base
        self.flt = flt
        self.stat = stat
        # With the default lstat, DirEntry.stat / fstatat relative to the open folder is
        # the same syscall without re-resolving the path; any injected stat gets the path.
        self.fast_stat = stat is os.lstat
        # Only with the default stat: an injected view goes through on_files whole.
        self.unchanged = unchanged if self.fast_stat else None
        self.on_files = on_files
        self.keep = keep
        self.report = report
        self.metrics = metrics
        self.max_depth = max_depth
        self.ops = ops or FsOps()
        # The native scan lists folders itself: only with the default stat and listing.
        self.native = native if self.fast_stat and self.ops.scandir is os.scandir else None
        self.walked: set[str] = set()
        self.visited_files: set[str] = set()  # narrowed walks may reach a file via two roots
        # Accepted files with more than one name: a write through another name
        # (possibly one no watcher sees) changes them, so callers that vouch
        # for "unchanged" between passes must re-check these (docs/reliability.md).
        self.linked: list[str] = []

    # -- error triage ---------------------------------------------------------
    def fail(self, key: str, exc: OSError, is_dir: bool, quiet_gone: bool = False) -> None:
        if exc.errno in GONE and quiet_gone:
            return
        if record_failure(self.report, key, exc, is_dir):
            self.keep(key)

    def abspath(self, key: str) -> str:
        return os.path.join(self.base, key) if key else self.base

    def _open_dir(
        self, parent_fd: int, name: str, key: str, quiet_gone: bool = False
    ) -> int | None:
        try:
            return self.ops.open(name, DIR_FLAGS, dir_fd=parent_fd)
        except OSError as exc:
            self.fail(key, exc, is_dir=True, quiet_gone=quiet_gone)
            return None

    def _open_root(self, root: str) -> int | None:
        """Open base, then each component of root without following symlinks."""
        try:
            return self._open_root_or_raise(root)
        except OSError as exc:
            self._root_failed(root, exc)
            return None

    def _open_root_or_raise(self, root: str) -> int:
        """_open_root's opens alone (OSError for the caller to report)."""
        ops = self.ops
        fd = ops.open(self.base, ROOT_FLAGS)
        for comp in root.split("/") if root else ():
            try:
                nfd = ops.open(comp, DIR_FLAGS, dir_fd=fd)
            finally:
                ops.close(fd)
            fd = nfd
        return fd

    def _root_failed(self, root: str, exc: OSError) -> None:
        if exc.errno in GONE:  # missing, a symlink or not a folder
            self.report.missing_roots.add(root or ".")
        else:
            self.fail(root, exc, is_dir=True)

    # -- listing ----------------------------------------------------------------
    def _scan(self, fd: int, key: str, ahead: Ahead | None = None) -> list[str]:
        """List one open folder: dispatch files, return the names of folders
        to descend. `ahead`: the folder as ScanAhead opened (and maybe scanned) it."""
        if self.native is not None:
            return self._scan_native(fd, key, self.native, ahead)
        m = self.metrics
        m.dirs_visited += 1
        try:
            with self.ops.scandir(fd) as it:
                entries = list(it)
        except OSError as exc:
            self.fail(key, exc, is_dir=True)
            return []
        m.entries_visited += len(entries)
        subdirs: list[str] = []
        files: FileBatch = []
        flt, fast = self.flt, self.fast_stat
        prefix = f"{key}/" if key else ""
        undecodable = self.report.undecodable
        unch = self.unchanged
        if unch is not None:
            prev_get, gran, seen = unch.previous.get, unch.granularity_ns, unch.seen.append
        trusted = 0
        linked = self.linked.append
        for entry in entries:
            name = entry.name
            ckey = prefix + name
            if not name.isascii():
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:
                    undecodable.add(ckey)  # kept as surrogate escapes, only reported
            try:
                st = entry.stat(follow_symlinks=False) if fast else self.stat(f"{self.base}/{ckey}")
            except OSError as exc:
                self.fail(ckey, exc, is_dir=entry.is_dir(follow_symlinks=False))
                continue
            fmt = st.st_mode & S_IFMT
            if fmt == S_IFREG:
                if flt.accept(ckey, st):
                    if st.st_nlink > 1:
                        linked(ckey)
                    if unch is not None:
                        p = prev_get(ckey)
                        if (
                            p is not None
                            and p[0] == st.st_size
                            and p[1] == st.st_mtime_ns
                            and p[2] == st.st_ctime_ns
                            and p[3] == st.st_ino
                            and p[4] == st.st_dev
                            and p[6] - p[1] >= gran
                            and p[6] - p[2] >= gran
                        ):
                            seen(ckey)
                            trusted += 1
                            continue
                    files.append((name, ckey, st))
                else:
                    m.bump("rejected")
            elif fmt == S_IFDIR:
                if flt.descend(ckey):
                    subdirs.append(name)
                else:
                    m.bump("pruned")
            elif fmt == S_IFLNK:
                m.bump("symlinks")
            else:
                m.bump("other")
        if unch is not None:
            unch.count += trusted
        if files:
            self.on_files(fd, files)
        return subdirs

    def _scan_native(self, fd: int, key: str, nat: NativeScan, ahead: Ahead | None) -> list[str]:
        """_scan with the listing, stat and unchanged check done in C: only
        folders, files that differ, failed stats and trusted files Python must
        report (a non-ASCII name, more than one link) come back, in listing
        order, so every report and list matches the pure path's."""
        m = self.metrics
        m.dirs_visited += 1
        try:
            if ahead is not None and ahead.error is not None:
                raise ahead.error
            if ahead is not None and ahead.result is not None:
                entries, trusted, symlinks, other, pending = ahead.result
            else:
                entries, trusted, symlinks, other, pending = nat.table.scan(
                    fd, encode_key(key), nat.seen, nat.granularity_ns
                )
        except OSError as exc:
            self.fail(key, exc, is_dir=True)
            return []
        m.entries_visited += entries
        nat.trusted += trusted
        if symlinks:
            m.bump("symlinks", symlinks)
        if other:
            m.bump("other", other)
        subdirs: list[str] = []
        files: FileBatch = []
        prefix = f"{key}/" if key else ""
        for name, code in pending:
            ckey = prefix + name
            if not name.isascii():
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:
                    self.report.undecodable.add(ckey)
            if code & CODE_DONE:
                if code & CODE_LINKED:
                    self.linked.append(ckey)
                continue
            # Stat again: the pure path's per-entry rule, on what is there now.
            try:
                st = self.ops.lstat_at(name, dir_fd=fd)
            except OSError as exc:
                self.fail(ckey, exc, is_dir=bool(code & CODE_DIRHINT))
                continue
            fmt = st.st_mode & S_IFMT
            if fmt == S_IFREG:
                if self.flt.accept(ckey, st):
                    if st.st_nlink > 1:
                        self.linked.append(ckey)
                    files.append((name, ckey, st))  # on_files applies the full rule
                else:
                    m.bump("rejected")
            elif fmt == S_IFDIR:
                if self.flt.descend(ckey):
                    subdirs.append(name)
                else:
                    m.bump("pruned")
            elif fmt == S_IFLNK:
                m.bump("symlinks")
            else:
                m.bump("other")
        if files:
            self.on_files(fd, files)
        return subdirs

    def _walk_open(self, fd: int, key: str, depth: int, whole: bool = False) -> None:
        """Walk the subtree of the open folder fd (ownership of fd passes
        here). `whole`: a root's whole walk, worth scanning ahead on a
        second thread (ctindex/reconciler/scan_ahead.py); a narrowed walk's
        few folders are not."""
        if key in self.walked:
            self.ops.close(fd)
            return
        self.walked.add(key)
        ahead = (
            ScanAhead(
                self.native.table,
                self.native.seen,
                self.native.granularity_ns,
                self._open_ahead,
                self.ops.close,
            )
            if whole and self.native is not None and scan_ahead.ENABLED
            else None
        )
        # A folder is on the stack (so closed on the way out) before it is
        # scanned: a scan that raises (an interrupt in on_files) leaks nothing.
        stack: list[tuple[int, str, int, list[str]]] = [(fd, key, depth, [])]
        try:
            subdirs = self._scan(fd, key)
            stack[-1][3].extend(reversed(subdirs))
            self._offer(ahead, fd, key, depth, subdirs)
            while stack:
                pfd, pkey, pdepth, todo = stack[-1]
                if not todo:
                    stack.pop()
                    self.ops.close(pfd)
                    continue
                name = todo.pop()
                ckey = join_key(pkey, name)
                if ckey in self.walked:
                    continue
                if pdepth + 1 > self.max_depth:
                    self.report.too_deep.add(ckey)
                    self.keep(ckey)
                    continue
                got = ahead.take(ckey) if ahead is not None else None
                if got is None:
                    cfd = self._open_dir(pfd, name, ckey)
                elif got.fd is None:
                    assert got.error is not None  # reported here, where it always was
                    self.fail(ckey, got.error, is_dir=True)
                    cfd = None
                else:
                    cfd = got.fd
                if cfd is None:
                    continue
                self.walked.add(ckey)
                stack.append((cfd, ckey, pdepth + 1, []))
                subdirs = self._scan(cfd, ckey, got)
                stack[-1][3].extend(reversed(subdirs))
                self._offer(ahead, cfd, ckey, pdepth + 1, subdirs)
        finally:
            if ahead is not None:
                ahead.close()
            for sfd, *_ in stack:
                self.ops.close(sfd)

    def _open_ahead(self, name: str, parent_fd: int) -> int:
        return self.ops.open(name, DIR_FLAGS, dir_fd=parent_fd)

    def _offer(
        self, ahead: ScanAhead | None, fd: int, key: str, depth: int, subdirs: list[str]
    ) -> None:
        """Hand the sub-folders the walk will enter next to the scan ahead
        (those it would open: not walked already, not too deep)."""
        if ahead is None or depth + 1 > self.max_depth:
            return
        children = ((name, join_key(key, name)) for name in subdirs)
        ahead.offer(fd, [(name, ckey) for name, ckey in children if ckey not in self.walked])

    # -- entry points -----------------------------------------------------------
    def walk_roots(self, roots: Sequence[str]) -> None:
        """Every root, in order (a nested root already walked under its
        parent is not walked again)."""
        for root in roots:
            self.walk_root(root)

    def walk_root(self, root: str) -> None:
        if root in self.walked:
            return
        fd = self._open_root(root)
        if fd is not None:
            self._walk_open(fd, root, 0, whole=True)

    def walk_path(self, root: str, key: str) -> None:
        """Narrowed walk: only `key` (a file or a folder subtree) strictly under `root`.

        Applies the same rules the full walk would have applied on the way down
        (descend() on every folder, no symlinks, depth limit), so both agree.
        """
        fd = self._open_root(root)
        if fd is None:
            return
        comps = key[len(root) + 1 :].split("/") if root else key.split("/")
        cur = root
        try:
            for depth, comp in enumerate(comps, start=1):
                cur = join_key(cur, comp)
                if depth < len(comps):  # an ancestor folder of key
                    if not self.flt.descend(cur):
                        return
                    if depth > self.max_depth:
                        self.report.too_deep.add(cur)
                        self.keep(cur)
                        return
                    nfd = self._open_dir(fd, comp, cur, quiet_gone=True)
                    self.ops.close(fd)
                    fd = nfd
                    if fd is None:
                        return
                    continue
                self._visit_last(fd, comp, cur, depth)
        finally:
            if fd is not None:
                self.ops.close(fd)

    def _visit_last(self, fd: int, name: str, key: str, depth: int) -> None:
        self.metrics.entries_visited += 1
        try:
            if self.fast_stat:
                st = self.ops.lstat_at(name, dir_fd=fd)
            else:
                st = self.stat(self.abspath(key))
        except OSError as exc:
            self.fail(key, exc, is_dir=False, quiet_gone=True)
            return
        mode = st.st_mode
        if stat_mod.S_ISREG(mode):
            if key in self.visited_files:
                return
            self.visited_files.add(key)
            if self.flt.accept(key, st):
                if st.st_nlink > 1:
                    self.linked.append(key)
                self.on_files(fd, [(name, key, st)])
            else:
                self.metrics.bump("rejected")
        elif stat_mod.S_ISDIR(mode) and self.flt.descend(key):
            if depth > self.max_depth:
                self.report.too_deep.add(key)
                self.keep(key)
                return
            cfd = self._open_dir(fd, name, key, quiet_gone=True)
            if cfd is not None:
                self._walk_open(cfd, key, depth)
