"""The poll lane and open_watcher()'s choice and fallback logic."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest

from ctindex.backends import open_watcher
from ctindex.backends.base import Batch, normalize_roots, root_of
from ctindex.backends.choose import BACKOFF_FIRST_S, Supervised
from ctindex.backends.poll import PollWatcher

COOKIES = ".ct/okf/runtime/cookies/d"


class Clock:
    def __init__(self) -> None:
        self.now = 50.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        assert s >= 0
        self.slept += s
        self.now += s


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "kb").mkdir()
    (tmp_path / COOKIES).mkdir(parents=True)
    return tmp_path


def test_poll_reports_nothing_until_asked(tree: Path) -> None:
    clock = Clock()
    w = PollWatcher(tree, ["kb", "kb/x", "other"], COOKIES, clock=clock, sleep=clock.sleep)
    assert w.fileno() is None
    assert w.read(0) == Batch()
    assert w.read(2.0) == Batch()  # waits (on the fake clock) the whole timeout
    assert clock.slept == pytest.approx(2.0)
    w.request()
    assert w.read(0) == Batch(rescan=frozenset({"kb", "other"}), reason="poll")
    assert w.read(0) == Batch()


def test_poll_cookie_means_full_rescan(tree: Path) -> None:
    (tree / COOKIES / "stale").write_text("")
    clock = Clock()
    w = PollWatcher(tree, ["kb"], COOKIES, clock=clock, sleep=clock.sleep)
    (tree / COOKIES / "c1").write_text("")
    batch = w.read(None)
    assert batch.cookies == {"c1"} and batch.rescan == {"kb"} and batch.reason == "poll"
    assert w.read(0) == Batch()


def test_poll_interval(tree: Path) -> None:
    clock = Clock()
    w = PollWatcher(tree, ["kb"], None, interval=10.0, clock=clock, sleep=clock.sleep)
    assert w.read(0) == Batch()
    batch = w.read(None)  # returns when the interval elapses, not before
    assert batch.rescan == {"kb"} and clock.now == pytest.approx(60.0)


def test_roots_helpers() -> None:
    assert normalize_roots(["b", "a/x", "a", "a/"]) == ("a", "b")
    assert normalize_roots(["", "a"]) == ("",)
    assert root_of("a/x/y.md", ["a", "a/x", "b"]) == "a/x"
    assert root_of("c.md", ["a"]) is None


def test_batch_merge_keeps_first_reason() -> None:
    a = Batch(paths=frozenset({"x"}), rescan=frozenset({"r"}), reason="overflow")
    b = Batch(rescan=frozenset({"s"}), reason="poll", cookies=frozenset({"c"}))
    m = a.merge(b)
    assert m == Batch(frozenset({"x"}), frozenset({"r", "s"}), "overflow", frozenset({"c"}))
    assert not Batch() and Batch(cookies=frozenset({"c"}))


class FakeNative:
    """Stands in for a native backend whose opening and coverage we control."""

    name = "fake"
    reason = None

    def __init__(self, degraded: str | None = None, fail: int | None = None) -> None:
        if fail is not None:
            raise OSError(fail, os.strerror(fail))
        self.degraded = degraded
        self.closed = False

    def fileno(self) -> int | None:
        return 99

    def read(self, timeout: float | None = 0.0) -> Batch:
        return Batch(paths=frozenset({"kb/p"}))

    def close(self) -> None:
        self.closed = True


def test_supervisor_backs_off_when_native_is_degraded(tree: Path) -> None:
    clock = Clock()
    opened: list[FakeNative] = []
    outcome: dict[str, str | None] = {"degraded": "watch-limit: No space left on device"}

    def open_native() -> FakeNative:
        w = FakeNative(degraded=outcome["degraded"])
        opened.append(w)
        return w

    def open_poll(why: str) -> PollWatcher:
        return PollWatcher(tree, ["kb"], COOKIES, reason=why, clock=clock, sleep=clock.sleep)

    s = Supervised(open_native, open_poll, ["kb"], clock=clock)
    assert s.name == "poll" and s.reason and "watch-limit" in s.reason
    assert opened[0].closed
    batch = s.read(0)
    assert batch.rescan == {"kb"} and batch.reason == "watch-limit"
    for _ in range(100):  # many reads inside the back-off window: no retry
        s.read(0)
    assert len(opened) == 1
    clock.now += BACKOFF_FIRST_S
    s.read(0)  # retried once, still degraded: the window doubles
    assert len(opened) == 2
    clock.now += BACKOFF_FIRST_S
    s.read(0)
    assert len(opened) == 2
    outcome["degraded"] = None
    clock.now += BACKOFF_FIRST_S
    (tree / COOKIES / "in-flight").write_text("")  # a barrier written on the poll lane
    batch = s.read(0)
    assert len(opened) == 3 and s.name == "fake" and s.fileno() == 99
    assert batch.rescan == {"kb"} and "kb/p" in batch.paths
    assert batch.cookies == {"in-flight"}  # not lost in the switch


def test_supervisor_switches_when_native_degrades_later(tree: Path) -> None:
    native = FakeNative()
    s = Supervised(lambda: native, lambda why: PollWatcher(tree, ["kb"], reason=why), ["kb"])
    assert s.name == "fake"
    native.degraded = "watch-limit: x"
    batch = s.read(0)
    assert batch.reason == "watch-limit" and "kb/p" in batch.paths
    assert native.closed and s.name == "poll" and s.fileno() is None


def test_supervisor_open_failure_falls_back(tree: Path) -> None:
    s = Supervised(
        lambda: FakeNative(fail=errno.EMFILE),
        lambda why: PollWatcher(tree, ["kb"], reason=why),
        ["kb"],
    )
    assert s.name == "poll" and s.reason and "Too many open files" in s.reason


def test_open_watcher_forced_poll(tree: Path) -> None:
    w = open_watcher(tree, ["kb"], lambda k: True, COOKIES, force_poll="watch disabled")
    assert w.name == "poll" and w.reason == "watch disabled"
    w.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux")
def test_open_watcher_native_on_local_fs(tree: Path) -> None:
    w = open_watcher(tree, ["kb"], lambda k: True, COOKIES)
    try:
        assert w.name == "inotify" and w.reason is None and w.fileno() is not None
        (tree / "kb/n.md").write_text("n")
        (tree / COOKIES / "c").write_text("")
        batch = w.read(1.0)
        assert batch.paths == {"kb/n.md"} and batch.cookies == {"c"}
    finally:
        w.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mount table is Linux")
def test_open_watcher_remote_fs_gets_poll(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctindex.backends import mounts

    table = f"1 0 0:1 / / rw - ext4 /dev/sda rw\n2 1 0:2 / {tree} rw - nfs4 srv:/x rw\n"
    monkeypatch.setattr(
        mounts, "read_mounts", lambda path="": mounts.parse_mountinfo(table.encode())
    )
    w = open_watcher(tree, ["kb"], lambda k: True, COOKIES)
    assert w.name == "poll"
    assert w.reason is not None and w.reason.startswith("nfs4: remote filesystem")


REAL_LIMIT_SCRIPT = """
import sys
from pathlib import Path
from ctindex.backends import open_watcher
Path("/proc/sys/user/max_inotify_watches").write_text("3")
w = open_watcher(Path(sys.argv[1]), ["kb"], lambda k: True, "ck")
batch = w.read(0)
print(w.name, sorted(batch.rescan), batch.reason, w.reason, sep="|")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux")
def test_real_watch_limit_in_user_namespace(tree: Path) -> None:
    """ENOSPC from the kernel itself: a user namespace allows 3 watches."""
    import shutil
    import subprocess

    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare")
    for i in range(6):
        (tree / "kb" / f"d{i}").mkdir()
    (tree / "ck").mkdir()
    proc = subprocess.run(
        [unshare, "-Ur", sys.executable, "-c", REAL_LIMIT_SCRIPT, str(tree)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0 and "max_inotify_watches" in proc.stderr + proc.stdout:
        pytest.skip("user namespaces unavailable here")
    if proc.returncode != 0 and "unshare" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    name, rescan, reason, why = proc.stdout.strip().split("|")
    assert (name, rescan, reason) == ("poll", "['kb']", "watch-limit")
    assert why.startswith("watch-limit: No space left on device")
