"""Per-file watches (ctindex/daemon/filewatch.py) through the reconcile driver,
on the real inotify backend: what a pass hands over must never cost a
folder its watch (docs/backends.md, "File watches")."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.backends.base import Watcher, file_watching, under
from ctindex.daemon.dirtyset import DirtySet
from ctindex.daemon.filewatch import FileWatches
from ctindex.daemon.layers import PlanView
from ctindex.daemon.links import LinkTracker
from ctindex.daemon.reconcile import Outcome, ReconcileDriver
from ctindex.daemon.schedule import Schedule
from ctindex.daemon.status import Stats
from ctindex.indexing.transaction import UpdateReport
from ctindex.reconciler import Fingerprint
from ctindex.store.filetable import RecordedFile
from tests.daemon_support import FakeEngine, journal

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux")

# Long after any stamp of the files here: no record is racily clean.
LATER_NS = 3_000_000_000


class Recording(FakeEngine):
    """A fake whose narrowed pass records every regular file under its keys
    (what the real pass hands over as `seen`), then runs `after_pass`: the
    user's next operation landing between the pass reading the files and
    the driver watching them (a loaded machine, a long pass over a folder
    that was just moved)."""

    after_pass: Callable[[], None] | None = None

    def reconcile_paths(
        self, view: PlanView, keys: list[str], *, lock_timeout: float = 0.0
    ) -> UpdateReport:
        seen: dict[str, RecordedFile] = {}
        for key in keys:
            path = self.root / key
            found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            for p in found:
                st = os.lstat(p)
                fp = Fingerprint(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
                seen[p.relative_to(self.root).as_posix()] = RecordedFile(
                    fp, max(st.st_mtime_ns, st.st_ctime_ns) + LATER_NS
                )
        report = super().reconcile_paths(view, keys, lock_timeout=lock_timeout)
        if self.after_pass is not None:
            op, self.after_pass = self.after_pass, None
            op()
        return UpdateReport(report.generation, changed=report.changed, seen=seen)


def covered(dirty: DirtySet, key: str) -> bool:
    return dirty.rescan_reason is not None or any(under(key, p) for p in dirty.paths())


def test_a_file_that_became_a_folder_between_pass_and_watch_keeps_the_folder_heard(
    tmp_path: Path,
) -> None:
    """The soak's miss (seed 1131431522): a folder was moved (its files are
    new keys, so the pass after it watches each of them by name), and one of
    its files was replaced by a folder of the same name before that watch was
    made. The file watch landed on the new folder; the folder's own watch got
    the same wd when its IN_CREATE was read; the next pass, recording the key
    as a folder, let the file watch go and removed the kernel watch they
    shared. Files created in the folder afterwards were never reported, and
    the next barrier answered watcher-clean without them."""
    (tmp_path / "docs/old").mkdir(parents=True)
    (tmp_path / "docs/old/c14.md").write_text("c14\n")
    (tmp_path / "docs/old/other.md").write_text("other\n")
    now = [100.0]

    def clock() -> float:
        return now[0]

    engine = Recording(tmp_path, tmp_path / "journal")
    driver = ReconcileDriver(
        engine,
        DirtySet(0.0),
        LinkTracker(str(tmp_path)),
        FileWatches(str(tmp_path)),
        Stats(),
        Schedule(clock, clock),
        clock,
        clock,
    )
    view = engine.load_plan()
    watcher: Watcher = engine.open_watcher(view, "cookies")
    folder = tmp_path / "docs/moved33/c14.md"

    def file_to_folder() -> None:  # the harness's op_replace_by_folder
        folder.unlink()
        folder.mkdir()
        (folder / "inner.md").write_text("inner\n")

    def read() -> None:  # what the loop does with every watcher read
        driver.dirty.add(watcher.read(0.0).paths, now[0])

    def settle() -> None:  # read and apply until nothing is pending
        for _ in range(5):
            read()
            if not len(driver.dirty) and driver.dirty.rescan_reason is None:
                return
            assert driver.apply(driver.dirty.take(), view, watcher) is Outcome.DONE

    try:
        assert file_watching(watcher) is not None  # inotify, not the poll lane
        os.rename(tmp_path / "docs/old", tmp_path / "docs/moved33")
        read()
        assert covered(driver.dirty, "docs/moved33/c14.md")
        engine.after_pass = file_to_folder
        assert driver.apply(driver.dirty.take(), view, watcher) is Outcome.DONE
        settle()
        assert "docs/moved33/c14.md" in engine_keys(engine)  # the folder was looked at
        for name in ("n49.md", "n50.md"):  # later ops: files created in the folder
            (folder / name).write_text(f"{name}\n")
            read()
            assert covered(driver.dirty, f"docs/moved33/c14.md/{name}"), name
            settle()
        (folder / "sub").mkdir()  # a subfolder of it is watched too
        settle()
        (folder / "sub/deep.md").write_text("deep\n")
        read()
        assert covered(driver.dirty, "docs/moved33/c14.md/sub/deep.md")
    finally:
        watcher.close()


def engine_keys(engine: FakeEngine) -> set[str]:
    """Every key a narrowed pass of `engine` was handed."""
    return {k for record in journal(engine.journal) for k in record.get("keys", ())}
