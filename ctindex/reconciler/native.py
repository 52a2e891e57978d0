"""The optional native folder scan and file read (ctindex/reconciler/_native.c), or None.

``module()`` is the compiled extension when it was built, imports, and the
platform is one it serves; ``None`` otherwise, and then every caller runs the
pure-Python path, which is complete on its own. ``CTINDEX_PURE=1`` in the
environment forces the pure path (CI runs the suite both ways; the outputs
must be byte-identical, docs/reliability.md "Native core"). A failing import
is silent: an install without a compiler is a supported install, not an
error worth a message.

The scan compares keys as bytes, so it is used only where the file system
encoding round-trips names exactly like the packed tables do (UTF-8 with
surrogate escapes: ctindex/store/filetable.py).
"""

from __future__ import annotations

import importlib
import os
import struct
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, cast

from ctindex.reconciler.platform_features import has_dir_fd

if TYPE_CHECKING:  # the manifest loads this module lazily: only the record's type here
    from ctindex.reconciler.manifest import RawEntry

PURE_ENV = "CTINDEX_PURE"
# Codes of the pending entries Table.scan hands back (ctindex/reconciler/_native.c).
CODE_DIRHINT = 1  # the listing said folder: triage a failed stat as a folder's
CODE_DONE = 2  # decided in C (a trusted file, a symlink...): only the name and link flag left
CODE_LINKED = 4  # trusted with st_nlink > 1
_RECORD = struct.Struct("<qqqQQ16sq")  # the record layout both packed tables share


class NativeTable(Protocol):
    """What ctindex/reconciler/_native.c's Table offers (typed for the callers)."""

    live: int
    size: int
    ordered: bool  # the base is searched in place (keys in byte order), not hashed

    def scan(
        self, fd: int, prefix: bytes, seen: bytearray, granularity_ns: int
    ) -> tuple[int, int, int, int, list[tuple[str, int]]]: ...
    def unseen(self, seen: bytearray) -> list[bytes]: ...
    def get(self, key: bytes) -> bytes | None: ...


class _Module(Protocol):
    CODE_DIRHINT: int
    CODE_DONE: int
    CODE_LINKED: int

    def read_file(
        self, dir_fd: int, name: str, flags: int
    ) -> tuple[bytes, bool, int, int, int, int, int] | None: ...
    def Table(
        self,
        records: bytes | memoryview,
        keys: bytes | memoryview,
        count: int,
        delta: list[tuple[bytes, bytes | None]],
    ) -> NativeTable: ...


_loaded: list[_Module | None] = []


def pure_forced() -> bool:
    """Whether CTINDEX_PURE asks for the pure path (any value but empty or 0):
    the one rule for every optional C module (ctindex/base/native_modules.py too)."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def _load() -> _Module | None:
    if pure_forced():
        return None
    if not has_dir_fd():  # the scan lists an open folder descriptor (fdopendir)
        return None
    if (
        sys.getfilesystemencoding().lower() not in ("utf-8", "utf8")
        or sys.getfilesystemencodeerrors() != "surrogateescape"
    ):
        return None
    try:
        mod = cast(_Module, importlib.import_module("ctindex.reconciler._native"))
    except Exception:  # not built, wrong ABI, a broken file: the pure path serves
        return None
    if (mod.CODE_DIRHINT, mod.CODE_DONE, mod.CODE_LINKED) != (CODE_DIRHINT, CODE_DONE, CODE_LINKED):
        return None  # a stale build of another version: not ours to trust
    return mod


def module() -> _Module | None:
    """The extension, or None (pure path). Decided once per process."""
    if not _loaded:
        _loaded.append(_load())
    return _loaded[0]


def reset() -> None:
    """Decide again on the next module() call (tests flip CTINDEX_PURE)."""
    _loaded.clear()


def encode_key(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def pack(entry: RawEntry) -> bytes:
    return _RECORD.pack(*entry)


def unpack(record: bytes) -> RawEntry:
    got: RawEntry = _RECORD.unpack(record)
    return got


def build_table(
    records: bytes | memoryview,
    keys: bytes | memoryview,
    count: int,
    delta: Iterable[tuple[str, RawEntry | None]] = (),
) -> NativeTable | None:
    """A native Table over `count` packed records and their NUL-joined keys
    (in record order) with `delta` applied on top (None removes a key);
    None when the extension is not in use."""
    mod = module()
    if mod is None:
        return None
    items = [(encode_key(k), None if e is None else pack(e)) for k, e in delta]
    return mod.Table(records, keys, count, items)
