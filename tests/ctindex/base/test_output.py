"""Output helpers (ctindex/base/output.py): human units, tables, the JSON
document, and stdout write failures as one OutputError (exit 74, docs/cli.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctindex.base.output import (
    OutputError,
    Progress,
    counted_keys,
    emit,
    flush,
    human_bytes,
    human_count,
    human_ms,
    path_messages,
    show_key,
    table,
    write_json,
)
from ctindex.errors import CtindexError

# -- human units ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024**2, "1.0 MiB"),
        (5 * 1024**3 // 2, "2.5 GiB"),
        (1024**4, "1.0 TiB"),
        (1024**5, "1.0 PiB"),
        (3 * 1024**6, "3072.0 PiB"),  # no unit past PiB: the number grows
        (-2048, "-2.0 KiB"),
        (512.9, "512 B"),  # below 1 KiB: whole bytes
    ],
)
def test_human_bytes(count: float, text: str) -> None:
    assert human_bytes(count) == text


_UNIT_POWER = {"B": 0, "KiB": 1, "MiB": 2, "GiB": 3, "TiB": 4, "PiB": 5}


@given(st.integers(min_value=0, max_value=1024**6))
def test_human_bytes_reads_back_within_its_rounding(count: int) -> None:
    match = re.fullmatch(r"(\d+(?:\.\d)?) (B|KiB|MiB|GiB|TiB|PiB)", human_bytes(count))
    assert match, human_bytes(count)
    scale = 1024 ** _UNIT_POWER[match[2]]
    assert abs(Fraction(match[1]) * scale - count) <= Fraction(scale, 20)  # ±0.05 unit
    if match[2] == "B":
        assert int(match[1]) == count < 1024


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "-"),
        (0, "0.0 ms"),
        (0.44, "0.4 ms"),
        (10, "10 ms"),
        (12.4, "12 ms"),
        (1000, "1.0 s"),
        (3200, "3.2 s"),
        (60_000, "1 min 0 s"),
        (303_000, "5 min 3 s"),
        (3_600_000, "1 h 0 min"),
        (7_500_000, "2 h 5 min"),
    ],
)
def test_human_ms(ms: float | None, text: str) -> None:
    assert human_ms(ms) == text


@pytest.mark.parametrize(
    ("shown", "boundary"),
    [
        (lambda: human_bytes(1024**2 - 1), "1.0 MiB"),
        (lambda: human_ms(999.6), "1.0 s"),
        (lambda: human_ms(59_999), "1 min 0 s"),
    ],
    ids=["bytes", "ms", "seconds"],
)
def test_human_units_just_below_a_boundary_show_the_next_unit(
    shown: Callable[[], str], boundary: str
) -> None:
    assert shown() == boundary


def test_human_count() -> None:
    assert human_count(1, "document") == "1 document"
    assert human_count(0, "document") == "0 documents"
    assert human_count(12_345, "document") == "12,345 documents"
    assert human_count(1, "entry", "entries") == "1 entry"
    assert human_count(2, "entry", "entries") == "2 entries"


# -- keys, tables, diagnostics --------------------------------------------------------


def test_counted_keys_lists_the_first_five_and_says_how_many_more() -> None:
    assert counted_keys(3, ["a", "b", "c"]) == '3 ("a", "b", "c")'
    keys = [chr(ord("a") + i) for i in range(9)]
    assert counted_keys(9, keys) == '9 ("a", "b", "c", "d", "e" and 4 more)'
    # a sample shorter than the count (a report keeps only the first few keys)
    assert counted_keys(30, keys[:2]) == '30 ("a", "b" and 25 more)'
    assert counted_keys(2, ["a", "b"], shown=1) == '2 ("a" and 1 more)'


def test_counted_keys_is_one_line_whatever_the_names_hold() -> None:
    text = counted_keys(2, ["new\nline", "tab\there"])
    assert "\n" not in text and "\t" not in text
    assert text == '2 ("new\\nline", "tab\\there")'


def test_table_pads_every_column_but_the_last() -> None:
    rows = [["name", "count", "note"], ["a", "12345", "x"], ["longer", "1", ""]]
    assert table(rows) == "name    count  note\na       12345  x\nlonger  1\n"
    assert table(rows, indent="  ").splitlines()[0] == "  name    count  note"
    assert table([]) == ""


def test_table_of_one_column_is_the_cells_as_lines() -> None:
    assert table([["a"], ["bbb"]]) == "a\nbbb\n"


def test_show_key_names_the_project_root_dot() -> None:
    assert show_key("") == "."
    assert show_key("okf/a.md") == "okf/a.md"


def test_path_messages_sorted_and_the_path_said_once() -> None:
    messages = {
        "z.md": "z.md: not UTF-8",
        "a.md": "a.md: line 3: bad frontmatter",
        "b.md": "something without its path",
        "c.md": "c.md:no space, kept",
    }
    assert path_messages(messages) == [
        {"path": "a.md", "message": "line 3: bad frontmatter"},
        {"path": "b.md", "message": "something without its path"},
        {"path": "c.md", "message": "c.md:no space, kept"},
        {"path": "z.md", "message": "not UTF-8"},
    ]
    assert path_messages({}) == []


# -- the JSON document ----------------------------------------------------------------


def test_write_json_is_one_newline_terminated_ascii_document() -> None:
    out = io.StringIO()
    document = {"path": "caf\u00e9/\udc80.md", "n": 1}
    write_json(out, document)
    text = out.getvalue()
    assert text.endswith("}\n") and text.count("\n}") == 1
    assert text.isascii()
    assert "\\udc80" in text  # an undecodable byte stays an escape ...
    assert json.loads(text) == document  # ... that decodes back to the same key


# -- stdout that cannot be written ----------------------------------------------------


def test_output_error_is_a_ctindex_error_with_exit_74() -> None:
    assert issubclass(OutputError, CtindexError)
    assert OutputError.exit_code == 74


@pytest.fixture
def dev_full() -> Iterator[io.TextIOWrapper]:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    stream = open("/dev/full", "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        yield stream
    finally:
        with contextlib.suppress(OSError):  # the unwritten buffer fails once more
            stream.close()


def test_emit_into_a_full_device_is_one_output_error(dev_full: io.TextIOWrapper) -> None:
    with pytest.raises(OutputError) as caught:
        emit(dev_full, "x" * (1 << 20))  # past any buffer: the write itself fails
        flush(dev_full)
    assert str(caught.value) == "cannot write the output: No space left on device"
    assert caught.value.exit_code == 74
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_flush_into_a_full_device_is_one_output_error(dev_full: io.TextIOWrapper) -> None:
    emit(dev_full, "small")  # buffered: nothing reaches the device yet
    with pytest.raises(OutputError, match="No space left on device"):
        flush(dev_full)


def test_write_json_into_a_full_device_is_one_output_error(dev_full: io.TextIOWrapper) -> None:
    with pytest.raises(OutputError):
        write_json(dev_full, {"results": ["x" * 100] * 20_000})


def test_a_descriptor_closed_under_the_stream_is_an_output_error(tmp_path: Path) -> None:
    stream = open(tmp_path / "out", "w", encoding="utf-8")  # noqa: SIM115
    os.close(stream.fileno())
    try:
        emit(stream, "answer\n")
        with pytest.raises(OutputError, match="Bad file descriptor"):
            flush(stream)
    finally:
        with pytest.raises(OSError):
            stream.close()


def test_a_closed_pipe_is_an_output_error() -> None:
    """A pipe whose reader is gone loses the output as a full disk does:
    exit 74 and one line (ctindex/base/streams.py), not a quiet exit."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = open(write_end, "w", encoding="utf-8")  # noqa: SIM115
    try:
        with pytest.raises(OutputError, match=r"^cannot write the output: Broken pipe$") as caught:
            emit(stream, "x" * (1 << 20))
            flush(stream)
        assert caught.value.exit_code == 74
    finally:
        with contextlib.suppress(BrokenPipeError):
            stream.close()


# -- progress -------------------------------------------------------------------------


def test_progress_is_silent_when_stderr_is_not_a_terminal() -> None:
    err = io.StringIO()
    progress = Progress(err, "reading")
    progress(5, 10)
    progress(10, 10)
    progress.done()
    assert err.getvalue() == ""
    Progress(None, "reading")(1, None)  # no stream at all: nothing to write to


def test_progress_on_a_closed_stream_is_silent() -> None:
    err = io.StringIO()
    err.close()
    progress = Progress(err, "reading")  # isatty() on a closed stream raises ValueError
    progress(1, 2)
    progress.done()


def test_progress_draws_one_line_on_a_terminal_and_clears_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter([100.0, 100.05, 100.06, 100.07, 100.5])
    monkeypatch.setattr("ctindex.base.output.time.monotonic", lambda: next(clock))
    with _terminal() as (tty, leader):
        progress = Progress(tty, "reading")
        progress(3, 10)
        progress(4, 10)  # within 0.1 s of the last drawing: skipped
        progress(10, 10)  # the last step is drawn even so
        progress(7, None)  # within 0.1 s and no total: skipped
        progress(8, 10)  # 0.1 s on: drawn
        progress.done()
        text = _drain(leader).decode()
    assert text == (
        "\rreading [#########.....................] 3/10\x1b[K"
        f"\rreading [{'#' * 30}] 10/10\x1b[K"
        f"\rreading [{'#' * 24}{'.' * 6}] 8/10\x1b[K"
        "\r\x1b[K"
    )


def test_progress_without_a_total_counts_files() -> None:
    with _terminal() as (tty, leader):
        Progress(tty, "reading")(42, None)
        assert _drain(leader).decode() == "\rreading: 42 files read\x1b[K"


def test_progress_done_writes_nothing_when_nothing_was_drawn() -> None:
    with _terminal() as (tty, leader):
        Progress(tty, "reading").done()
        assert _drain(leader) == b""


@contextlib.contextmanager
def _terminal() -> Iterator[tuple[io.TextIOWrapper, int]]:
    leader, follower = os.openpty()
    try:
        with open(follower, "w", encoding="utf-8") as tty:
            yield tty, leader
    finally:
        os.close(leader)


def _drain(fd: int) -> bytes:
    """What the terminal received so far (the follower must still be open:
    a pty's leader reads EIO once it is closed)."""
    import select

    got = b""
    while select.select([fd], [], [], 0.2)[0]:
        got += os.read(fd, 4096)
    return got
