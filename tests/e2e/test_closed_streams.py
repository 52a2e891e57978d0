"""Standard streams a command cannot use (ctindex/base/streams.py; docs/cli.md,
"Exit codes"): a closed stdout, a stdout whose reader is gone (a broken
pipe) and a closed stderr end every command with exit 74 and, where stderr
is open, one line; never a traceback, never exit 1 (which `search` reports
as "no hit"), and nothing is read, written or started first. With a daemon
running (the query fast path) and without."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.daemon_support import CliProject, require_daemon

MARK = "zqxv7marker"
DOCS = 60  # enough hits that a `--json` answer outgrows a one-page pipe
HANG_GUARD_S = 120  # a hang, not a speed limit
LINE = "ctindex: cannot write the output: {}\n"
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("search", MARK),
    ("search", "--paths", MARK),
    ("search", "--direct", MARK),
    ("--json", "search", MARK),
    ("show", "a"),
    ("status",),
    ("--json", "status"),
    ("why", "docs/a.md"),
    ("update",),
    ("rebuild",),
    ("verify",),
    ("scopes",),
    ("scopes", "--effective"),
    ("init",),
    ("watch", "status"),
    ("watch", "start"),
    ("watch", "stop"),
    ("mcp",),
)
STREAMS = ("closed-stdout", "broken-pipe", "closed-stderr")


def _make(root: Path, *, watch: bool) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# Docs\n")
    (root / "docs" / "a.md").write_text(f"# A\n\n{MARK} in a.\n")
    for n in range(DOCS):
        (root / "docs" / f"n{n}.md").write_text(f"# Note {n}\n\n{MARK} note {n} {'word ' * 40}\n")
    write_config(root, "docs", watch=watch, idle_seconds=600)
    done = _ctindex(root, "update")
    assert done.returncode == 0, done.stderr
    return root


def _ctindex(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


@pytest.fixture(scope="module")
def no_daemon(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`watch` on, so that any command that got far enough would start a
    daemon: none may (the tree is compared around every run)."""
    return _make(tmp_path_factory.mktemp("streams") / "quiet", watch=True)


@pytest.fixture(scope="module")
def with_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliProject]:
    require_daemon()
    root = _make(tmp_path_factory.mktemp("streams") / "watched", watch=True)
    project = CliProject(root, bundles=())
    # CliProject wrote its own settings: the scope again, and a barrier
    # budget a loaded machine keeps (tests/daemon_support.py TEST_CONFIG).
    write_config(root, "docs", watch=True, idle_seconds=600, barrier_timeout_ms=5000)
    try:
        project.cli("watch", "start")
        project.wait_daemon()
        yield project
    finally:
        project.kill_daemons()


def tree(base: Path) -> dict[str, tuple[int, int, int]]:
    found: dict[str, tuple[int, int, int]] = {}
    for folder, dirs, files in os.walk(base):
        for name in dirs + files:
            st = Path(folder, name).lstat()
            found[os.path.relpath(os.path.join(folder, name), base)] = (
                st.st_mode,
                st.st_size,
                st.st_mtime_ns,
            )
    return found


def run(root: Path, command: tuple[str, ...], stream: str) -> subprocess.CompletedProcess[str]:
    """`ctindex -C root COMMAND` with the stream `stream` unusable from the
    start: closed by the shell before the interpreter starts, or a pipe
    whose read end no process holds any more."""
    argv = [sys.executable, "-m", "ctindex", "-C", str(root), *command]
    if stream == "broken-pipe":
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            return subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                timeout=HANG_GUARD_S,
                check=False,
            )
        finally:
            os.close(write_end)
    closing = ">&-" if stream == "closed-stdout" else "2>&-"
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {closing}', "sh", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


def _expect(done: subprocess.CompletedProcess[str], stream: str) -> None:
    assert done.returncode == 74, (done.returncode, done.stdout, done.stderr)
    if stream == "closed-stderr":
        assert done.stdout == "", done.stdout  # nothing written anywhere instead
    else:
        why = "stdout is closed" if stream == "closed-stdout" else "Broken pipe"
        assert done.stderr == LINE.format(why), done.stderr


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.slow
def test_without_a_daemon(no_daemon: Path, command: tuple[str, ...], stream: str) -> None:
    before = tree(no_daemon)
    _expect(run(no_daemon, command, stream), stream)
    assert tree(no_daemon) == before  # nothing written, no daemon started


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.slow
def test_with_a_daemon(with_daemon: CliProject, command: tuple[str, ...], stream: str) -> None:
    daemons = with_daemon.daemon_pids()
    _expect(run(with_daemon.root, command, stream), stream)
    # Refused before anything: `watch stop` did not stop it either.
    assert with_daemon.daemon_pids() == daemons


# -- the reader leaves mid-answer ------------------------------------------------


def _reader_leaves_after_one_byte(root: Path, *command: str, unbuffered: bool) -> tuple[int, str]:
    """Run the command into a one-page pipe; read one byte (the command is
    writing its answer by then), then close the read end: the rest of the
    answer cannot be written. No timing: the write blocks on the full pipe
    until the reader is gone. `unbuffered`: under PYTHONUNBUFFERED, whose
    text stream would drop the rest of a write cut short without an error
    (ctindex/base/streams.py gives it a buffer)."""
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        pytest.skip("needs F_SETPIPE_SZ to make the pipe smaller than the answer")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, set_size, 4096)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "ctindex", "-C", str(root), *command],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    finally:
        os.close(write_end)
    try:
        assert os.read(read_end, 1)
    finally:
        os.close(read_end)
    _, err = process.communicate(timeout=HANG_GUARD_S)
    return process.returncode, err


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_reader_gone_mid_answer_without_a_daemon(
    no_daemon: Path, json_flag: tuple[str, ...], unbuffered: bool
) -> None:
    got = _reader_leaves_after_one_byte(
        no_daemon, *json_flag, "search", "--direct", "--limit", "100", MARK, unbuffered=unbuffered
    )
    assert got == (74, LINE.format("Broken pipe"))


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_reader_gone_mid_answer_the_daemon_computed(
    with_daemon: CliProject, json_flag: tuple[str, ...], unbuffered: bool
) -> None:
    """The fast path prints the daemon's answer itself (ctindex/fast_entry.py)."""
    answered = json.loads(with_daemon.cli("--json", "search", MARK).stdout)
    assert answered["freshness"]["mode"] == "watcher-clean", answered["freshness"]
    got = _reader_leaves_after_one_byte(
        with_daemon.root, *json_flag, "search", "--limit", "100", MARK, unbuffered=unbuffered
    )
    assert got == (74, LINE.format("Broken pipe"))
