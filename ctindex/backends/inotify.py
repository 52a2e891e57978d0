"""Recursive inotify watcher: one watch per non-excluded folder, events to keys.

Translation rules (docs/backends.md has the reasoning):
* a new or moved-in folder gets its watches first and is then reported as a
  dirty folder, so files created before its watch existed are still covered;
* a folder moved inside the tree keeps its watches (they follow the inode) and
  is re-keyed; old and new keys are both dirty;
* a MOVED_FROM whose MOVED_TO never comes (moved out of the tree) is dirty at
  once; its watches are dropped after `move_grace` seconds;
* IN_Q_OVERFLOW, and the loss of a root (deleted, moved, unmounted), become
  `rescan` with a reason; ENOSPC/EMFILE/ENOMEM while adding a watch set
  `degraded` and ask for a rescan of every root;
* a file watch (one per indexed file, within `file_budget`) reports its
  keys for a write through any of the file's names and for a link count
  change; it follows its inode, so the daemon re-points keys after renames
  (watch_files) and a watch whose inode is gone (IN_IGNORED) is dropped;
* one wd never serves both a file and a folder: a file watch made on a name
  that had just become a folder (before its IN_CREATE was read) is taken over
  by the folder watch when that folder is walked, and a file key let go never
  removes the kernel watch of a folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from ctindex.backends import inotify_c as c
from ctindex.backends.base import (
    Batch,
    BatchBuilder,
    Descend,
    join_key,
    key_path,
    normalize_roots,
    root_of,
    under,
)

WATCH_MASK = (
    c.IN_CREATE
    | c.IN_DELETE
    | c.IN_MODIFY
    | c.IN_CLOSE_WRITE
    | c.IN_MOVED_FROM
    | c.IN_MOVED_TO
    | c.IN_ATTRIB
    | c.IN_DELETE_SELF
    | c.IN_MOVE_SELF
    | c.IN_ONLYDIR
    | c.IN_DONT_FOLLOW
    | c.IN_EXCL_UNLINK
)
# The cookie folder only needs to see new names. IN_MASK_ADD keeps a content
# watch intact should a misconfigured plan also watch that folder.
COOKIE_MASK = (
    c.IN_CREATE
    | c.IN_MOVED_TO
    | c.IN_DELETE_SELF
    | c.IN_MOVE_SELF
    | c.IN_ONLYDIR
    | c.IN_DONT_FOLLOW
    | c.IN_MASK_ADD
)
# A watch on one indexed file: writes through *any* of its names (a second
# name made outside every watched folder after the daemon's pass), and
# IN_ATTRIB for the link count moving (inotify(7): link(2)/unlink(2) of
# another name). No IN_EXCL_UNLINK here: on a file watch it would hide a write
# made through an open descriptor whose name was unlinked meanwhile, while
# the indexed name still holds the inode (the kernel tests the writer's
# dentry). IN_DONT_FOLLOW: a symlink put in a key's place is not followed.
FILE_MASK = (
    c.IN_MODIFY
    | c.IN_CLOSE_WRITE
    | c.IN_ATTRIB
    | c.IN_DELETE_SELF
    | c.IN_MOVE_SELF
    | c.IN_DONT_FOLLOW
)
# File watches share fs.inotify.max_user_watches with our folder watches,
# other daemons of the same user and every other inotify user (editors, IDEs).
# So they take at most half of what the folders leave, and never more than
# FILE_WATCHES_MAX (kernel memory: up to ~1 KiB per watch on 64-bit,
# Documentation/admin-guide/sysctl/fs.rst; 64 MiB at the cap).
FILE_WATCHES_MAX = 65_536
MAX_USER_WATCHES = "/proc/sys/fs/inotify/max_user_watches"
FALLBACK_MAX_USER_WATCHES = 8192  # the historical default, when /proc is unreadable


def max_user_watches(path: str = MAX_USER_WATCHES) -> int:
    try:
        with open(path, encoding="ascii") as fh:
            return max(0, int(fh.read().strip()))
    except (OSError, ValueError):
        return FALLBACK_MAX_USER_WATCHES


def file_watch_budget(limit: int, folders: int, cap: int = FILE_WATCHES_MAX) -> int:
    """How many file watches to hold: half of what the folder watches leave
    of the per-user limit (headroom for new folders and other programs),
    at most `cap`."""
    return max(0, min(cap, (limit - folders) // 2))


LIMIT_ERRNOS = {errno.ENOSPC, errno.EMFILE, errno.ENOMEM}
# A folder that vanished or changed kind between the event and our add_watch:
# its parent's events already report it.
GONE_ERRNOS = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES, errno.EPERM}
LOST_RETRY_S = 1.0  # how often a lost root is looked for again (a walk)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


_WD_BITS = 0xFFFF_FFFF  # a wd is a positive C int


def _keys(held: str | frozenset[str]) -> frozenset[str]:
    return frozenset((held,)) if isinstance(held, str) else held


class InotifyWatcher:
    name = "inotify"

    def __init__(
        self,
        base: Path | str,
        roots: Sequence[str],
        descend: Descend,
        cookie_dir: str | None = None,
        *,
        binding: c.Libc | None = None,
        clock: Callable[[], float] = time.monotonic,
        move_grace: float = 0.5,
        file_cap: int | None = None,  # FILE_WATCHES_MAX, looked up when opened
    ) -> None:
        self.base = os.fspath(base)
        self.roots = normalize_roots(roots)
        self.descend = descend
        self.cookie_dir = cookie_dir.strip("/") if cookie_dir is not None else None
        self.reason: str | None = None
        self.degraded: str | None = None
        self._c = binding or c.libc()
        self._clock = clock
        self._grace = move_grace
        self._dirs: dict[int, str] = {}  # wd -> folder key
        self._root_wd: dict[str, int] = {}
        self._lost: dict[str, float] = {}  # root key -> when to look for it again
        self._cookie_wd: int | None = None
        # MOVED_FROM of a folder waiting for its MOVED_TO: cookie -> (key, wds, seen)
        self._moves: dict[int, tuple[str, list[int], float]] = {}
        self._acc = BatchBuilder()  # findings made outside read() (initial walk errors)
        # File watches. One inode may hold several indexed keys (hard links
        # inside the scopes): the kernel gives one wd per inode.
        # wd -> its key, or the frozenset of its keys when the inode has
        # several indexed names (rare: a set per file would double the
        # daemon's memory per indexed file, docs/benchmarks.md).
        self._files: dict[int, str | frozenset[str]] = {}
        # key -> wd | (inode << 32): the inode the caller recorded when the
        # watch was made (0: unknown). A later pass that recorded the same
        # inode needs no add_watch (see watch_files). One int per key: a
        # tuple would cost ~60 B more per indexed file.
        self._file_wd: dict[str, int] = {}
        self._file_cap = FILE_WATCHES_MAX if file_cap is None else file_cap
        self.file_budget = 0  # set once the folders are watched
        self._fd = self._c.init1(c.IN_NONBLOCK | c.IN_CLOEXEC)
        try:
            for root in self.roots:
                self._watch_root(root, self._acc)
            self._watch_cookies()
        except BaseException:
            self.close()
            raise
        self.file_budget = file_watch_budget(
            max_user_watches(), len(self._dirs) + 1, self._file_cap
        )

    # -- public -----------------------------------------------------------
    def fileno(self) -> int | None:
        return self._fd if self._fd >= 0 else None

    def watched(self) -> dict[str, int]:
        """Folder key -> wd of every live content watch (for tests and status)."""
        return {key: wd for wd, key in self._dirs.items()}

    # -- file watches (backends.base.FileWatching) ------------------------------
    def watch_files(self, keys: Iterable[str], inodes: Mapping[str, int] | None = None) -> set[str]:
        new: set[str] = set()
        for key in keys:
            packed = self._file_wd.get(key)
            ino = 0
            if inodes is not None:
                with contextlib.suppress(KeyError):  # one lookup, not get()'s two
                    ino = inodes[key]
            if packed is not None and ino and packed >> 32 == ino:
                # Watched at the inode this pass recorded for the name: no
                # syscall (40,000 re-adds cost a full pass ~0.5-1 s). A name
                # that came to hold another inode has a recorded inode that
                # differs; after lost events (overflow) every known inode is
                # forgotten, so the next pass re-adds every key.
                continue
            if packed is None and len(self._file_wd) >= self.file_budget:
                continue  # over budget: the caller keeps these another way
            path = os.fsencode(key_path(self.base, key))
            try:
                # IN_MASK_ADD: should the name now hold a folder we watch,
                # its mask (a superset of FILE_MASK) is left as it is.
                wd = self._c.add_watch(self._fd, path, FILE_MASK | c.IN_MASK_ADD)
            except OSError as e:
                self._detach(key)  # whatever it pointed at, it is not this name now
                if e.errno in LIMIT_ERRNOS:
                    # The per-user limit is shared: someone else took the
                    # headroom. Hold no more, keep the folder watches working.
                    self.file_budget = len(self._file_wd)
                continue
            if wd in self._dirs or wd == self._cookie_wd:
                # The name now holds a folder we watch (or the cookie folder):
                # never turn that watch into a file watch.
                self._detach(key)
                continue
            old = None if packed is None else packed & _WD_BITS
            if old != wd:
                if old is not None:
                    self._detach(key)
                held = self._files.get(wd)
                if held is None:
                    self._files[wd] = key
                else:
                    self._files[wd] = _keys(held) | {key}
                new.add(key)
            self._file_wd[key] = wd | (ino << 32)
        return new

    def unwatch_files(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._detach(key)

    def watched_files(self) -> AbstractSet[str]:
        return self._file_wd.keys()  # a live view: no copy per pass

    def file_watch_count(self) -> int:
        """Kernel watches held for files (several keys of one inode: one)."""
        return len(self._files)

    def _detach(self, key: str) -> None:
        packed = self._file_wd.pop(key, None)
        if packed is None:
            return
        wd = packed & _WD_BITS
        held = self._files.get(wd)
        if held is None:
            return
        left = _keys(held) - {key}
        if len(left) > 1:
            self._files[wd] = left
        elif left:
            self._files[wd] = next(iter(left))
        else:
            del self._files[wd]
            if wd in self._dirs or wd == self._cookie_wd:
                return  # the inode is a folder we watch: its watch stays (_adopt)
            with contextlib.suppress(OSError):  # EINVAL: its inode is already gone
                self._c.rm_watch(self._fd, wd)

    def _file_event(self, wd: int, mask: int, acc: BatchBuilder) -> None:
        keys = _keys(self._files[wd])
        # Any event on the file itself: content written through some name, a
        # name added or removed (IN_ATTRIB: link count), renamed, deleted.
        # The narrowed pass decides from the file; a rename is also seen by
        # the folder watches, and the pass re-points the keys.
        acc.paths.update(keys)
        if mask & c.IN_IGNORED:  # inode gone (or unmounted): the kernel dropped the watch
            del self._files[wd]
            for key in keys:
                if self._file_wd.get(key, 0) & _WD_BITS == wd:
                    del self._file_wd[key]

    def read(self, timeout: float | None = 0.0) -> Batch:
        if self._fd < 0:
            raise ValueError("watcher is closed")
        acc, self._acc = self._acc, BatchBuilder()
        self._look_for_lost(acc)
        wait = timeout
        if self._moves:  # wake up in time to settle a lone MOVED_FROM
            due = min(seen for _, _, seen in self._moves.values()) + self._grace
            left = max(0.0, due - self._clock())
            wait = left if wait is None else min(wait, left)
        if not (acc.paths or acc.rescan or acc.cookies) and wait != 0:
            select.select([self._fd], [], [], wait)
        overflow = False
        for event in c.read_events(self._fd):
            acc.events += 1
            if event.wd == -1 or event.mask & c.IN_Q_OVERFLOW:
                overflow = True
            else:
                self._translate(event, acc)
        if overflow:
            self._overflowed(acc)
        self._settle_moves(acc)
        return acc.batch()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # drops every watch with it
            self._fd = -1
        self._dirs.clear()
        self._files.clear()
        self._file_wd.clear()

    # -- watches ----------------------------------------------------------
    def _add(self, key: str, acc: BatchBuilder, fd: int) -> int | None:
        """Watch the folder open as `fd` (the very inode verified by the walk,
        through /proc/self/fd, so a folder swapped for a symlink meanwhile is
        never the one watched)."""
        if self.degraded:
            return None
        path = b"/proc/self/fd/%d" % fd
        try:
            wd = self._c.add_watch(self._fd, path, WATCH_MASK & ~c.IN_DONT_FOLLOW)
        except OSError as e:
            if e.errno in LIMIT_ERRNOS:
                self.degraded = (
                    f"watch-limit: {os.strerror(e.errno or 0)} after {len(self._dirs)} watches"
                    " (fs.inotify.max_user_watches)"
                )
                acc.need(self.roots, "watch-limit")
            elif e.errno not in GONE_ERRNOS:
                acc.need([root_of(key, self.roots) or ""], f"error: {e}")
            return None
        self._dirs[wd] = key  # an inode already watched keeps its wd: this re-keys it
        if wd in self._files:
            self._adopt(wd, acc)
        return wd

    def _adopt(self, wd: int, acc: BatchBuilder) -> None:
        """The folder just watched as `wd` already held a file watch.

        watch_files adds by name: when a known file was replaced by a folder
        after the pass read it and before its watch was made (or the folder's
        IN_CREATE was read), the kernel put a file watch on the folder, and
        the add_watch just made returned that same wd (one per inode) with the
        folder's mask in place of the file's. Left in `_files`, the folder's
        events would be read as the file's (a new subfolder never walked) and
        the next pass, no longer recording the key as a file, would unwatch
        it and so remove the folder's only kernel watch: every later change
        inside it would go unheard (docs/backends.md, "File watches"). The
        folder watch takes the wd over; the file's keys are reported, so
        whatever they name now is looked at."""
        keys = _keys(self._files.pop(wd))
        for k in keys:
            if self._file_wd.get(k, 0) & _WD_BITS == wd:
                del self._file_wd[k]
        acc.paths.update(keys)

    def _walk(self, top: str, acc: BatchBuilder) -> None:
        """Watch `top` and every non-excluded folder below it (never via symlinks).

        Every folder is opened relative to its parent's descriptor with
        O_NOFOLLOW, listed through that descriptor and watched through it:
        a rename or symlink swap racing the walk can never make it list or
        watch a folder outside the scope. One descriptor per
        level is open at a time (frames of a depth-first walk)."""
        fd = self._open_key(top, acc)
        if fd is None:
            return
        frames: list[tuple[str, int, list[str]]] = []
        self._enter(top, fd, acc, frames)
        try:
            while frames and not self.degraded:
                key, dfd, names = frames[-1]
                if not names:
                    frames.pop()
                    os.close(dfd)
                    continue
                name = names.pop()
                try:
                    cfd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                except OSError:
                    continue  # vanished, replaced or unreadable: its parent's events report it
                self._enter(join_key(key, name), cfd, acc, frames)
        finally:
            for _, dfd, _ in frames:
                os.close(dfd)

    def _enter(
        self, key: str, fd: int, acc: BatchBuilder, frames: list[tuple[str, int, list[str]]]
    ) -> None:
        """Watch the folder open as `fd`, queue its subfolders; owns `fd`."""
        if self._add(key, acc, fd) is None:
            os.close(fd)
            return
        names = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    child = join_key(key, entry.name)
                    if is_dir and child != self.cookie_dir and self.descend(child):
                        names.append(entry.name)
        except OSError:
            os.close(fd)
            return
        frames.append((key, fd, names))

    def _open_key(self, key: str, acc: BatchBuilder) -> int | None:
        """The folder `key`, opened component by component from the base
        without following any symlink; None when it is not (or no longer) there."""
        try:
            fd = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            self._open_failed(key, e, acc)
            return None
        for comp in key.split("/") if key else ():
            try:
                nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                self._open_failed(key, e, acc)
                return None
            finally:
                os.close(fd)
            fd = nfd
        return fd

    def _open_failed(self, key: str, e: OSError, acc: BatchBuilder) -> None:
        if e.errno not in GONE_ERRNOS:
            acc.need([root_of(key, self.roots) or ""], f"error: {e}")

    def _watch_root(self, root: str, acc: BatchBuilder) -> None:
        self._walk(root, acc)
        wd = next((w for w, k in self._dirs.items() if k == root), None)
        if wd is None:
            if not self.degraded:
                self._lost[root] = self._clock() + LOST_RETRY_S
        else:
            self._root_wd[root] = wd
            self._lost.pop(root, None)

    def _watch_cookies(self) -> None:
        if self.cookie_dir is None or self.degraded:
            return
        path = os.fsencode(key_path(self.base, self.cookie_dir))
        try:
            self._cookie_wd = self._c.add_watch(self._fd, path, COOKIE_MASK)
        except OSError as e:
            if e.errno in LIMIT_ERRNOS:
                self.degraded = f"watch-limit: {os.strerror(e.errno or 0)} (cookie folder)"
                self._acc.need(self.roots, "watch-limit")
            self._cookie_wd = None

    def _forget(self, wds: list[int]) -> None:
        for wd in wds:
            if self._dirs.pop(wd, None) is None:
                continue
            with contextlib.suppress(OSError):  # EINVAL: already gone with its folder
                self._c.rm_watch(self._fd, wd)

    def _subtree(self, key: str) -> list[int]:
        return [wd for wd, k in self._dirs.items() if under(k, key)]

    def _look_for_lost(self, acc: BatchBuilder) -> None:
        now = self._clock()
        for root, when in list(self._lost.items()):
            if now >= when:
                self._watch_root(root, acc)
                if root not in self._lost:
                    acc.need([root], "root-restored")
        # A lost cookie folder is retried on every read: one cheap failing
        # syscall, and a recreated folder answers barriers again at once.
        if self.cookie_dir is not None and self._cookie_wd is None:
            self._watch_cookies()

    def _lose_root(self, root: str, reason: str, acc: BatchBuilder) -> None:
        self._forget(self._subtree(root))
        self._root_wd.pop(root, None)
        self._lost[root] = self._clock() + LOST_RETRY_S
        acc.need([root], reason)

    def _forget_file_inodes(self) -> None:
        """Events were lost (an IN_IGNORED among them, perhaps): the next
        pass re-adds every file watch instead of trusting what it knew."""
        self._file_wd = {k: v & _WD_BITS for k, v in self._file_wd.items()}

    def _overflowed(self, acc: BatchBuilder) -> None:
        # Folders created while events were dropped have no watch yet: re-walk
        # (add_watch on a watched folder just returns its wd).
        acc.need(self.roots, "overflow")
        self._forget_file_inodes()
        self._moves.clear()
        for root in self.roots:
            if root not in self._lost:
                self._walk(root, acc)

    # -- translation ------------------------------------------------------
    def _translate(self, ev: c.Event, acc: BatchBuilder) -> None:
        mask = ev.mask
        if ev.wd in self._files and ev.wd not in self._dirs:  # a folder's wd is never a file's
            self._file_event(ev.wd, mask, acc)
            return
        if ev.wd == self._cookie_wd and ev.wd not in self._dirs:
            if ev.name and mask & (c.IN_CREATE | c.IN_MOVED_TO):
                acc.cookies.add(os.fsdecode(ev.name))
            elif mask & (c.IN_IGNORED | c.IN_DELETE_SELF | c.IN_MOVE_SELF):
                if mask & c.IN_MOVE_SELF:
                    self._forget_cookie_watch()
                self._cookie_wd = None
                return
        parent = self._dirs.get(ev.wd)
        if parent is None:
            return  # a watch we already dropped; its folder was reported then
        if ev.wd == self._cookie_wd and ev.name and mask & (c.IN_CREATE | c.IN_MOVED_TO):
            acc.cookies.add(os.fsdecode(ev.name))
        if mask & (c.IN_IGNORED | c.IN_UNMOUNT | c.IN_DELETE_SELF | c.IN_MOVE_SELF):
            self._self_event(ev.wd, parent, mask, acc)
            return
        if not ev.name:
            return  # attribute change of a watched folder itself: not content
        key = join_key(parent, os.fsdecode(ev.name))
        if not mask & c.IN_ISDIR:
            acc.paths.add(key)
            return
        excluded = key == self.cookie_dir or not self.descend(key)
        if mask & c.IN_MOVED_FROM:
            if not excluded:
                acc.paths.add(key)
                self._moves[ev.cookie] = (key, self._subtree(key), self._clock())
        elif mask & c.IN_MOVED_TO:
            moved = self._moves.pop(ev.cookie, None)
            if excluded:
                if moved:
                    self._forget(moved[1])
                return
            self._walk(key, acc)  # re-keys the moved watches, adds any missing
            if moved:
                self._forget([wd for wd in moved[1] if under(self._dirs.get(wd, ""), moved[0])])
            acc.paths.add(key)
        elif not excluded:
            if mask & c.IN_CREATE:
                self._walk(key, acc)  # watch first, then report: the create-then-fill race
            acc.paths.add(key)

    def _self_event(self, wd: int, key: str, mask: int, acc: BatchBuilder) -> None:
        root = key if self._root_wd.get(key) == wd else None
        if mask & c.IN_UNMOUNT:
            acc.need([root_of(key, self.roots) or key], "unmount")
        if root is None:
            if mask & c.IN_IGNORED:
                self._dirs.pop(wd, None)  # folder deleted: its parent reported it
            return
        if mask & c.IN_MOVE_SELF:
            self._lose_root(root, "root-moved", acc)
        elif mask & c.IN_DELETE_SELF:
            self._lose_root(root, "root-deleted", acc)
        elif mask & c.IN_IGNORED:
            self._lose_root(root, "unmount" if mask & c.IN_UNMOUNT else "watch-removed", acc)

    def _forget_cookie_watch(self) -> None:
        if self._cookie_wd is not None and self._cookie_wd not in self._dirs:
            with contextlib.suppress(OSError):
                self._c.rm_watch(self._fd, self._cookie_wd)

    def _settle_moves(self, acc: BatchBuilder) -> None:
        """A folder moved out of the tree: stop watching it where it went."""
        now = self._clock()
        for cookie, (_key, wds, seen) in list(self._moves.items()):
            if now - seen >= self._grace:
                del self._moves[cookie]
                self._forget(wds)
