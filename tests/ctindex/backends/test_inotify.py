"""Real inotify on tmp_path: every mutation shape the daemon relies on."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctindex.backends.base import Batch, under

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux")

if sys.platform.startswith("linux"):
    from ctindex.backends import inotify_c
    from ctindex.backends.inotify import InotifyWatcher

COOKIES = ".ct/okf/runtime/cookies/d"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def covered(batch: Batch, key: str) -> bool:
    """The batch tells the daemon to look at `key` (itself or a dirty ancestor)."""
    return any(under(key, p) for p in batch.paths | batch.rescan)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "kb" / "a").mkdir(parents=True)
    (tmp_path / "kb" / "a" / "one.md").write_text("one")
    (tmp_path / "kb" / "skip").mkdir()
    (tmp_path / "kb" / "skip" / "x.md").write_text("x")
    (tmp_path / COOKIES).mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return tmp_path


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def watcher(tree: Path, clock: Clock) -> Iterator[InotifyWatcher]:
    w = InotifyWatcher(tree, ["kb"], lambda k: not k.endswith("skip"), COOKIES, clock=clock)
    yield w
    w.close()


def test_initial_walk_watches_roots_but_not_excluded(watcher: InotifyWatcher) -> None:
    assert set(watcher.watched()) == {"kb", "kb/a"}
    assert watcher.fileno() is not None
    assert watcher.read(0) == Batch()


def test_create_modify_delete_file(watcher: InotifyWatcher, tree: Path) -> None:
    (tree / "kb/a/new.md").write_text("hello")
    assert watcher.read(0).paths == {"kb/a/new.md"}
    with open(tree / "kb/a/one.md", "a") as f:
        f.write("more")
    assert watcher.read(0).paths == {"kb/a/one.md"}
    (tree / "kb/a/one.md").unlink()
    batch = watcher.read(0)
    assert batch.paths == {"kb/a/one.md"} and not batch.rescan


def test_rename_file_reports_both_keys(watcher: InotifyWatcher, tree: Path) -> None:
    (tree / "kb/a/one.md").rename(tree / "kb/two.md")
    assert watcher.read(0).paths == {"kb/a/one.md", "kb/two.md"}


def test_rename_over_save(watcher: InotifyWatcher, tree: Path) -> None:
    (tree / "kb/a/.one.md.tmp").write_text("saved")
    watcher.read(0)
    os.replace(tree / "kb/a/.one.md.tmp", tree / "kb/a/one.md")
    batch = watcher.read(0)
    assert "kb/a/one.md" in batch.paths and not batch.rescan


def test_folder_created_then_filled_is_covered(watcher: InotifyWatcher, tree: Path) -> None:
    deep = tree / "kb/new/sub/deeper"
    deep.mkdir(parents=True)
    for i in range(20):
        (deep / f"f{i}.md").write_text(str(i))
    (tree / "kb/new/top.md").write_text("t")
    batch = watcher.read(0)
    for i in range(20):
        assert covered(batch, f"kb/new/sub/deeper/f{i}.md")
    assert covered(batch, "kb/new/top.md")
    assert {"kb/new", "kb/new/sub", "kb/new/sub/deeper"} <= set(watcher.watched())
    (deep / "later.md").write_text("later")
    assert watcher.read(0).paths == {"kb/new/sub/deeper/later.md"}


def test_folder_renamed_rekeys_watches(watcher: InotifyWatcher, tree: Path) -> None:
    (tree / "kb/a/sub").mkdir()
    watcher.read(0)
    (tree / "kb/a").rename(tree / "kb/b")
    batch = watcher.read(0)
    assert {"kb/a", "kb/b"} <= batch.paths and not batch.rescan
    assert set(watcher.watched()) == {"kb", "kb/b", "kb/b/sub"}
    (tree / "kb/b/sub/filled.md").write_text("f")
    assert watcher.read(0).paths == {"kb/b/sub/filled.md"}


def test_move_out_of_tree_drops_watches_after_grace(
    watcher: InotifyWatcher, tree: Path, clock: Clock
) -> None:
    (tree / "kb/a").rename(tree / "outside/a")
    assert watcher.read(0).paths == {"kb/a"}
    clock.now += 1.0
    watcher.read(0)
    assert set(watcher.watched()) == {"kb"}
    (tree / "outside/a/ignored.md").write_text("no")
    assert watcher.read(0) == Batch()


def test_move_into_tree_watches_new_subtree(watcher: InotifyWatcher, tree: Path) -> None:
    (tree / "outside/in/deep").mkdir(parents=True)
    (tree / "outside/in/deep/x.md").write_text("x")
    (tree / "outside/in").rename(tree / "kb/in")
    batch = watcher.read(0)
    assert batch.paths == {"kb/in"}
    assert {"kb/in", "kb/in/deep"} <= set(watcher.watched())
    (tree / "outside/file.md").write_text("f")
    (tree / "outside/file.md").rename(tree / "kb/file.md")
    assert watcher.read(0).paths == {"kb/file.md"}


def test_excluded_folder_gets_no_watch_and_no_events(watcher: InotifyWatcher, tree: Path) -> None:
    (tree / "kb/skip/y.md").write_text("y")
    (tree / "kb/skip/x.md").unlink()
    (tree / "kb/a/skip").mkdir()
    (tree / "kb/a/skip/z.md").write_text("z")
    assert watcher.read(0) == Batch()
    assert "kb/a/skip" not in watcher.watched()


def test_cookie_reported_through_same_queue(watcher: InotifyWatcher, tree: Path) -> None:
    (tree / "kb/a/before.md").write_text("b")
    (tree / COOKIES / "host-1-7").write_text("")
    batch = watcher.read(0)
    assert batch.cookies == {"host-1-7"}
    assert batch.paths == {"kb/a/before.md"}
    (tree / COOKIES / "host-1-7").unlink()  # removal is not news
    assert watcher.read(0) == Batch()


def test_cookie_folder_recreated_is_watched_again(
    watcher: InotifyWatcher, tree: Path, clock: Clock
) -> None:
    (tree / COOKIES).rmdir()
    watcher.read(0)
    (tree / COOKIES).mkdir()
    clock.now += 2
    watcher.read(0)
    (tree / COOKIES / "c2").write_text("")
    assert watcher.read(0).cookies == {"c2"}


def test_root_deleted_then_restored(watcher: InotifyWatcher, tree: Path, clock: Clock) -> None:
    import shutil

    shutil.rmtree(tree / "kb")
    batch = watcher.read(0)
    assert batch.rescan == {"kb"} and batch.reason == "root-deleted"
    assert watcher.watched() == {}
    (tree / "kb").mkdir()
    clock.now += 2
    batch = watcher.read(0)
    assert batch.rescan == {"kb"} and batch.reason == "root-restored"
    (tree / "kb/back.md").write_text("b")
    assert watcher.read(0).paths == {"kb/back.md"}


def test_overflow_asks_for_rescan(tree: Path) -> None:
    # max_queued_events is 16384 by default; distinct names defeat coalescing.
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    w = InotifyWatcher(tree, ["kb"], lambda k: True, COOKIES)
    try:
        folder = tree / "kb/a"
        for i in range(limit // 2 + 100):  # each file: IN_CREATE + IN_CLOSE_WRITE
            fd = os.open(folder / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        (tree / "kb/late/sub").mkdir(parents=True)  # created after the overflow
        batch = w.read(0)
        assert batch.rescan == {"kb"} and batch.reason == "overflow"
        assert "kb/late/sub" in w.watched()  # the re-walk repaired missing watches
    finally:
        w.close()


class FailingLibc(inotify_c.Libc):
    """The real binding, but add_watch fails with `err` after `allow` calls."""

    def __init__(self, allow: int, err: int = errno.ENOSPC) -> None:
        super().__init__()
        self.allow, self.err, self.calls = allow, err, 0

    def add_watch(self, fd: int, path: bytes, mask: int) -> int:
        self.calls += 1
        if self.calls > self.allow:
            raise OSError(self.err, os.strerror(self.err))
        return super().add_watch(fd, path, mask)


def test_watch_limit_degrades_and_asks_rescan(tree: Path) -> None:
    (tree / "kb/b/c").mkdir(parents=True)
    binding = FailingLibc(allow=2)
    w = InotifyWatcher(tree, ["kb"], lambda k: True, COOKIES, binding=binding)
    try:
        assert w.degraded and "watch-limit" in w.degraded
        batch = w.read(0)
        assert batch.rescan == {"kb"} and batch.reason == "watch-limit"
        calls = binding.calls
        (tree / "kb/d").mkdir()  # degraded: no further add_watch attempts
        w.read(0)
        assert binding.calls == calls
    finally:
        w.close()


def test_non_utf8_names_round_trip(watcher: InotifyWatcher, tree: Path) -> None:
    raw = os.fsencode(tree / "kb/a") + b"/caf\xe9.md"
    with open(raw, "wb") as f:
        f.write(b"x")
    (key,) = watcher.read(0).paths
    assert os.fsencode(key) == b"kb/a/caf\xe9.md"


def test_parse_buffer() -> None:
    import struct

    buf = struct.pack("iIII", 3, inotify_c.IN_CREATE, 0, 16) + b"name.md".ljust(16, b"\0")
    buf += struct.pack("iIII", -1, inotify_c.IN_Q_OVERFLOW, 0, 0)
    events = list(inotify_c.parse(buf))
    assert events == [
        inotify_c.Event(3, inotify_c.IN_CREATE, 0, b"name.md"),
        inotify_c.Event(-1, inotify_c.IN_Q_OVERFLOW, 0, b""),
    ]


class ScriptedLibc(inotify_c.Libc):
    """Kernel stand-in for events a test cannot cause without root (unmount,
    a split move): a pipe carries hand-made inotify records; watches are
    per inode like the kernel's."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        self.by_inode: dict[int, int] = {}
        self.removed: list[int] = []

    def init1(self, flags: int = 0) -> int:
        return self.r

    def add_watch(self, fd: int, path: bytes, mask: int) -> int:
        st = os.stat(path)
        if not (st.st_mode & 0o170000) == 0o040000:
            raise OSError(errno.ENOTDIR, "not a folder")
        return self.by_inode.setdefault(st.st_ino, len(self.by_inode) + 1)

    def rm_watch(self, fd: int, wd: int) -> None:
        self.removed.append(wd)

    def emit(self, wd: int, mask: int, cookie: int = 0, name: bytes = b"") -> None:
        import struct

        padded = name.ljust((len(name) // 16 + 1) * 16, b"\0") if name else b""
        os.write(self.w, struct.pack("iIII", wd, mask, cookie, len(padded)) + padded)


@pytest.fixture
def scripted(tree: Path, clock: Clock) -> Iterator[tuple[InotifyWatcher, ScriptedLibc]]:
    lib = ScriptedLibc()
    w = InotifyWatcher(
        tree, ["kb"], lambda k: not k.endswith("skip"), COOKIES, binding=lib, clock=clock
    )
    yield w, lib
    w.close()
    os.close(lib.w)


def test_root_unmounted_then_back(
    scripted: tuple[InotifyWatcher, ScriptedLibc], clock: Clock
) -> None:
    w, lib = scripted
    root_wd = w.watched()["kb"]
    lib.emit(root_wd, inotify_c.IN_UNMOUNT)
    lib.emit(root_wd, inotify_c.IN_IGNORED)
    batch = w.read(0)
    assert batch.rescan == {"kb"} and batch.reason == "unmount"
    assert w.watched() == {}
    assert w.read(0) == Batch()  # not looked for again before the retry delay
    clock.now += 2
    batch = w.read(0)
    assert batch.rescan == {"kb"} and batch.reason == "root-restored"
    assert set(w.watched()) == {"kb", "kb/a"}


def test_root_moved_away_drops_its_watches(scripted: tuple[InotifyWatcher, ScriptedLibc]) -> None:
    w, lib = scripted
    wds = set(w.watched().values())
    lib.emit(w.watched()["kb"], inotify_c.IN_MOVE_SELF)
    batch = w.read(0)
    assert batch.rescan == {"kb"} and batch.reason == "root-moved"
    assert set(lib.removed) == wds and w.watched() == {}


def test_move_pair_split_across_reads(
    scripted: tuple[InotifyWatcher, ScriptedLibc], tree: Path, clock: Clock
) -> None:
    w, lib = scripted
    kb, a = w.watched()["kb"], w.watched()["kb/a"]
    (tree / "kb/a").rename(tree / "kb/b")
    lib.emit(kb, inotify_c.IN_MOVED_FROM | inotify_c.IN_ISDIR, 7, b"a")
    assert w.read(0).paths == {"kb/a"}
    clock.now += 0.1  # within the grace: still waiting for the partner
    lib.emit(kb, inotify_c.IN_MOVED_TO | inotify_c.IN_ISDIR, 7, b"b")
    assert w.read(0).paths == {"kb/b"}
    assert w.watched()["kb/b"] == a and lib.removed == []
    lib.emit(a, inotify_c.IN_CREATE, 0, b"new.md")
    assert w.read(0).paths == {"kb/b/new.md"}


def test_folder_moved_to_excluded_name_loses_watches(
    scripted: tuple[InotifyWatcher, ScriptedLibc], tree: Path
) -> None:
    w, lib = scripted
    kb, a = w.watched()["kb"], w.watched()["kb/a"]
    (tree / "kb/a").rename(tree / "kb/oldskip")
    lib.emit(kb, inotify_c.IN_MOVED_FROM | inotify_c.IN_ISDIR, 9, b"a")
    lib.emit(kb, inotify_c.IN_MOVED_TO | inotify_c.IN_ISDIR, 9, b"oldskip")
    assert w.read(0).paths == {"kb/a"}
    assert lib.removed == [a] and set(w.watched()) == {"kb"}


def test_stale_and_foreign_watch_descriptors_are_ignored(
    scripted: tuple[InotifyWatcher, ScriptedLibc],
) -> None:
    w, lib = scripted
    a = w.watched()["kb/a"]
    lib.emit(a, inotify_c.IN_DELETE_SELF)
    lib.emit(a, inotify_c.IN_IGNORED)
    lib.emit(a, inotify_c.IN_CREATE, 0, b"late.md")  # after IN_IGNORED: stale
    lib.emit(4242, inotify_c.IN_CREATE, 0, b"x.md")
    assert w.read(0) == Batch()
    assert set(w.watched()) == {"kb"}


def test_file_watch_on_a_name_that_became_a_folder_yields_to_the_folder_watch(
    watcher: InotifyWatcher, tree: Path
) -> None:
    """watch_files adds by name. A known file replaced by a folder after the
    pass read it, and before the folder's IN_CREATE is read, gets a file
    watch on the folder; walking the folder then returns the same wd (one
    per inode). The folder watch takes it over: the folder's events are
    translated as a folder's (a subfolder is walked and watched), and the
    key let go as a file (the next pass no longer records it, or its
    prewatch finds a folder) never removes the folder's kernel watch."""
    (tree / "kb/a/c14.md").write_text("c14")
    assert watcher.watch_files(["kb/a/c14.md"]) == {"kb/a/c14.md"}
    watcher.read(0)
    (tree / "kb/a/c14.md").unlink()
    (tree / "kb/a/c14.md").mkdir()
    (tree / "kb/a/c14.md/inner.md").write_text("inner")
    # The pass's learn, its events not read yet: a new inode under the key.
    assert watcher.watch_files(["kb/a/c14.md"]) == {"kb/a/c14.md"}
    batch = watcher.read(0)
    assert covered(batch, "kb/a/c14.md/inner.md")
    wd = watcher.watched()["kb/a/c14.md"]
    assert "kb/a/c14.md" not in watcher.watched_files() and watcher.file_watch_count() == 0
    (tree / "kb/a/c14.md/sub").mkdir()
    assert watcher.read(0).paths == {"kb/a/c14.md/sub"}
    assert "kb/a/c14.md/sub" in watcher.watched()
    # The next pass: prewatch of its key, then the key dropped as a file.
    assert watcher.watch_files(["kb/a/c14.md"]) == set()
    watcher.unwatch_files(["kb/a/c14.md"])
    assert watcher.watched()["kb/a/c14.md"] == wd
    for name in ("n49.md", "n50.md", "sub/deep.md"):
        (tree / "kb/a/c14.md" / name).write_text(name)
    assert watcher.read(0).paths == {
        "kb/a/c14.md/n49.md",
        "kb/a/c14.md/n50.md",
        "kb/a/c14.md/sub/deep.md",
    }


def test_dropped_file_key_never_removes_a_folder_watch_it_shares(
    scripted: tuple[InotifyWatcher, ScriptedLibc], tree: Path
) -> None:
    """However a file key came to share a folder's wd, letting the key go
    leaves the folder's watch in the kernel and its events a folder's."""
    w, lib = scripted
    a = w.watched()["kb/a"]
    w._files[a] = "kb/a"  # the shared state the takeover rules out
    w._file_wd["kb/a"] = a
    w.unwatch_files(["kb/a"])
    assert lib.removed == [] and w.watched()["kb/a"] == a
    w._files[a] = "kb/a"
    lib.emit(a, inotify_c.IN_CREATE | inotify_c.IN_ISDIR, 0, b"sub")
    (tree / "kb/a/sub").mkdir()
    assert w.read(0).paths == {"kb/a/sub"} and "kb/a/sub" in w.watched()
