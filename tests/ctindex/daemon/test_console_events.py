"""Windows console control events (ctindex/daemon/console_events.py): the
five events stop the daemon on its graceful path, and a close/logoff/
shutdown handler returns only once the shutdown is done.

Event codes from consoleapi.h / wincon.h (learn.microsoft.com
"HandlerRoutine callback function"): CTRL_C_EVENT 0, CTRL_BREAK_EVENT 1,
CTRL_CLOSE_EVENT 2, CTRL_LOGOFF_EVENT 5, CTRL_SHUTDOWN_EVENT 6.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ctindex.client.daemon_requests import ping
from ctindex.daemon import console_events
from ctindex.daemon.console_events import ConsoleEvents
from ctindex.daemon.lifecycle import Daemon
from ctindex.ipc.records import read_record
from ctindex.policy.project import Project
from tests.daemon_support import FakeEngine, runtime_paths, wait_for


def test_documented_event_codes() -> None:
    assert console_events.EVENT_NAMES == {
        0: "CTRL_C",
        1: "CTRL_BREAK",
        2: "CTRL_CLOSE",
        5: "CTRL_LOGOFF",
        6: "CTRL_SHUTDOWN",
    }
    assert {2, 5, 6} == console_events.ENDS_PROCESS


@pytest.mark.parametrize("event", [0, 1])
def test_ctrl_c_and_break_ask_for_a_stop_and_return_at_once(event: int) -> None:
    asked: list[str] = []
    woken: list[bool] = []
    events = ConsoleEvents(asked.append, lambda: woken.append(True))
    assert events.handle(event) is True
    assert asked == [f"console {console_events.EVENT_NAMES[event]}"] and woken == [True]


def test_an_unknown_event_is_left_to_the_next_handler() -> None:
    asked: list[str] = []
    assert ConsoleEvents(asked.append, lambda: None).handle(3) is False
    assert asked == []


def test_nothing_to_install_without_windll() -> None:
    if not hasattr(__import__("ctypes"), "windll"):
        assert ConsoleEvents(lambda why: None, lambda: None).install() is False


@pytest.mark.needs("peercred")  # an in-process Daemon: clients ping it
@pytest.mark.parametrize("event", [2, 5, 6])
def test_close_logoff_shutdown_return_only_after_the_daemons_shutdown(
    tmp_path: Path, event: int
) -> None:
    (tmp_path / "docs").mkdir()
    paths = runtime_paths(tmp_path)
    project = Project.at(tmp_path)
    daemon = Daemon(project, paths, FakeEngine(tmp_path, tmp_path / "journal"))
    seen: dict[str, object] = {}

    def windows_event_thread() -> None:  # the thread Windows would create
        wait_for(lambda: ping(paths))
        seen["handled"] = daemon.console.handle(event)
        record = read_record(paths.status)  # read the moment the routine returns
        seen["status"] = record.get("stop_reason") if record else None

    thread = threading.Thread(target=windows_event_thread)
    thread.start()
    try:
        outcome = daemon.run()
    finally:
        daemon.console.finished()
        thread.join()
    name = console_events.EVENT_NAMES[event]
    assert outcome == f"console {name}"
    assert seen == {"handled": True, "status": f"console {name}"}
