"""ctindex/client/detach.py: a new session on POSIX; on Windows a new process group
without a console window (flags by feature, as `subprocess` offers them)."""

from __future__ import annotations

import subprocess

import pytest

from ctindex.client.detach import Detach, detach_options


def test_posix_gets_a_new_session() -> None:
    if not hasattr(subprocess, "CREATE_NO_WINDOW"):
        assert detach_options() == Detach(start_new_session=True, creationflags=0)


def test_windows_gets_no_window_and_its_own_process_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Values from Microsoft's "Process Creation Flags" page.
    monkeypatch.setattr(subprocess, "CREATE_NO_WINDOW", 0x08000000, raising=False)
    monkeypatch.setattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x00000200, raising=False)
    assert detach_options() == Detach(start_new_session=False, creationflags=0x08000200)
