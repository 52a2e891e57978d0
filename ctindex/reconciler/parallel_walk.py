"""The tree walk with many metadata requests in flight, for latency-bound filesystems.

On a network filesystem (NFS, SMB, FUSE such as sshfs, 9p) every `openat`,
`getdents` and `fstatat` is a round trip to a server, and the serial walk
(ctindex/reconciler/walk.py) waits for each one in turn: its cost is the number of
requests times the round-trip time, whatever the CPU does. Python threads
help here although the walk itself is Python: the interpreter releases the
GIL during each of these system calls, so N threads keep up to N requests
outstanding and the client's kernel and the server answer them
concurrently (docs/network-shares.md has the measurement).

`ParallelWalker` is the serial `Walker` with one change: the listing and
stat of each folder are made ahead, by a bounded pool of worker threads,
and handed to the unchanged per-folder logic (`Walker._scan`: filter,
"unchanged" rule, dispatch) in the walking thread. `os.DirEntry` caches the
result of `stat()`, so the entries a worker stat'ed cost the walking thread
no further system call, and an entry whose stat failed in the worker is
simply stat'ed again there (same error triage as the serial walk). Every
decision, the file table, the hashing and the callbacks stay in the walking
thread, so the results are those of the serial walk (tests/ctindex/reconciler/test_parallel_walk.py
compares both on the same trees). Folders are still opened relative to
their already-open parent with O_NOFOLLOW, in the worker.

Bounds: `workers` threads (1..MAX_WORKERS); at most `workers * 4` folders
listed ahead (each holds one open fd until the walking thread took it),
so memory and descriptors stay bounded on any tree; a parent's fd is kept
open only until every child folder it announced has been opened.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress

from ctindex.reconciler.report import PassMetrics, WalkReport
from ctindex.reconciler.walk import (
    DEFAULT_MAX_DEPTH,
    DIR_FLAGS,
    FilesFn,
    FsOps,
    KeepFn,
    ListedEntry,
    PathFilter,
    StatFn,
    Unchanged,
    Walker,
    join_key,
)

DEFAULT_WORKERS = 16
MAX_WORKERS = 64
AHEAD_PER_WORKER = 4


class _Listed:
    """One folder opened and listed by a worker (or the error that stopped it)."""

    __slots__ = ("depth", "entries", "error", "fd", "key", "open_error", "parent")

    def __init__(self, parent: _Open | None, key: str, depth: int) -> None:
        self.parent = parent
        self.key = key
        self.depth = depth
        self.fd: int | None = None
        self.entries: list[ListedEntry] | None = None
        self.open_error: OSError | None = None  # opening failed: the folder is not walked
        self.error: OSError | None = None  # listing failed: reported like the serial walk


class _Open:
    """An open folder fd shared by its listing and its children's openat calls."""

    __slots__ = ("close", "fd", "users")

    def __init__(self, fd: int, close: Callable[[int], None]) -> None:
        self.fd = fd
        self.close = close  # FsOps.close: a descriptor, or a path_folders handle
        self.users = 1  # the walking thread's own use; +1 per child not opened yet

    def release(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.close(self.fd)


def _nested(roots: Sequence[str]) -> bool:
    """Whether a root lies inside another (or twice in the list)."""
    known: set[str] = set()
    for root in roots:
        if not root or root in known:
            return True
        known.add(root)
    for root in roots:
        cut = root.rfind("/")
        while cut > 0:
            if root[:cut] in known:
                return True
            cut = root.rfind("/", 0, cut)
    return False


def _prefetch(ops: FsOps, fd: int) -> list[ListedEntry]:
    """List one folder and stat every entry (DirEntry keeps the result)."""
    with ops.scandir(fd) as it:
        entries = list(it)
    for entry in entries:
        with suppress(OSError):  # stat'ed again by the walking thread, which reports it
            entry.stat(follow_symlinks=False)
    return entries


class ParallelWalker(Walker):
    """Walker whose folder listings and stats are made by `workers` threads."""

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
        *,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        super().__init__(
            base, flt, stat, on_files, keep, report, metrics, max_depth, ops, unchanged
        )
        self.workers = max(1, min(int(workers), MAX_WORKERS))
        self._real_ops = self.ops
        self._ready: dict[int, _Listed] = {}
        # Walker._scan lists through self.ops.scandir: hand it the prefetched entries.
        self.ops = FsOps(
            scandir=self._prefetched,
            open=self._real_ops.open,
            close=self._real_ops.close,
            lstat_at=self._real_ops.lstat_at,
        )

    @contextmanager
    def _prefetched(self, fd: int) -> Iterator[Iterator[ListedEntry]]:
        listed = self._ready.pop(fd, None)
        if listed is None:  # not one of ours (a narrowed walk's folder): list it now
            with self._real_ops.scandir(fd) as it:
                yield it
            return
        if listed.error is not None:
            raise listed.error
        yield iter(listed.entries or ())

    def _list(self, item: _Listed, name: str | None) -> _Listed:
        """Worker: open `name` relative to the parent (unless already open; a
        root with neither is opened from the base), list, stat."""
        ops = self._real_ops
        if name is None and item.fd is None:  # a root (walk_roots)
            try:
                item.fd = self._open_root_or_raise(item.key)
            except OSError as exc:
                item.open_error = exc
                return item
        elif name is not None:
            assert item.parent is not None
            try:
                item.fd = ops.open(name, DIR_FLAGS, dir_fd=item.parent.fd)
            except OSError as exc:
                item.open_error = exc
                return item
        assert item.fd is not None
        try:
            item.entries = _prefetch(ops, item.fd)
        except OSError as exc:
            item.error = exc
        return item

    def walk_roots(self, roots: Sequence[str]) -> None:
        """Every root at once when none lies inside another (scope roots
        are usually sibling bundles, and on a share each root's own chain
        of round trips is what a root-by-root walk waits for); otherwise
        root by root, as the serial walk does. Roots are taken in order and
        reported in order: the results are the serial walk's."""
        if len(roots) < 2 or _nested(roots):
            super().walk_roots(roots)
            return
        fresh = [r for r in roots if r not in self.walked]
        self.walked.update(fresh)
        self._walk_all([_Listed(None, r, 0) for r in fresh])

    def _walk_open(self, fd: int, key: str, depth: int, whole: bool = False) -> None:
        """Walk the subtree of the open folder fd (ownership of fd passes
        here); its own threads, whether `whole` or not."""
        if key in self.walked:
            self.ops.close(fd)
            return
        self.walked.add(key)
        root = _Listed(None, key, depth)
        root.fd = fd
        self._walk_all([root])

    def _walk_all(self, roots: list[_Listed]) -> None:
        """Walk the subtrees of `roots` (open, or opened by a worker)."""
        limit = self.workers * AHEAD_PER_WORKER
        # Folders announced but not yet submitted, a stack (depth first, like
        # the serial walk, so few parents stay open at once); each holds a use
        # of its parent until a worker has opened it.
        waiting: list[tuple[_Open, str, str, int]] = []  # (parent, name, key, depth)
        running: deque[Future[_Listed]] = deque()
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="ctindex-walk")
        later = deque(roots)  # roots not submitted yet: after the folders found
        try:
            while later and len(running) < limit:
                running.append(pool.submit(self._list, later.popleft(), None))
            while running:
                item = running.popleft().result()
                if item.parent is not None:
                    item.parent.release()  # opened (or failed): the parent may close
                if item.open_error is not None:
                    if item.parent is None:  # a root, reported as the serial walk does
                        self._root_failed(item.key, item.open_error)
                    else:
                        self.fail(item.key, item.open_error, is_dir=True)
                else:
                    assert item.fd is not None
                    self._take(item, waiting)
                while waiting and len(running) < limit:
                    parent, name, ckey, cdepth = waiting.pop()
                    running.append(pool.submit(self._list, _Listed(parent, ckey, cdepth), name))
                while later and len(running) < limit:
                    running.append(pool.submit(self._list, later.popleft(), None))
        finally:
            for future in running:
                future.cancel()
            pool.shutdown(wait=True)
            for future in running:
                if future.cancelled():
                    continue
                item = future.result()
                if item.fd is not None and item.open_error is None:
                    self.ops.close(item.fd)
                if item.parent is not None:
                    item.parent.release()
            for parent, *_rest in waiting:
                parent.release()
            self._ready.clear()

    def _take(self, item: _Listed, waiting: list[tuple[_Open, str, str, int]]) -> None:
        """The walking thread's share of one listed folder: the serial scan."""
        assert item.fd is not None
        here = _Open(item.fd, self.ops.close)
        self._ready[item.fd] = item
        try:
            subdirs = self._scan(item.fd, item.key)
        finally:
            self._ready.pop(item.fd, None)
        children: list[tuple[_Open, str, str, int]] = []
        for name in subdirs:
            ckey = join_key(item.key, name)
            if ckey in self.walked:
                continue
            if item.depth + 1 > self.max_depth:
                self.report.too_deep.add(ckey)
                self.keep(ckey)
                continue
            self.walked.add(ckey)
            here.users += 1
            children.append((here, name, ckey, item.depth + 1))
        waiting.extend(reversed(children))
        here.release()  # our own use: the queued children keep it open
