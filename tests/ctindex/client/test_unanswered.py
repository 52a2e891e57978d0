"""A stopped daemon is waited for once, then skipped until it shows life
(ctindex/client/unanswered.py, docs/daemon.md "A daemon that does not answer").

Real daemons stopped with SIGSTOP; whether a query waited is read from the
back-off record's strike count and the answer's reason, never from a clock.
Results are checked against the independent oracle (tests/oracle.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ctindex.api import Index
from ctindex.client import unanswered
from ctindex.client.control import lock_held
from tests import oracle
from tests.daemon_support import CliProject, wait_for

Make = Callable[..., CliProject]
MARKER = "zqxv7marker"
HANG_GUARD_S = 60.0  # only a hang guard for subprocesses and waits


def _search(project: CliProject) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", "--json", "search", MARKER, "--limit", "1000"],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)
    return doc


def _record(project: CliProject) -> dict[str, Any] | None:
    path = unanswered.record_path(project.paths)
    return json.loads(path.read_text()) if path.exists() else None


def _running(make: Make) -> tuple[CliProject, int]:
    project = make()
    metrics = project.root / "acme_retail" / "metrics"
    (metrics / "marker-one.md").write_text(f"# Marker one\n\n{MARKER} in a metric.\n")
    project.cli("search", "margin")  # starts the daemon
    pid: int = project.wait_daemon()["pid"]
    wait_for(lambda: _search(project)["freshness"]["mode"] == "watcher-clean", HANG_GUARD_S)
    return project, pid


@contextmanager
def _stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _backed_off(doc: dict[str, Any]) -> bool:
    reason = doc["freshness"]["reason"] or ""
    return doc["freshness"]["mode"] == "fallback" and reason.startswith(
        f"{unanswered.REASON}: backed off until "
    )


def test_a_stopped_daemon_is_waited_for_once_then_skipped(make_cli_project: Make) -> None:
    project, pid = _running(make_cli_project)
    with _stopped(pid):
        first = _search(project)
        assert _backed_off(first), first["freshness"]
        struck = _record(project)
        assert struck is not None and struck["strikes"] == 1, struck
        # The window is 2 s; on a loaded machine the next process may start
        # later than that. What is tested is a record in force, so keep it
        # in force for the rest of the test.
        struck["until"] = time.time() + HANG_GUARD_S
        unanswered.record_path(project.paths).write_text(json.dumps(struck))
        second = _search(project)
        assert _backed_off(second), second["freshness"]
        # Not asked again: no second strike, the same window.
        assert _record(project) == struck
    # SIGCONT: its heartbeat rewrites status.json, the next query asks it
    # again, it answers, and the record is gone.
    wait_for(lambda: _search(project)["freshness"]["mode"] == "watcher-clean", HANG_GUARD_S, 0.1)
    assert _record(project) is None


def test_the_in_process_path_waits_once(make_cli_project: Make) -> None:
    """Index.search (no query path): the barrier's wait is paid once, too."""
    project, pid = _running(make_cli_project)
    with _stopped(pid), Index(project.root) as index:
        first = index.search(MARKER, limit=1000)
        assert first.freshness.mode == "fallback", first.freshness
        assert (first.freshness.reason or "").startswith(unanswered.REASON), first.freshness
        struck = _record(project)
        assert struck is not None and struck["strikes"] == 1, struck
        second = index.search(MARKER, limit=1000)
        assert second.freshness.reason == first.freshness.reason
        assert _record(project) == struck
        assert {h.path for h in second.hits} == oracle.containing(project.root, MARKER)


def test_a_stopped_daemon_that_is_killed_is_not_backed_off(make_cli_project: Make) -> None:
    """SIGKILL leaves the socket and lock file behind: the record names a
    process that is gone, so the next query is not told to skip it."""
    project, pid = _running(make_cli_project)
    with _stopped(pid):
        assert _backed_off(_search(project))
        os.kill(pid, signal.SIGKILL)
    # Its files are closed a moment after it stops being listed: wait for
    # the lock (ctindex/client/control.py's own probe), then ask within the window.
    wait_for(lambda: not lock_held(project.paths), HANG_GUARD_S)
    struck = _record(project)
    assert struck is not None
    # Far inside its window, whatever the machine's pace: only the dead
    # process can void it.
    unanswered.record_path(project.paths).write_text(
        json.dumps({**struck, "until": time.time() + 3600})
    )
    assert unanswered.skipped(project.paths) is None
    assert not _backed_off(_search(project))


def test_an_expired_window_asks_again_and_doubles(make_cli_project: Make) -> None:
    project, pid = _running(make_cli_project)
    with _stopped(pid):
        _search(project)
        first = _record(project)
        assert first is not None
        # The window's end has passed (read the record's own clock, no sleep).
        assert unanswered.skipped(project.paths, now=first["until"] + 0.001) is None
        path: Path = unanswered.record_path(project.paths)
        path.write_text(json.dumps({**first, "until": 0}))  # as if it expired
        assert _backed_off(_search(project))
        again = _record(project)
        assert again is not None and again["strikes"] == 2
        assert again["until"] - first["until"] > unanswered.BACKOFF_FIRST_S  # 2 s, then 4 s


def test_check_says_whether_an_answer_has_a_strike_to_clear(tmp_path: Path) -> None:
    """Without a record (or a strike this process could not write) an
    answer clears nothing, so the query path skips the unlink; any record,
    even one no longer in force, is cleared by the next answer."""
    from ctindex.ipc.runtime_dir import RuntimePaths

    paths = RuntimePaths(tmp_path, tmp_path / "runtime")
    paths.dir.mkdir()
    assert unanswered.check(paths) == (None, False)
    record = unanswered.record_path(paths)
    record.write_text(json.dumps({"until": 0, "strikes": 1}))  # expired
    assert unanswered.check(paths) == (None, True)
    unanswered.clear(paths)
    assert not record.exists() and unanswered.check(paths) == (None, False)
    # Read-only runtime folder: the strike lives in this process only.
    key = os.fspath(paths.socket)
    unanswered._unwritten[key] = ("daemon not answering: backed off", time.time() + 60)
    try:
        assert unanswered.check(paths) == ("daemon not answering: backed off", True)
        unanswered.clear(paths)
        assert unanswered.check(paths) == (None, False)
    finally:
        unanswered._unwritten.pop(key, None)


def test_a_file_that_is_no_record_is_absent_and_cleared_by_an_answer(tmp_path: Path) -> None:
    from ctindex.ipc.runtime_dir import RuntimePaths

    paths = RuntimePaths(tmp_path, tmp_path / "runtime")
    paths.dir.mkdir()
    record = unanswered.record_path(paths)
    for bad in ("{torn", "[1, 2]"):
        record.write_text(bad)
        assert unanswered.check(paths) == (None, True)
        unanswered.clear(paths)
        assert not record.exists()
    record.symlink_to(tmp_path / "elsewhere.json")  # dangling, and then not
    assert unanswered.check(paths) == (None, True)
    (tmp_path / "elsewhere.json").write_text(json.dumps({"until": time.time() + 60}))
    assert unanswered.check(paths) == (None, True)  # never followed
    unanswered.clear(paths)
    assert not os.path.lexists(record) and (tmp_path / "elsewhere.json").exists()
