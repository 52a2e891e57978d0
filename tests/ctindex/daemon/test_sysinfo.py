"""Process facts and pending-work counts (ctindex/daemon/sysinfo.py)."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ctindex.daemon import sysinfo


def test_rss_is_this_process_resident_size() -> None:
    got = sysinfo.rss()
    assert isinstance(got, int) and got > 0
    assert got == pytest.approx(psutil.Process(os.getpid()).memory_info().rss, rel=0.5)


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    sysinfo.physical_memory.cache_clear()
    yield
    sysinfo.physical_memory.cache_clear()


def test_physical_memory_is_the_machine_total_and_asked_once(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = sysinfo.physical_memory()
    assert total == psutil.virtual_memory().total
    assert total is not None and total > sysinfo.rss()

    def fail() -> object:
        raise AssertionError("asked again")

    monkeypatch.setattr(psutil, "virtual_memory", fail)
    assert sysinfo.physical_memory() == total  # cached for the process's life


def test_physical_memory_unknown_when_psutil_fails(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail() -> object:
        raise RuntimeError("no /proc/meminfo in this container")

    monkeypatch.setattr(psutil, "virtual_memory", fail)
    assert sysinfo.physical_memory() is None


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_release_memory_frees_reference_cycles() -> None:
    gc.disable()  # the collector must not run before the call under test
    try:
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # a cycle outlives its last reference
        sysinfo.release_memory()
        assert gone() is None
    finally:
        gc.enable()


def test_classify_pending_keys(tmp_path: Path) -> None:
    (tmp_path / "known.md").write_text("x")
    (tmp_path / "new.md").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling.md").symlink_to("nowhere")
    keys = ["known.md", "new.md", "gone.md", "dir", "dangling.md", "dir/gone.md"]
    known = {"known.md", "gone.md", "dir"}
    assert sysinfo.classify(keys, tmp_path, known) == {"add": 2, "change": 2, "remove": 2}
    # a dangling link is present (the entry exists): not a removal
    assert sysinfo.classify(["dangling.md"], tmp_path, set()) == {
        "add": 1,
        "change": 0,
        "remove": 0,
    }
    # no published table: everything present counts as a change
    assert sysinfo.classify(keys, tmp_path, None) == {"add": 0, "change": 4, "remove": 2}
    assert sysinfo.classify([], tmp_path, known) == {"add": 0, "change": 0, "remove": 0}


def _fail_deep() -> None:
    raise ValueError("deep")  # the frame where() names


def test_where_names_the_innermost_frame() -> None:
    with pytest.raises(ValueError) as caught:
        _fail_deep()
    line = _fail_deep.__code__.co_firstlineno + 1
    assert sysinfo.where(caught.value) == f"test_sysinfo.py:{line}"


def test_where_without_a_traceback() -> None:
    assert sysinfo.where(RuntimeError("never raised")) == "?"
