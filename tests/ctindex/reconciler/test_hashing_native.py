"""One read attempt in C (ctindex/reconciler/_native.c read_file) against its pure
specification (ctindex/reconciler/hashing.py `_attempt`): the same bytes, the same
stable verdict and fingerprint, None for the same non-regular files, and the
same OSError (type, errno, message, filename) for the same failures.

Skipped where the extension is not built; CI builds it, so there these
tests always run.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.reconciler import hashing
from ctindex.reconciler import native as native_mod


def _read_file() -> object:
    mod = native_mod.module()
    if mod is None:
        pytest.skip("the native reconciler core is not built here (or CTINDEX_PURE)")
    return mod.read_file


def _both(dir_fd: int, name: str) -> tuple[object, object]:
    """What each path gives: its result, or its error's identity."""
    read_file = _read_file()
    out = []
    for attempt in (
        lambda: read_file(dir_fd, name, hashing.FILE_FLAGS),  # type: ignore[operator]
        lambda: hashing._attempt(dir_fd, name, os.open),
    ):
        try:
            out.append(attempt())
        except OSError as exc:
            out.append((type(exc), exc.errno, exc.strerror, exc.filename, str(exc)))
    return out[0], out[1]


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from([0, 1, 4095, 65535, 65536, 65537, 200_000]) | st.integers(0, 3000))
def test_a_regular_file_reads_the_same(tmp_path_factory: pytest.TempPathFactory, size: int) -> None:
    root = tmp_path_factory.mktemp("r")
    (root / "f.md").write_bytes(os.urandom(size))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        native, pure = _both(fd, "f.md")
    finally:
        os.close(fd)
    assert native == pure
    assert isinstance(native, tuple) and native[1] is True and len(native[0]) == size


def test_what_is_not_a_regular_file_is_none_or_the_same_error(
    folder: tuple[Path, int],
) -> None:
    root, fd = folder
    (root / "dir").mkdir()
    (root / "target.md").write_text("x")
    (root / "link.md").symlink_to("target.md")
    (root / "dangling.md").symlink_to("nowhere.md")
    os.mkfifo(root / "fifo.md")  # O_NONBLOCK: the open does not wait for a writer
    (root / b"\xff-undecodable.md".decode("utf-8", "surrogateescape")).write_text("u")
    names = ["dir", "link.md", "dangling.md", "fifo.md", "missing.md", "target.md/x"]
    names.append(b"\xff-undecodable.md".decode("utf-8", "surrogateescape"))
    got = {name: _both(fd, name) for name in names}
    for name, (native, pure) in got.items():
        assert native == pure, name
    assert got["dir"][0] is None and got["fifo.md"][0] is None
    link = got["link.md"][0]
    assert isinstance(link, tuple) and link[1] == errno.ELOOP  # O_NOFOLLOW refuses the link
    assert isinstance(got["missing.md"][0], tuple) and got["missing.md"][0][3] == "missing.md"


def test_a_file_longer_than_its_stat_is_read_whole_and_not_stable() -> None:
    """A /proc file says size 0 and holds more: both read to EOF and call it unstable."""
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("no /proc here")
    fd = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
    try:
        native, pure = _both(fd, "cmdline")
    finally:
        os.close(fd)
    assert isinstance(native, tuple) and isinstance(pure, tuple)
    assert native[:2] == pure[:2] and native[0] and native[1] is False
