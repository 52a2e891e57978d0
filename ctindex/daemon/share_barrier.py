"""The barrier through the share: the share host's side (docs/network-shares.md).

A client on another host cannot reach this daemon's socket, but it can
write into the store: it renames a request into `.ct/okf/barrier/`
(ctindex/client/share.py; the format is ctindex/ipc/share_channel.py).
This daemon watches that folder with a watcher of its own; a request it
sees was created on the server after every change that reached the server
before it. The request then becomes an ordinary
barrier (ctindex/daemon/barrier.py): a local cookie in the runtime folder,
seen back through the main watcher, proves every event queued before it has
been read, the dirty set is applied, and the answer — generation, manifest
identity, plan digest, this host's name and heartbeat — is written into the
request's own file (a sibling, then renamed over it: a reader never sees
half an answer).

An `update` or `rebuild` asked the same way is handed to the share's
update queue (ctindex/daemon/share_updates.py), which answers into the
request's file the same way once its run is done, and rewrites it with a
progress record every beat until then (`mark`).

The heartbeat record `host.json` is rewritten every beat; a client that
finds it absent or old does not ask. Old request and answer files are
collected on every beat, and no more than IN_FLIGHT requests are served at
once (a flood is deleted, oldest first): the folder never grows without
bound, whoever writes into it.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import selectors
import stat
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path

from ctindex.backends.base import Watcher
from ctindex.base.durable import WriteFailed, atomic_write
from ctindex.base.jsontypes import JSONObject
from ctindex.ipc.share_channel import (
    BARRIER,
    FIELD_MAX,
    FOLDER,
    HEARTBEAT,
    HEARTBEAT_LIMIT,
    REQUEST,
    WORKING,
    WRITE_SLOT,
    Request,
    hostname,
    pad,
    parse,
    parse_request,
    read_slot,
    slot_for,
)
from ctindex.reconciler.platform_features import has_dir_fd

SHARE_KEY = "share"  # the selector key of the request folder's watcher
BARRIERS_KEPT = 256  # barrier times the heartbeat's median is taken over
IN_FLIGHT = 64  # requests served at once; more wait their turn (`waiting`)
KEEP_FILES = 256  # request-like files left in the folder after a beat's collection
MAX_AGE_S = 10.0  # an older request or answer is nobody's any more
ANSWER_TMP = ".ans-"  # `<request>.ans-<instance>`: an answer being written
HEARTBEAT_TMP = HEARTBEAT + ".tmp"
REASON_MAX = 160  # characters of a reason kept in an answer (the slot is fixed)
# Bytes of a request's name: longer is dropped as malformed (the answer's
# temporary name adds ~30 bytes, and must stay under the system's NAME_MAX).
NAME_BOUND = 128
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

Starter = Callable[["ShareRequest", Mapping[str, object], float], None]
WriteStarter = Callable[["ShareRequest", Request, float], None]
Logger = Callable[..., None]  # (event, **fields): one line in the daemon's log
Opener = Callable[[str], Watcher]  # folder key -> a watcher of it (cookies only)


class ShareRequest:
    """One client's request: answered by writing into its file. Stands where
    the barrier keeps a socket connection (`request` is what it asked)."""

    def __init__(
        self, host: ShareHost, name: str, token: str, request: JSONObject, op: str = BARRIER
    ) -> None:
        self.host = host
        self.name = name
        self.token = token
        self.request = request
        self.op = op
        self.slot = slot_for(op)  # the answer fills the request's own size

    def respond(self, answer: dict[str, object]) -> None:
        self.host.respond(self, answer)


class ShareHost:
    def __init__(
        self,
        root: Path,
        index_dir: Path,
        instance: str,
        opener: Opener,
        start: Starter,
        wall: Callable[[], float],
        build: str = "",
        *,
        start_write: WriteStarter | None = None,
        log: Logger | None = None,
    ) -> None:
        self.root = root
        self.start_write = start_write  # None: updates through the share are refused
        self.log = log
        self.build = build
        self.folder = index_dir / FOLDER
        self.index_dir = index_dir
        self.instance = instance
        self.opener = opener
        self.start = start
        self.wall = wall
        self.host = hostname()
        self.pid = os.getpid()
        self.watcher: Watcher | None = None
        self.pending: dict[str, ShareRequest] = {}
        # Requests beyond IN_FLIGHT, oldest first, taken as slots free (a
        # burst of clients is answered, not dropped); at most KEEP_FILES,
        # the folder's own bound, so the queue is bounded whoever writes.
        self.waiting: dict[str, None] = {}
        self.file_mode = 0o600
        self.last_beat: float | None = None
        self.budget_ms: int | None = None
        self.answered = 0
        # The last barriers answered through the share, for the heartbeat's
        # median (a client's `status` shows it).
        self.barrier_ms: collections.deque[float] = collections.deque(maxlen=BARRIERS_KEPT)
        self.dropped = 0
        # Requests deleted since the last beat, by why (one log line a beat).
        self.dropped_since: dict[str, int] = {}
        self._fd: int | None = None
        # The folder as opened: every file operation goes through this
        # descriptor (None without descriptor-relative calls), and each beat
        # checks the path still names this folder (dev, ino): a client may
        # swap the folder, or `.ct/okf`, for a link to any other folder.
        self._dir: int | None = None
        self._ident: tuple[int, int] | None = None
        self._sel: selectors.BaseSelector | None = None

    # -- lifecycle ----------------------------------------------------------------

    def open(self, sel: selectors.BaseSelector) -> None:
        """Create the folder (modes follow the store's, so every client able
        to read the index can ask), watch it, and take requests already there.
        Raises OSError (a read-only store: nobody can ask through it)."""
        folder_mode, self.file_mode = _modes(os.stat(self.index_dir))
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.folder, folder_mode)
        found = os.lstat(self.folder)
        if not stat.S_ISDIR(found.st_mode):
            raise NotADirectoryError(f"{self.folder}: not a folder")
        if stat.S_IMODE(found.st_mode) != folder_mode:
            os.chmod(self.folder, folder_mode)
        self._hold(found)
        self._sel = sel
        key = os.path.relpath(self.folder, self.root).replace(os.sep, "/")
        self.watcher = self.opener(key)
        self._fd = self.watcher.fileno()
        if self._fd is not None:
            sel.register(self._fd, selectors.EVENT_READ, SHARE_KEY)
        self.beat()
        with contextlib.suppress(OSError):
            self._take(sorted(self._listdir()), self.wall())

    def _hold(self, found: os.stat_result) -> None:
        """Open the folder just checked, never through a link, and keep it."""
        self._ident = (found.st_dev, found.st_ino)
        if not has_dir_fd():
            return  # paths, checked against the identity before each beat
        flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
        fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for name in Path(os.path.relpath(self.folder, self.root)).parts:
                child = os.open(name, flags, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError:
            os.close(fd)
            raise
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._ident:
            os.close(fd)
            raise NotADirectoryError(f"{self.folder}: replaced while opened")
        self._dir = fd

    def _same_folder(self) -> bool:
        """The folder's path still names the folder opened (nothing on the
        way, `.ct`, `okf` or the folder itself, swapped for a link)."""
        if self._ident is None:
            return False
        try:
            found = os.lstat(self.folder)
            if not stat.S_ISDIR(found.st_mode):
                return False
            current = os.fstat(self._dir) if self._dir is not None else None
        except OSError:
            return False
        held = (current.st_dev, current.st_ino) if current is not None else self._ident
        return (found.st_dev, found.st_ino) == self._ident == held

    def _follow_store_mode(self) -> None:
        """The index folder's mode can change while the daemon serves (its
        first pass makes `.ct/okf` 2770 for a project that shares its index
        with a group, after the folder here was made): the folder and every
        file written from now on follow it, so the group can go on asking."""
        try:
            folder_mode, self.file_mode = _modes(os.stat(self.index_dir))
            held = os.fstat(self._dir) if self._dir is not None else os.lstat(self.folder)
            if stat.S_IMODE(held.st_mode) != folder_mode:
                if self._dir is not None:
                    os.fchmod(self._dir, folder_mode)
                else:  # (beat checked just before that the path is the folder held)
                    os.chmod(self.folder, folder_mode)
        except OSError:
            pass  # the next beat tries again; a folder that went is _lost's case

    def _lost(self) -> None:
        """The folder was swapped: stop serving the share (clients see no
        heartbeat and fall back) rather than follow the link anywhere."""
        if self.log is not None:
            self.log("share-barrier-off", error=f"{self.folder}: no longer the folder opened")
        self.pending.clear()
        self._ident = None
        if self._sel is not None:
            self.close(self._sel)

    def close(self, sel: selectors.BaseSelector) -> None:
        """Stop serving: unregister, and remove the heartbeat if it is ours
        (clients then fall back at once, without waiting for it to age)."""
        if self._fd is not None:
            with contextlib.suppress(KeyError, ValueError):
                sel.unregister(self._fd)
            self._fd = None
        if self.watcher is not None:
            with contextlib.suppress(Exception):
                self.watcher.close()
            self.watcher = None
        if self._ident is not None and self._same_folder():
            with contextlib.suppress(OSError):
                doc = parse(self._read(HEARTBEAT, HEARTBEAT_LIMIT))
                if doc is not None and doc.get("instance") == self.instance:
                    self._remove(HEARTBEAT)
        self._ident = None
        if self._dir is not None:
            os.close(self._dir)
            self._dir = None

    @property
    def polled(self) -> bool:
        """A watcher without an fd (the poll lane): the loop reads it itself."""
        return self.watcher is not None and self._fd is None

    # -- requests -----------------------------------------------------------------

    def read(self) -> None:
        """New names in the folder: start a barrier for each complete request."""
        if self.watcher is None or self._ident is None:
            return
        batch = self.watcher.read(0.0)
        names = sorted(batch.cookies)
        if batch.rescan:  # the watcher lost track: look at the folder itself
            with contextlib.suppress(OSError):
                names = sorted(self._listdir())
        self._take(names, self.wall())

    def take_waiting(self) -> None:
        """Start the requests that waited for a slot, oldest first (after
        answers freed slots: each answer's rename wakes the folder's watcher,
        and every beat calls this too)."""
        while self.waiting and len(self.pending) < IN_FLIGHT and self._ident is not None:
            name = next(iter(self.waiting))
            del self.waiting[name]
            self._take([name], self.wall(), queued=True)

    def _take(self, names: list[str], now: float, *, queued: bool = False) -> None:
        if not queued:
            self.take_waiting()
        for name in names:
            if not name.endswith(REQUEST) or name in self.pending:
                continue  # ours (an answer written, the heartbeat) or one being written
            if name in self.waiting and not queued:
                continue
            if len(os.fsencode(name)) > NAME_BOUND:
                self._drop(name, "malformed")  # its answer's temporary name would not fit
                continue
            if len(self.pending) >= IN_FLIGHT:
                if len(self.waiting) < KEEP_FILES:
                    self.waiting[name] = None
                else:
                    self._drop(name, "over_cap")
                continue
            try:
                doc = parse(self._read(name, WRITE_SLOT))
            except OSError:
                continue  # gone already (its client gave up), or not a file
            if doc is not None and ("ok" in doc or WORKING in doc):
                continue  # an answer or progress record of ours: its client reads it
            req = parse_request(doc) if doc is not None else "not a JSON object"
            if isinstance(req, str) or (req.op != BARRIER and self.start_write is None):
                self._drop(name, "malformed")  # nobody waits for an answer to it
                continue
            share_req = ShareRequest(self, name, req.token, doc or {}, req.op)
            self.pending[name] = share_req
            if req.op == BARRIER:
                self.start(share_req, doc or {}, now)
            else:
                assert self.start_write is not None
                self.start_write(share_req, req, now)

    def respond(self, req: ShareRequest, answer: dict[str, object]) -> None:
        """Write `answer` into the request's file: a sibling, then a rename."""
        self.pending.pop(req.name, None)
        if self._ident is None or not self._exists(req.name):
            return  # its client gave up and removed it: no stray answer
        doc = {
            **answer,
            "token": req.token,
            "host": self.host,
            "pid": self.pid,
            "heartbeat": self.last_beat,
            "build": self.build,
        }
        if self._replace(req, _fit(doc, req.slot)):
            self.answered += 1
            took = answer.get("barrier_ms")
            if answer.get("ok") is True and isinstance(took, (int, float)):
                self.barrier_ms.append(float(took))

    def mark(self, req: ShareRequest, record: dict[str, object]) -> bool:
        """Rewrite a waiting request's file with a progress record (its
        client waits while these change); False when the file is gone: its
        client gave up (Ctrl-C, its bound)."""
        if req.name not in self.pending or not self._exists(req.name):
            return False
        doc = {**record, "token": req.token, "host": self.host, "heartbeat": self.last_beat}
        return self._replace(req, _fit(doc, req.slot))

    def forget(self, req: ShareRequest) -> None:
        """A request nobody waits for any more (its file is gone)."""
        self.pending.pop(req.name, None)

    def _replace(self, req: ShareRequest, data: bytes) -> bool:
        """`data` into the request's file: a sibling, then a rename."""
        tmp = f"{req.name}{ANSWER_TMP}{self.instance}-{os.urandom(4).hex()}"
        try:
            self._write(req.name, data, tmp)
        except WriteFailed:
            return False
        return True

    def _drop(self, name: str, why: str) -> None:
        self.dropped += 1
        self.dropped_since[why] = self.dropped_since.get(why, 0) + 1
        self._remove(name)

    # -- heartbeat and collection -------------------------------------------------

    def beat(self, budget_ms: int | None = None) -> None:
        """Rewrite the heartbeat record, then collect old files. `budget_ms`:
        the plan's share_barrier_ms, for clients that ask before loading it."""
        if self._ident is None:
            return  # not serving (never opened, or the folder was swapped)
        if not self._same_folder():
            self._lost()
            return
        self._follow_store_mode()
        now = self.wall()
        if budget_ms is not None:
            self.budget_ms = budget_ms
        record = {
            "host": self.host,
            "pid": self.pid,
            "instance": self.instance,
            "wall": now,
            "share_barrier_ms": self.budget_ms,
            "version": 1,
            "build": self.build[:FIELD_MAX],
            "barrier_p50_ms": round(statistics.median(self.barrier_ms), 3)
            if self.barrier_ms
            else None,
        }
        tmp = f"{HEARTBEAT_TMP}-{os.urandom(4).hex()}"
        with contextlib.suppress(WriteFailed):
            self._write(HEARTBEAT, pad(record), tmp)
            self.last_beat = now
        self.collect(now)
        self.take_waiting()
        if self.dropped_since and self.log is not None:
            # A flood or junk costs one line a beat, whatever its size.
            self.log("share-requests-dropped", **self.dropped_since)
        self.dropped_since = {}

    def collect(self, now: float) -> int:
        """Delete request and answer files older than MAX_AGE_S, then the
        oldest beyond KEEP_FILES; returns how many were deleted."""
        try:
            entries = self._scandir()
        except OSError:
            return 0
        kept: list[tuple[float, str]] = []
        removed = 0
        for entry in entries:
            if entry.name == HEARTBEAT or entry.name in self.pending:
                continue
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            if now - mtime > MAX_AGE_S:
                removed += self._unlink(entry.name)
            else:
                kept.append((mtime, entry.name))
        if len(kept) > KEEP_FILES:
            kept.sort()
            for _mtime, name in kept[: len(kept) - KEEP_FILES]:
                removed += self._unlink(name)
        return removed

    def _unlink(self, name: str) -> int:
        return 1 if self._remove(name) else 0

    # -- the folder's files, through its descriptor ----------------------------------

    # Without descriptor-relative calls (Windows, the no-dir-fd simulation)
    # each operation re-checks the folder's identity first: a swap between
    # the check and the call is not excluded there, only narrowed.

    def _checked(self, name: str = "") -> Path:
        if not self._same_folder():
            raise FileNotFoundError(errno.ENOENT, "no longer the folder opened", str(self.folder))
        return self.folder / name if name else self.folder

    def _listdir(self) -> list[str]:
        return os.listdir(self._dir if self._dir is not None else self._checked())

    def _scandir(self) -> list[os.DirEntry[str]]:
        if self._dir is not None:
            return list(os.scandir(self._dir))
        return list(os.scandir(self._checked()))

    def _read(self, name: str, limit: int) -> bytes:
        if self._dir is None:
            return read_slot(self._checked(name), limit)
        flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
        fd = os.open(name, flags, dir_fd=self._dir)
        try:
            return os.read(fd, limit)
        finally:
            os.close(fd)

    def _exists(self, name: str) -> bool:
        try:
            if self._dir is None:
                os.lstat(self._checked(name))
            else:
                os.stat(name, dir_fd=self._dir, follow_symlinks=False)
        except OSError:
            return False
        return True

    def _remove(self, name: str) -> bool:
        try:
            if self._dir is None:
                os.unlink(self._checked(name))
            else:
                os.unlink(name, dir_fd=self._dir)
        except OSError:
            return False
        return True

    def _write(self, name: str, data: bytes, tmp_name: str) -> None:
        """Replace `name` through a new file of ours, `tmp_name` (O_EXCL, so
        a name someone placed in the folder beforehand, a link to another
        file, is never written through), in the folder's mode whatever the
        daemon's umask (077). Not synced: a lost answer is asked again."""
        if self._dir is None:
            try:
                path = self._checked(name)
            except OSError as exc:
                where = self.folder / name
                raise WriteFailed(f"cannot write {where}", "create", exc, where) from exc
            atomic_write(
                path,
                data,
                sync=False,
                mode=self.file_mode,
                exact_mode=True,
                tmp_name=tmp_name,
            )
            return
        _write_at(self._dir, name, data, tmp_name, self.file_mode, self.folder)

    def status(self) -> dict[str, int | str | None]:
        return {
            "folder": os.fspath(self.folder),
            "pending": len(self.pending),
            "waiting": len(self.waiting),
            "answered": self.answered,
            "dropped": self.dropped,
        }


def open_folder_watcher(root: Path, key: str) -> Watcher:
    """A watcher of one folder's new names (the request folder), no scopes."""
    from ctindex.backends import open_watcher

    return open_watcher(root, [], lambda _key: False, key)


def _modes(index: os.stat_result) -> tuple[int, int]:
    """The barrier folder's mode and its files', from the index folder's
    (the store's modes: ctindex/policy/store_path.py)."""
    mode = stat.S_IMODE(index.st_mode)
    return mode | 0o700, mode & 0o666 | 0o600


def _write_at(folder: int, name: str, data: bytes, tmp: str, mode: int, path: Path) -> None:
    """`data` as `name` in the folder `folder`: a new file `tmp` (O_EXCL,
    never through a link) in exactly `mode`, then a rename; WriteFailed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    try:
        fd = os.open(tmp, flags, mode, dir_fd=folder)
    except OSError as exc:
        raise WriteFailed(f"cannot create {path / tmp}", "create", exc, path / tmp) from exc
    stage = "write"
    try:
        try:
            os.fchmod(fd, mode)  # whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        stage = "rename"
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise WriteFailed(f"cannot write {path / name}", stage, exc, path / name) from exc


def _fit(doc: dict[str, object], size: int) -> bytes:
    """`doc` in one slot: long reasons shortened, else a plain error."""
    try:
        return pad(doc, size)
    except ValueError:
        pass
    short = {k: v[:REASON_MAX] if isinstance(v, str) else v for k, v in doc.items()}
    try:
        return pad(short, size)
    except ValueError:
        return pad({"ok": False, "error": "answer too large", "token": doc.get("token")}, size)
