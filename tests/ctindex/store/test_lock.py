"""The update lock (ctindex/store/lock.py): one writer at a time across
processes, a bounded wait that ends in IndexBusy, and a lock that dies with
its holder (never kept alive by a forked helper)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctindex.errors import IndexBusy, IndexWriteError
from ctindex.store import lock as lock_module
from ctindex.store.lock import HELD_FDS, LOCK_NAME, IndexReadOnly, update_lock

HANG_GUARD_S = 60.0  # bounds a wait on an event; never expected to run out

# A writer in another process: takes the lock, says so, and keeps it until
# its stdin gives a line (or the process dies).
HOLDER = """
import sys
from pathlib import Path
from ctindex.store.lock import update_lock
with update_lock(Path(sys.argv[1]), timeout=0):
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""

# The holder forks a helper (a daemon forks) and is then killed while the
# helper lives on; argv[2] says whether the helper calls release_inherited.
# The holder says the helper's pid only once the helper is past that call
# (a byte on a pipe): said at the fork, a test on a loaded machine could
# kill the holder before the helper had let go and find the lock held.
FORKING_HOLDER = """
import os, signal, sys
from pathlib import Path
from ctindex.store.lock import release_inherited, update_lock
with update_lock(Path(sys.argv[1]), timeout=0):
    ready, done = os.pipe()
    pid = os.fork()
    if pid == 0:
        if sys.argv[2] == "release":
            release_inherited()
        os.write(done, b"r")
        signal.alarm(60)  # bounded: the test kills it sooner
        signal.pause()
        os._exit(0)
    os.close(done)
    assert os.read(ready, 1) == b"r", "the helper died"  # end of file once it exits
    print(pid, flush=True)
    sys.stdin.readline()
"""


class Holder:
    def __init__(self, script: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def said(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line, self.finish()
        return line

    def tell(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self) -> str:
        try:
            _out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        return err


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Holder]:
    proc = Holder(HOLDER, str(tmp_path / "okf"))
    try:
        assert proc.said() == "held"
        yield proc
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
        proc.finish()


def test_another_process_holding_the_lock_makes_a_bounded_wait_end_in_index_busy(
    tmp_path: Path, holder: Holder
) -> None:
    index_dir = tmp_path / "okf"
    with pytest.raises(IndexBusy) as caught, update_lock(index_dir, timeout=0.3):
        pass
    assert str(caught.value) == (
        f"{index_dir / LOCK_NAME}: another writer held the update lock for more than 0.3 s"
    )
    assert caught.value.exit_code == 2
    assert isinstance(caught.value, IndexWriteError)
    with pytest.raises(IndexBusy, match="more than 0 s"), update_lock(index_dir, timeout=0):
        pass


def test_a_negative_timeout_is_one_try(tmp_path: Path, holder: Holder) -> None:
    with pytest.raises(IndexBusy), update_lock(tmp_path / "okf", timeout=-5):
        pass


def test_the_lock_is_free_once_its_holder_leaves_it(tmp_path: Path, holder: Holder) -> None:
    holder.tell()
    assert holder.said() == "released"
    with update_lock(tmp_path / "okf", timeout=0):
        pass


def test_the_lock_dies_with_a_killed_holder(tmp_path: Path, holder: Holder) -> None:
    holder.proc.kill()
    holder.proc.wait()
    with update_lock(tmp_path / "okf", timeout=0):
        pass


def test_a_waiting_writer_gets_the_lock_when_the_holder_leaves(
    tmp_path: Path, holder: Holder, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = threading.Event()
    refused = _refusals(monkeypatch)
    failed: list[BaseException] = []

    def writer() -> None:
        try:
            with update_lock(tmp_path / "okf", timeout=60):
                got.set()
        except BaseException as exc:  # reported below, not lost in the thread
            failed.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        if refused is None:  # not watched: no better than a pause
            assert not got.wait(0.5)  # held by the other process: still waiting
        else:
            assert refused.wait(HANG_GUARD_S), failed  # held by the other process
            assert not got.is_set()  # so still waiting
        holder.tell()
        assert got.wait(HANG_GUARD_S), failed
    finally:
        thread.join(60)
    assert not failed


def _refusals(monkeypatch: pytest.MonkeyPatch) -> threading.Event | None:
    """Set once a writer in this process tries the lock and finds it held:
    the proof it waits, where a pause only guessed how long it takes to try.
    None where the lock is portalocker's (no fcntl: Windows), whose tries are
    its own."""
    try:
        import fcntl
    except ImportError:
        return None
    refused = threading.Event()
    real_flock = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        try:
            real_flock(fd, operation)
        except BlockingIOError:
            refused.set()
            raise

    monkeypatch.setattr(fcntl, "flock", flock)
    return refused


def test_two_writers_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    """The daemon's threads and an API user in one process: the lock is per
    open, not per process."""
    with update_lock(tmp_path, timeout=0), pytest.raises(IndexBusy):  # noqa: SIM117
        with update_lock(tmp_path, timeout=0):
            pass
    with update_lock(tmp_path, timeout=0):  # and free again afterwards
        pass


def test_the_held_descriptor_is_known_while_held_only(tmp_path: Path) -> None:
    before = set(HELD_FDS)
    with update_lock(tmp_path, timeout=0):
        (fd,) = HELD_FDS - before
        assert os.path.samestat(os.fstat(fd), os.stat(tmp_path / LOCK_NAME))
    assert before == HELD_FDS
    with pytest.raises(OSError):
        os.fstat(fd)  # closed


def test_an_error_inside_releases_the_lock(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), update_lock(tmp_path, timeout=0):
        raise RuntimeError("the pass failed")
    with update_lock(tmp_path, timeout=0):
        pass


@pytest.mark.parametrize(("helper", "free"), [("release", True), ("keep", False)])
def test_a_forked_helper_does_not_keep_the_lock_of_a_killed_holder_alive(
    tmp_path: Path, helper: str, free: bool
) -> None:
    """release_inherited in a forked child: the lock dies with its holder,
    though the child still runs (without it, the child's inherited
    descriptor keeps the lock: the second case shows the test can tell)."""
    proc = Holder(FORKING_HOLDER, str(tmp_path / "okf"), helper)
    child = int(proc.said())
    try:
        proc.proc.kill()
        proc.proc.wait()
        os.kill(child, 0)  # the helper still runs
        if free:
            with update_lock(tmp_path / "okf", timeout=0):
                pass
        else:
            with pytest.raises(IndexBusy), update_lock(tmp_path / "okf", timeout=0):
                pass
    finally:
        os.kill(child, signal.SIGKILL)
        proc.finish()


def test_the_index_folder_is_created_and_the_lock_file_is_private(tmp_path: Path) -> None:
    index_dir = tmp_path / ".ct" / "okf"
    with update_lock(index_dir, timeout=0):
        assert index_dir.is_dir()
    # its mode is the folder's read and write bits (store_path.file_mode)
    index_dir.chmod(0o700)
    (index_dir / LOCK_NAME).unlink()
    with update_lock(index_dir, timeout=0):
        pass
    assert stat.S_IMODE(os.stat(index_dir / LOCK_NAME).st_mode) == 0o600


def test_in_a_group_shared_folder_the_lock_file_is_group_writable(tmp_path: Path) -> None:
    index_dir = tmp_path / "okf"
    index_dir.mkdir()
    index_dir.chmod(0o770)
    with update_lock(index_dir, timeout=0):
        pass
    assert stat.S_IMODE(os.stat(index_dir / LOCK_NAME).st_mode) == 0o660


def test_an_index_folder_that_cannot_be_made_is_a_write_error(tmp_path: Path) -> None:
    (tmp_path / "okf").write_text("a file where the folder goes")
    with pytest.raises(IndexWriteError, match="cannot create index folder") as caught:  # noqa: SIM117
        with update_lock(tmp_path / "okf" / "inner", timeout=0):
            pass
    assert not isinstance(caught.value, IndexReadOnly)


def test_a_read_only_index_folder_is_index_read_only(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes every folder: no EACCES to observe")
    index_dir = tmp_path / "okf"
    index_dir.mkdir()
    index_dir.chmod(0o500)
    try:
        with pytest.raises(IndexReadOnly, match="cannot take the update lock"):  # noqa: SIM117
            with update_lock(index_dir, timeout=0):
                pass
    finally:
        index_dir.chmod(0o700)


@pytest.mark.parametrize(
    ("code", "kind"),
    [(30, IndexReadOnly), (13, IndexReadOnly), (1, IndexReadOnly), (28, IndexWriteError)],
    ids=["EROFS", "EACCES", "EPERM", "ENOSPC"],
)
def test_write_error_tells_a_read_only_index_from_a_fault(
    code: int, kind: type[IndexWriteError]
) -> None:
    error = lock_module.write_error(OSError(code, os.strerror(code)), "x: cannot write")
    assert type(error) is kind
    assert str(error) == f"x: cannot write ({os.strerror(code)})"
