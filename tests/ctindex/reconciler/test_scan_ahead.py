"""ctindex/reconciler/scan_ahead.py: a full walk whose native folder scans run
partly on a second thread reports exactly what the one-thread walk reports
(denied folders, changes, every list in its order), leaves no descriptor
open and no thread running, also when the walk is interrupted."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ctindex.reconciler import Manifest, reconcile, scan_ahead
from ctindex.reconciler.scan_ahead import ScanAhead
from tests.ctindex.reconciler.fakes import SimpleFilter, as_packed
from tests.ctindex.reconciler.test_native import NOW, _denying, summary


@pytest.fixture(autouse=True)
def _native_only() -> None:
    from ctindex.reconciler import native

    if native.module() is None or os.environ.get("CTINDEX_SIMULATE"):
        pytest.skip("the native scan is not in use")


def _tree(root: Path) -> set[bytes]:
    """Three levels of folders with files, and two folders that can not be
    opened (`_denying` refuses them by name); returns those."""
    denied: set[bytes] = set()
    for a in range(6):
        for b in range(8):
            folder = root / f"a{a}" / f"b{b}"
            folder.mkdir(parents=True)
            for c in range(5):
                (folder / f"f{c}.md").write_text(f"{a} {b} {c}\n" * (c + 1))
    for locked in ("a1/b3/locked", "a4/locked-too"):
        (root / locked).mkdir()
        (root / locked / "inside.md").write_text("hidden\n")
        denied.add(os.fsencode(root / locked))
    return denied


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _scanning() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ctindex-scan"]


def _walk(root: str, previous: Manifest, denied: set[bytes], ahead: bool) -> dict[str, Any]:
    scan_ahead.ENABLED = ahead
    try:
        res = reconcile(
            root, SimpleFilter(), as_packed(previous), clock_ns=lambda: NOW,
            ops=_denying(denied), trust_filter=True,
        )  # fmt: skip
    finally:
        scan_ahead.ENABLED = True
    return summary(res)


def test_scanning_ahead_reports_what_one_thread_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = tempfile.mkdtemp(prefix="ctindex-ahead-")
    try:
        denied = _tree(Path(tmp))
        first = reconcile(tmp, SimpleFilter(), Manifest(), clock_ns=lambda: NOW)
        # Changes the second walk must find: an edit, a new file, a removal.
        (Path(tmp) / "a2/b5/f1.md").write_text("changed\n")
        (Path(tmp) / "a5/b7/new.md").write_text("new\n")
        (Path(tmp) / "a0/b0/f4.md").unlink()
        # The walk takes its time at each folder, so the thread gets ahead.
        from_thread: list[bool] = []
        real_take = ScanAhead.take

        def slow_take(self: ScanAhead, key: str) -> Any:
            time.sleep(0.002)
            got = real_take(self, key)
            if got is not None and got.fd is not None:
                from_thread.append(got.result is not None)
            return got

        monkeypatch.setattr(ScanAhead, "take", slow_take)
        fds = _fds()
        one = _walk(tmp, first.manifest, denied, ahead=False)
        two = _walk(tmp, first.manifest, denied, ahead=True)
        assert two == one
        assert one["changed"] == ["a2/b5/f1.md"] and one["added"] == ["a5/b7/new.md"]
        assert one["report"]["unreadable_dirs"]["count"] == 2
        assert any(from_thread) and _fds() == fds and not _scanning()
    finally:
        shutil.rmtree(tmp)


@pytest.mark.parametrize("ahead", [False, True])
def test_an_interrupted_walk_closes_what_it_opened_ahead(
    monkeypatch: pytest.MonkeyPatch, ahead: bool
) -> None:
    """Also without scanning ahead: a folder opened and then interrupted
    while being scanned was not yet on the walk's stack, and stayed open."""
    tmp = tempfile.mkdtemp(prefix="ctindex-ahead-")
    try:
        _tree(Path(tmp))
        first = reconcile(tmp, SimpleFilter(), Manifest(), clock_ns=lambda: NOW)
        (Path(tmp) / "a3/b2/f0.md").write_text("changed\n")  # a file the walk hands over
        fds = _fds()

        class Stop(Exception):
            pass

        def interrupted(*_: object) -> None:
            raise Stop

        import ctindex.reconciler.diff as diff

        monkeypatch.setattr(diff._Pass, "on_files", interrupted)
        monkeypatch.setattr(scan_ahead, "ENABLED", ahead)
        with pytest.raises(Stop):
            reconcile(
                tmp, SimpleFilter(), as_packed(first.manifest), clock_ns=lambda: NOW,
                trust_filter=True,
            )  # fmt: skip
        assert _fds() == fds and not _scanning()
    finally:
        shutil.rmtree(tmp)
