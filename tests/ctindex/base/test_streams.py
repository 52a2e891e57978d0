"""ctindex/base/streams.py: which standard streams a command refuses to run
with, and the one line it says then (docs/cli.md, "Exit codes")."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctindex.base import streams

LINE = "ctindex: cannot write the output: {}\n"
# prepare() in a fresh interpreter whose descriptors the shell set
# up; prints its verdict on the descriptor argv[1] names (the test's pipe).
PROBE = textwrap.dedent("""
    import os, sys
    from ctindex.base.streams import prepare
    code = prepare()
    os.write(int(sys.argv[1]), repr((code, os.path.exists("/proc/self/fd/0"))).encode())
""")


def _probe(redirect: str) -> tuple[tuple[int | None, bool], str]:
    """(the verdict, whether descriptor 0 is open after it) and stderr, for
    a process started with the shell `redirect` (e.g. `1>&-`)."""
    verdict_r, verdict_w = os.pipe()
    try:
        done = subprocess.run(
            [
                "sh",
                "-c",
                f'exec "$@" {redirect}',
                "sh",
                sys.executable,
                "-c",
                PROBE,
                str(verdict_w),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(verdict_w,),
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    finally:
        os.close(verdict_w)
    with os.fdopen(verdict_r, "rb") as verdict:
        return ast.literal_eval(verdict.read().decode()), done.stderr


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
@pytest.mark.parametrize(
    ("redirect", "code", "line"),
    [
        ("", None, ""),
        ("1>&-", 74, LINE.format("stdout is closed")),
        ("2>&-", 74, ""),
        ("1>&- 2>&-", 74, ""),
        ("0<&-", None, ""),
    ],
    ids=["all-open", "stdout-closed", "stderr-closed", "both-closed", "stdin-closed"],
)
def test_prepare(redirect: str, code: int | None, line: str) -> None:
    (got, stdin_open), err = _probe(redirect)
    assert (got, err) == (code, line)
    assert stdin_open  # a closed stdin is given /dev/null: no file takes its number


def test_a_pipe_without_a_reader_is_refused_before_anything_runs() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-c", REFUSED_OR_0],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (74, LINE.format("Broken pipe"))


REFUSED_OR_0 = "import os; from ctindex.base.streams import prepare; os._exit(prepare() or 0)"


def test_reader_gone_only_for_a_pipe_or_socket_nobody_reads(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        assert streams._reader_gone(write_end) is None  # a reader: fine
        os.close(read_end)
        assert streams._reader_gone(write_end) == "Broken pipe"
    finally:
        os.close(write_end)
    with open(tmp_path / "file", "w") as file:
        assert streams._reader_gone(file.fileno()) is None
    import socket

    left, right = socket.socketpair()
    try:
        assert streams._reader_gone(left.fileno()) is None
        right.close()
        assert streams._reader_gone(left.fileno()) == "Broken pipe"
    finally:
        left.close()


def test_the_line_and_the_reason() -> None:
    assert streams.output_failed_line("Broken pipe") == LINE.format("Broken pipe").rstrip("\n")
    assert streams.reason_of(BrokenPipeError(32, "Broken pipe")) == "Broken pipe"
    assert streams.reason_of(OSError("no errno")) == "no errno"
    assert streams.reason_of(OSError()) == "OSError"


@pytest.mark.skipif(os.name != "posix", reason="the console keeps its own stream elsewhere")
def test_an_unbuffered_stdout_is_given_a_buffer() -> None:
    """Under `python -u` the interpreter's text stream writes straight to the
    file and ignores a write cut short; after prepare() the answer goes
    through a buffer that writes the rest or raises."""
    probe = (
        "import sys; from ctindex.base.streams import prepare; before = type(sys.stdout.buffer)\n"
        "assert prepare() is None\n"
        "print(before.__name__, type(sys.stdout.buffer).__name__, sys.stdout.encoding, "
        "sys.stdout.errors, file=sys.stderr)\n"
        "print('caf\\xe9')"
    )
    done = subprocess.run(
        [sys.executable, "-u", "-c", probe],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "utf-8:surrogateescape"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.split() == [b"FileIO", b"BufferedWriter", b"utf-8", b"surrogateescape"]
    assert done.stdout == "café\n".encode()
