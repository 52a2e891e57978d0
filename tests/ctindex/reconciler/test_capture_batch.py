"""A folder's files read in one native call (ctindex/reconciler/_native.c
read_files, through capture.KeyReader.read_keys) against the same keys read
one at a time by the pure path (KeyReader.read, hashing.read_stable): the
same bytes for each key, the same outcomes and manifest entries once the
pass is complete, whatever changed between the walk and the read; only the
clock reading recorded beside each entry may differ, and it lies within the
read. What the one native attempt can not read stably (gone, not regular, a
folder swapped for a symlink, a size that is not the bytes read) goes to
`read`, whose verdicts are the pure path's own.

The comparison runs with or without the extension; the tests of read_files
itself skip where it is not built (CI builds it, and runs this file forced
pure too).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings

from ctindex.reconciler import Manifest, ReconcileResult, reconcile
from ctindex.reconciler import native as native_mod
from ctindex.reconciler.capture import BatchRead, KeyReader, ShipmentBuilder, complete
from ctindex.reconciler.hashing import FILE_FLAGS
from tests.ctindex.reconciler.fakes import SimpleFilter
from tests.ctindex.reconciler.test_native import CHANGES, NODES, NOW, _build, _change, summary

HAVE_NATIVE = native_mod.module() is not None


def _read_files() -> BatchRead:
    mod = native_mod.module()
    found: BatchRead | None = getattr(mod, "read_files", None)
    if found is None:
        pytest.skip("the native reconciler core is not built here (or CTINDEX_PURE)")
    return found


def _deferred(root: str) -> ReconcileResult:
    return reconcile(root, SimpleFilter(), Manifest(), clock_ns=lambda: NOW, defer_reads=True)


def _finish(
    res: ReconcileResult, root: str, *, batched: bool, calls: list[int]
) -> tuple[list[bytes | None], int, int]:
    """Read res's pending keys (sorted, as a worker does) with the batch path
    on or off, complete res; (each key's bytes, clock before, clock after)."""
    pending = sorted(res.pending, key=lambda p: p.key)
    into = ShipmentBuilder()
    reader = KeyReader(root)  # the real opener and clock: the batch path's conditions
    real = reader._batch_reader

    def counting() -> BatchRead | None:
        found = real()
        if found is None:
            return None

        def call(*args: Any) -> tuple[list[bytes | None], bytes]:
            calls.append(len(args[1]))
            return found(*args)

        return call

    reader._batch_reader = counting if batched else (lambda: None)  # type: ignore[method-assign]
    before = time.time_ns()
    try:
        datas = reader.read_keys(pending, into)
    finally:
        reader.close()
    after = time.time_ns()
    complete(res, [into.shipment()])
    return datas, before, after


def _without_clock(s: dict[str, Any]) -> dict[str, Any]:
    """A summary with each entry's recorded clock reading taken out."""
    return {**s, "table": [(k, e[:6]) for k, e in s["table"]]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=NODES, changes=CHANGES)
def test_a_folder_read_at_once_equals_its_files_read_one_by_one(
    nodes: list[tuple[str, int, str | bytes]], changes: list[tuple[str, int]]
) -> None:
    tmp = tempfile.mkdtemp()
    try:
        root = os.path.join(tmp.encode(), b"root")
        os.mkdir(root)
        files, _denied = _build(root, nodes)
        path = os.fsdecode(root)
        one, batch = _deferred(path), _deferred(path)
        _change(files, changes)  # after the walk, before the reads
        calls: list[int] = []
        datas_one, _, _ = _finish(one, path, batched=False, calls=calls)
        assert calls == []
        datas_batch, before, after = _finish(batch, path, batched=True, calls=calls)
        assert datas_batch == datas_one
        assert _without_clock(summary(batch)) == _without_clock(summary(one))
        if HAVE_NATIVE and datas_one:
            assert sum(calls) > 0  # the batch path ran
        for entry in batch.manifest.raw().values():
            assert before <= entry[6] <= after
    finally:
        shutil.rmtree(tmp)


def _tree(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    for name in ("one.md", "two.md", "three.md"):
        (root / "a" / name).write_text(f"{name} text")
    (root / "a" / "b" / "deep.md").write_text("deep")


SWAPS: dict[str, Callable[[Path], None]] = {
    "file gone": lambda r: (r / "a" / "two.md").unlink(),
    "file now a folder": lambda r: ((r / "a" / "two.md").unlink(), (r / "a" / "two.md").mkdir()),
    "file now a symlink": lambda r: (
        (r / "a" / "two.md").unlink(),
        (r / "a" / "two.md").symlink_to(r / "a" / "one.md"),
    ),
    "file now a fifo": lambda r: ((r / "a" / "two.md").unlink(), os.mkfifo(r / "a" / "two.md")),
    "file grew": lambda r: (r / "a" / "two.md").write_text("much longer than before " * 100),
    "folder now a symlink": lambda r: (
        shutil.move(r / "a" / "b", r / "elsewhere"),
        (r / "a" / "b").symlink_to(r / "elsewhere"),
    ),
    "folder gone": lambda r: shutil.rmtree(r / "a" / "b"),
}


@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_what_changed_since_the_walk_is_reported_as_one_by_one(tmp_path: Path, swap: str) -> None:
    _tree(tmp_path)
    one, batch = _deferred(str(tmp_path)), _deferred(str(tmp_path))
    SWAPS[swap](tmp_path)
    calls: list[int] = []
    datas_one, _, _ = _finish(one, str(tmp_path), batched=False, calls=calls)
    datas_batch, _, _ = _finish(batch, str(tmp_path), batched=True, calls=calls)
    assert datas_batch == datas_one
    assert _without_clock(summary(batch)) == _without_clock(summary(one))
    if swap in ("folder now a symlink", "folder gone"):
        assert b"deep" not in datas_batch and "a/b/deep.md" not in batch.manifest.raw()


def test_read_files_gives_bytes_and_entries_of_what_it_read(folder: tuple[Path, int]) -> None:
    import struct

    read_files = _read_files()
    path, fd = folder
    (path / "a.md").write_bytes(b"alpha")
    os.utime(path / "a.md", ns=(1, 2_000_000_123))  # mtime apart from ctime
    (path / "empty.md").write_bytes(b"")
    os.mkdir(path / "sub")
    (path / "target.md").write_bytes(b"t")
    os.symlink(path / "target.md", path / "link.md")
    odd = os.fsdecode(b"caf\xe9.md")  # not UTF-8: a surrogate escape
    (path / odd).write_bytes(b"odd")
    names = ["a.md", "missing.md", "sub", "link.md", "empty.md", odd]
    before = time.time_ns()
    datas, records = read_files(fd, names, FILE_FLAGS, xxhash.xxh3_128_digest)
    after = time.time_ns()
    assert datas == [b"alpha", None, None, None, b"", b"odd"]
    entries = list(struct.iter_unpack("<qqqQQ16sq", records))
    read = [("a.md", b"alpha"), ("empty.md", b""), (odd, b"odd")]
    for (name, data), entry in zip(read, entries, strict=True):
        st_ = os.lstat(path / name)
        assert entry[:5] == (st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns, st_.st_ino, st_.st_dev)
        assert entry[5] == xxhash.xxh3_128_digest(data)
        assert before <= entry[6] <= after
    assert read_files(fd, [], FILE_FLAGS, xxhash.xxh3_128_digest) == ([], b"")


def test_read_files_leaves_a_read_that_disagrees_with_its_size_to_read_stable() -> None:
    """A procfs file says size 0 and gives bytes: never stable, so the
    native attempt hands it back (None) and read_stable calls it dirty."""
    read_files = _read_files()
    if not os.path.isfile("/proc/self/status") or os.stat("/proc/self/status").st_size != 0:
        pytest.skip("no procfs here, or one that gives sizes")
    fd = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_files(fd, ["status"], FILE_FLAGS, xxhash.xxh3_128_digest) == ([None], b"")
    finally:
        os.close(fd)


def test_read_files_refuses_bad_arguments_cleanly(folder: tuple[Path, int]) -> None:
    read_files = _read_files()
    path, fd = folder
    (path / "a.md").write_bytes(b"alpha")
    with pytest.raises(TypeError):
        read_files(fd, [b"a.md"], FILE_FLAGS, xxhash.xxh3_128_digest)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="16 bytes"):
        read_files(fd, ["a.md"], FILE_FLAGS, lambda data: b"short")
    with pytest.raises(ZeroDivisionError):
        read_files(fd, ["a.md"], FILE_FLAGS, lambda data: 1 // 0)  # type: ignore[arg-type,return-value]


def test_read_files_reads_every_name_it_was_given_whatever_the_callback_does(
    folder: tuple[Path, int],
) -> None:
    """The digest runs Python: emptying the names list from it must not cut
    the loop short or read freed memory."""
    read_files = _read_files()
    path, fd = folder
    names = [f"f{i}.md" for i in range(4)]
    for name in names:
        (path / name).write_bytes(name.encode())

    def digest(data: bytes) -> bytes:
        names.clear()
        return xxhash.xxh3_128_digest(data)

    datas, records = read_files(fd, names, FILE_FLAGS, digest)
    assert datas == [b"f0.md", b"f1.md", b"f2.md", b"f3.md"]
    assert len(records) == 4 * 64
