"""Reading ctindex's own configuration and state files without trusting them.

`.ct/index.jsonc`, the roots cache, the runtime records (status, claim,
spawn failure, fast-path record, lock holder), the index manifest and the
other index files are all named paths that anyone able to write the project
can replace by a FIFO (an open for reading waits for a writer forever), a
symlink to `/dev/zero` (a read never ends) or a huge file. Every such read
goes through ``read_bounded`` (docs/reliability.md, "Bounded input"):

- the open never blocks (``O_NONBLOCK``) and never follows a symlink in the
  last component (``O_NOFOLLOW``), and is not inherited
  (``O_CLOEXEC``);
- ``fstat`` on the opened descriptor must say "regular file" (checking the
  descriptor, not the name, leaves no window for a swap);
- at most `limit` bytes are read, and a file larger than that is refused
  rather than truncated.

Refusals raise ``UnsafeFile``, an ``OSError``, so callers that already treat
an unreadable state file as absent keep doing so unchanged; the message is
one line naming the problem.
"""

from __future__ import annotations

import errno
import os
import stat

# Flags that exist only on POSIX are 0 elsewhere (Windows has no FIFOs to
# block on and opens no symlink targets through os.open by default).
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)

MIB = 1 << 20


class UnsafeFile(OSError):
    """A state or configuration file that is not a plain, bounded, regular file."""

    def __init__(
        self, path: str | os.PathLike[str], problem: str, code: int = errno.EINVAL
    ) -> None:
        super().__init__(code, problem, os.fspath(path))
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.filename}: {self.problem}"


def open_regular(path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor on `path` opened with `flags` plus O_NONBLOCK, O_NOFOLLOW
    and O_CLOEXEC, verified to be a regular file (O_NONBLOCK is cleared
    again, so later reads and writes behave normally). FileNotFoundError
    passes through; a symlink, FIFO, device, socket or folder raises
    UnsafeFile."""
    try:
        fd = os.open(path, flags | _NONBLOCK | _NOFOLLOW | _CLOEXEC | _BINARY, mode)
    except OSError as exc:
        # O_NOFOLLOW on a symlink fails with ELOOP (EMLINK on some BSDs).
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise UnsafeFile(path, "is a symbolic link (not followed)", errno.ELOOP) from None
        if exc.errno == errno.ENXIO:  # a write-only open of a FIFO without reader
            raise UnsafeFile(path, "is not a regular file (a FIFO)", errno.ENXIO) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(path, f"is not a regular file ({_kind(st.st_mode)})")
        if _NONBLOCK and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole content of the regular file `path`, at most `limit` bytes
    (a larger file raises UnsafeFile: state is never silently truncated)."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnsafeFile(
                path, f"is too large ({size} bytes, at most {limit} expected)", errno.EFBIG
            )
        chunks: list[bytes] = []
        got = 0
        while got <= limit:  # one byte past the limit tells a file that grew
            # The size fstat gave (plus the byte past it) in one read: a file
            # that did not grow comes back as one chunk, which join() returns
            # as it is, instead of 1 MiB chunks copied once more (an 18 MB
            # file table: ~10 ms).
            chunk = os.read(fd, min(limit + 1 - got, max(size + 1 - got, MIB)))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise UnsafeFile(path, f"grew past {limit} bytes while being read", errno.EFBIG)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_bounded(path: str | os.PathLike[str], limit: int) -> str:
    """``read_bounded`` decoded as UTF-8 (UnicodeDecodeError is a ValueError)."""
    return read_bounded(path, limit).decode("utf-8")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a plain file"


__all__ = ["MIB", "UnsafeFile", "open_regular", "read_bounded", "read_text_bounded"]
