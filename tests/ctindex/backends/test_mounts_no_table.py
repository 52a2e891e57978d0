"""ctindex/backends/mounts.py where there is no /proc/self/mountinfo (macOS, Windows;
here the ``no-mountinfo`` simulation): one clear reason, no exception."""

from __future__ import annotations

import pytest

from ctindex.backends import mounts
from ctindex.backends.platform_features import SIMULATE_ENV


@pytest.fixture(autouse=True)
def _no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIMULATE_ENV, "no-mountinfo")


def test_read_mounts_says_there_is_no_table() -> None:
    with pytest.raises(OSError, match="no mount table on this platform"):
        mounts.read_mounts()


def test_check_paths_sends_the_watch_to_the_poll_lane_with_the_reason() -> None:
    assert mounts.check_paths(["/"]) == "mount table unreadable: no mount table on this platform"


def test_mount_table_watch_is_quiet_and_has_no_descriptor() -> None:
    table = mounts.MountTable()
    try:
        table.track(["/"])
        assert table.fileno() is None
        assert table.changed() is False
        assert table.checks == 1
    finally:
        table.close()
