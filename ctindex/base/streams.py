"""Standard streams a command cannot use: the one place that decides.

Every `ctindex` process (ctindex/fast_entry.py, ctindex/cli.py) calls
``prepare`` before anything else, and every failed write of the command's
output ends in ``output_failed_line`` (docs/cli.md, "Exit codes"):

* stdout closed (descriptor 1 not open; the interpreter then sets
  ``sys.stdout`` to None), or a pipe or socket whose reader is gone
  (``| head -0``, a consumer that exited): exit 74, EX_IOERR of sysexits.h,
  with the one line ``ctindex: cannot write the output: <reason>`` on
  stderr, before anything is read, written or started.
* stderr closed: exit 74 too, and nothing can be said. A process without
  descriptor 1 or 2 would hand that number to the next file it opens (an
  index file, the configuration), and any line meant for the terminal
  would be written into that file: no command runs that way.
* stdin closed: taken by /dev/null, for the same reason (`ctindex mcp`
  reads it; nothing else does).
* stdout unbuffered (`python -u`, PYTHONUNBUFFERED): given a buffer. The
  interpreter's text stream over an unbuffered file ignores a write cut
  short (the reader leaving mid-answer, a signal): the rest of the answer
  would be lost without an error, and the command would exit 0.
* stdout failing later (the reader leaves mid-answer, a full disk): the
  same exit and the same line, wherever the write happens (ctindex/base/output.py
  ``emit``/``flush``, the final flush in ctindex/cli.py ``console``, the
  daemon's answer printed by ctindex/fast_entry.py). A broken pipe is one
  such failure: the output the caller asked for is lost, and a script
  must not read that as "no hit" (exit 1) or as success.

Standard library only, and ``select`` only for a stdout that is a pipe or a
socket: the query fast path runs this first (docs/decisions/perf.md, "Query path").
"""

from __future__ import annotations

import errno
import os
import stat
import sys

EX_IOERR = 74  # sysexits.h: an error while doing I/O
PROG = "ctindex"
CLOSED = "stdout is closed"


def cannot_write(reason: str) -> str:
    """The message for output that cannot be written (OutputError's,
    ctindex/base/output.py); the line on stderr is `ctindex: ` and this."""
    return f"cannot write the output: {reason}"


def output_failed_line(reason: str) -> str:
    """The one stderr line for output that cannot be written (no newline)."""
    return f"{PROG}: {cannot_write(reason)}"


def line_for(exc: OSError) -> str:
    """The one stderr line for a write to stdout that raised `exc`."""
    return output_failed_line(reason_of(exc))


def reason_of(exc: OSError) -> str:
    """Why a write failed, as the line says it (`Broken pipe`, `No space left on device`)."""
    return exc.strerror or str(exc) or type(exc).__name__


def prepare() -> int | None:
    """EX_IOERR when stdout or stderr cannot be used (its line already on
    stderr when stderr is open), else None, with a closed stdin given
    /dev/null and an unbuffered stdout a buffer. Cheap: an fstat per
    descriptor, a poll for a piped stdout."""
    if not _is_open(0):
        _fill_stdin()
    err_open = _is_open(2) and sys.stderr is not None
    if not _is_open(1) or sys.stdout is None:
        why: str | None = CLOSED
    else:
        why = _reader_gone(1)
    if why is None and err_open:
        _buffer_stdout()
        return None
    if why is not None and err_open:
        say(output_failed_line(why))
    return EX_IOERR


def say(line: str) -> None:
    """`line` on stderr, straight to the descriptor (no Python stream in
    between that could be missing or hold a half-written buffer); a closed
    or full stderr is ignored: the exit code says it all then."""
    data = (line + "\n").encode("utf-8", "backslashreplace")
    try:
        while data:
            data = data[os.write(2, data) :]
    except OSError:
        pass


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _fill_stdin() -> None:
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return
    if fd != 0:  # another thread took descriptor 0 meanwhile: leave it be
        os.close(fd)
    elif sys.stdin is None:  # as the interpreter left it: a reader finds the end at once
        sys.stdin = open(fd, encoding="utf-8", closefd=False)  # noqa: SIM115


def _buffer_stdout() -> None:
    """A buffered text stream on descriptor 1 in place of an unbuffered one,
    same encoding and error handler; the old one stays open as
    ``sys.__stdout__`` (nothing is pending in it: it writes through)."""
    import io

    stdout = sys.stdout
    if not isinstance(stdout, io.TextIOWrapper) or not isinstance(stdout.buffer, io.RawIOBase):
        return
    if os.name != "posix":  # the text mode's newline translation is the console's there
        return
    sys.stdout = open(  # noqa: SIM115 (it lives as long as the process)
        stdout.fileno(),
        "w",
        encoding=stdout.encoding,
        errors=stdout.errors,
        newline="\n",
        closefd=False,
    )


def _reader_gone(fd: int) -> str | None:
    """`Broken pipe` when `fd` is a pipe or socket nobody reads any more
    (the kernel reports POLLERR for a pipe without a reader, POLLHUP for a
    socket shut down both ways), else None. Elsewhere (a file, a terminal)
    a failure shows only when written, and is handled there."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return CLOSED
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    import select

    if not hasattr(select, "poll"):  # Windows: the write says so
        return None
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    try:
        events = poller.poll(0)
    except OSError:
        return None
    for _fd, revents in events:
        if revents & (select.POLLERR | select.POLLHUP):
            return os.strerror(errno.EPIPE)
    return None
