"""Shared output helpers: one JSON document per command, human units in text.

JSON keeps raw counts, bytes and milliseconds; names that are not
valid UTF-8 appear as ``\\udcXX`` escapes (``ensure_ascii``), which decode back
to the same surrogate-escaped key. Text output uses human units.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TextIO

from ctindex.base.streams import EX_IOERR, cannot_write, reason_of
from ctindex.errors import CtindexError

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(count: int | float) -> str:
    """1536 -> '1.5 KiB'; exact bytes below 1 KiB."""
    if abs(count) < 1024:
        return f"{int(count)} B"
    value = float(count)
    for unit in _UNITS:
        value /= 1024
        # Compared as shown: 1,048,575 B is '1.0 MiB', not '1024.0 KiB'.
        if abs(round(value, 1)) < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def human_ms(ms: int | float | None) -> str:
    """Milliseconds for people: '0.4 ms', '12 ms', '3.2 s', '5 min 3 s', '2 h 5 min'."""
    if ms is None:
        return "-"
    # Each unit is compared as it would be shown, so a value just below a
    # boundary moves to the next unit ('1.0 s', not '1000 ms').
    if round(ms, 1) < 10:
        return f"{ms:.1f} ms"
    if round(ms) < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def human_count(count: int, singular: str, plural: str | None = None) -> str:
    """'1 document', '12,345 documents'."""
    word = singular if count == 1 else (plural or singular + "s")
    return f"{count:,} {word}"


class OutputError(CtindexError):
    """stdout cannot be written (a full disk, `> /dev/full`, an I/O error, a
    pipe whose reader is gone): exit 74, EX_IOERR of sysexits.h (docs/cli.md;
    ctindex/base/streams.py decides for every stream)."""

    exit_code = EX_IOERR


def counted_keys(count: int, sample: Sequence[str], shown: int = 5) -> str:
    """`3 ("a", "b", "c")`, or `9 ("a", …, "e" and 4 more)`: a count of
    keys and the first few of `sample` (JSON-escaped: names may hold
    newlines)."""
    listed = ", ".join(json.dumps(k) for k in sample[:shown])
    more = f" and {count - shown} more" if count > shown else ""
    return f"{count} ({listed}{more})"


def output_failed(exc: OSError) -> OutputError:
    return OutputError(cannot_write(reason_of(exc)))


def emit(stream: TextIO, text: str) -> None:
    """Write command output; a write error (a broken pipe included) is one
    OutputError line, not a traceback."""
    try:
        stream.write(text)
    except OSError as exc:
        raise output_failed(exc) from None


def flush(stream: TextIO) -> None:
    try:
        stream.flush()
    except OSError as exc:
        raise output_failed(exc) from None


def write_json(stream: TextIO, document: object) -> None:
    """The command's single JSON document, newline-terminated."""
    emit(stream, json.dumps(document, indent=2, ensure_ascii=True) + "\n")


def table(rows: Sequence[Sequence[str]], indent: str = "") -> str:
    """Left-aligned columns separated by two spaces (last column unpadded)."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append(indent + "  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def path_messages(messages: dict[str, str]) -> list[dict[str, str]]:
    """{path, message} items sorted by path, for a diagnostics table whose
    messages begin with their own path (the provider's form, which a
    message read alone needs): the path is said once, in `path`."""
    return [
        {"path": key, "message": message.removeprefix(f"{key}: ")}
        for key, message in sorted(messages.items())
    ]


def show_key(key: str) -> str:
    """A key as text: the project root is '.'."""
    return key or "."


class Progress:
    """A one-line progress bar on stderr, only when it is a terminal."""

    def __init__(self, stream: TextIO | None, label: str) -> None:
        self.stream = stream if stream is not None and _isatty(stream) else None
        self.label = label
        self._last = 0.0
        self._shown = False

    def __call__(self, done: int, total: int | None) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        if total:
            width = 30
            fill = width * done // max(total, 1)
            line = f"{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}"
        else:
            line = f"{self.label}: {done} files read"
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self.stream is not None and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
