"""daemon.log (ctindex/daemon/log.py): one line per lifecycle event,
bounded field values, rotation at 32 KiB keeping two older files, and no
hang or write through whatever is put in the log's place."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.daemon.log import BACKUPS, MAX_BYTES, LifecycleLog

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "daemon.log"


@pytest.fixture
def log(log_path: Path) -> Iterator[LifecycleLog]:
    opened = LifecycleLog(log_path, prefix="pid=7 instance=ab")
    try:
        yield opened
    finally:
        opened.close()


def test_a_line_is_stamp_prefix_event_and_fields(log: LifecycleLog, log_path: Path) -> None:
    log.line("start", version="1.0", watch=True)
    log.line("stop", reason="idle")
    lines = log_path.read_text().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(STAMP + r" pid=7 instance=ab start version=1\.0 watch=True", lines[0])
    assert re.fullmatch(STAMP + r" pid=7 instance=ab stop reason=idle", lines[1])


def test_without_prefix_or_fields_nothing_empty_is_written(log_path: Path) -> None:
    bare = LifecycleLog(log_path)
    try:
        bare.line("start")
    finally:
        bare.close()
    assert re.fullmatch(STAMP + r" start\n", log_path.read_text())


def test_nothing_is_created_before_the_first_line(log_path: Path) -> None:
    quiet = LifecycleLog(log_path)
    quiet.close()
    assert not log_path.exists()


@settings(max_examples=50)
@given(st.text(max_size=1000))
def test_any_field_value_is_one_bounded_line(
    tmp_path_factory: pytest.TempPathFactory, value: str
) -> None:
    path = tmp_path_factory.mktemp("log") / "daemon.log"
    log = LifecycleLog(path)
    try:
        log.line("exit", error=value)
    finally:
        log.close()
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    assert text.endswith("\n") and "\n" not in text[:-1] and "\r" not in text
    field = text[:-1].split(" exit error=", 1)[1]
    assert len(field) <= 300
    if len(value) > 300:
        assert field.endswith("...")


def test_a_path_with_an_undecodable_byte_still_logs_its_line(
    log: LifecycleLog, log_path: Path
) -> None:
    log.line("start", socket=Path("/work/caf\udce9/.ct/okf/runtime/daemon.sock"))
    log.line("stop", reason="idle")
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    assert [line.split()[3] for line in lines] == ["start", "stop"]


def test_a_long_exception_text_is_cut_to_300(log: LifecycleLog, log_path: Path) -> None:
    log.line("exit", error="x" * 1000, where="loop.py:12")
    line = log_path.read_text().splitlines()[0]
    assert f"error={'x' * 297}... where=loop.py:12" in line


def test_rotates_at_32_kib_keeping_two_older_files(log: LifecycleLog, log_path: Path) -> None:
    for n in range(2_000):
        log.line("heartbeat-test", n=n, pad="y" * 60)
    names = sorted(p.name for p in log_path.parent.iterdir())
    assert names == ["daemon.log", "daemon.log.1", "daemon.log.2"]
    assert BACKUPS == 2
    for name in names:
        assert os.path.getsize(log_path.parent / name) <= MAX_BYTES
    # the newest line is in daemon.log, older ones in .1 then .2, none lost within them
    current = log_path.read_text().splitlines()
    older = (log_path.parent / "daemon.log.1").read_text().splitlines()
    assert current[-1].split(" n=")[1].startswith("1999 ")
    last_older = int(older[-1].split(" n=")[1].split()[0])
    first_current = int(current[0].split(" n=")[1].split()[0])
    assert first_current == last_older + 1


@pytest.mark.parametrize("kind", ["fifo", "symlink", "older-log"])
def test_what_took_the_logs_place_is_replaced_by_a_fresh_log(
    tmp_path: Path, log_path: Path, kind: str
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not the daemon's\n")
    if kind == "fifo":
        os.mkfifo(log_path)  # would block an open for writing without a reader
    elif kind == "symlink":
        log_path.symlink_to(outside)
    else:
        log_path.write_text("an older log\n")
    log = LifecycleLog(log_path)
    try:
        log.line("start")
    finally:
        log.close()
    assert log_path.is_file() and not log_path.is_symlink()
    text = log_path.read_text()
    if kind == "older-log":  # a regular log is appended to
        assert text.startswith("an older log\n") and text.endswith(" start\n")
    else:
        assert re.fullmatch(STAMP + r" start\n", text)
    assert outside.read_text() == "not the daemon's\n"


def test_two_logs_do_not_share_lines(tmp_path: Path) -> None:
    one, two = LifecycleLog(tmp_path / "one.log"), LifecycleLog(tmp_path / "two.log")
    try:
        one.line("a")
        two.line("b")
    finally:
        one.close()
        two.close()
    assert (tmp_path / "one.log").read_text().endswith(" a\n")
    assert (tmp_path / "two.log").read_text().endswith(" b\n")
    assert "a\n" not in (tmp_path / "two.log").read_text()
