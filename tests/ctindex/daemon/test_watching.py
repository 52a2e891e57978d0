"""WatchSlot (ctindex/daemon/watching.py) keeps the selector current while the
watcher is opened, read, reopened and closed."""

from __future__ import annotations

import selectors
from pathlib import Path

from ctindex.backends import open_watcher
from ctindex.backends.base import Watcher
from ctindex.daemon.filewatch import FileWatches
from ctindex.daemon.watching import WATCHER_KEY, WatchSlot


def registered(sel: selectors.BaseSelector) -> list[object]:
    return sorted(str(key.data) for key in sel.get_map().values())


def test_open_read_reopen_close(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "cookies").mkdir()
    opened: list[Watcher] = []

    def opener(cookie_key: str) -> Watcher:
        watcher = open_watcher(tmp_path, ["docs"], lambda key: True, cookie_key)
        opened.append(watcher)
        return watcher

    sel = selectors.DefaultSelector()
    slot = WatchSlot(sel, tmp_path, FileWatches(str(tmp_path)), opener)
    try:
        slot.open("cookies")
        assert slot.watcher is opened[0] and slot.cookie_key == "cookies"
        if not slot.polled():
            assert WATCHER_KEY in registered(sel)
        (tmp_path / "docs" / "a.md").write_text("x")
        (tmp_path / "cookies" / "c1").touch()
        seen = slot.watcher.read(1.0)  # wait for the events, then the slot's own read
        batch = seen.merge(slot.read())
        assert batch.cookies == {"c1"}  # cookies are reported apart from paths
        assert batch.paths & {"docs", "docs/a.md"}
        slot.reopen()
        assert len(opened) == 2 and slot.watcher is opened[1]
        assert registered(sel).count(WATCHER_KEY) == (0 if slot.polled() else 1)
        assert not slot.mounts_changed()
    finally:
        slot.close()
        sel.close()
