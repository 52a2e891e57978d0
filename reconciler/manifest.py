"""The manifest: key -> (stat fingerprint, content digest, recorded-at time).

On disk it is a compact binary table (layout below) so that loading 200k
entries is a couple of C-level bulk operations rather than per-entry parsing:

    header   MAGIC(8) version(u32) count(u32) keyblob_len(u64)
    records  count x RECORD (fixed width, in table order -- see below)
    keyblob  fsencoded keys joined by NUL (a file name can never hold NUL)
    trailer  xxh3_128 of everything before it (16 bytes)

In memory each entry is a plain tuple ``(size, mtime_ns, ctime_ns, ino, dev,
digest, recorded_ns)`` -- exactly what ``struct.iter_unpack`` yields, so
loading builds no Python objects per entry beyond that tuple; the public
``Entry``/``Fingerprint`` named tuples are built on access.

Records keep the table's insertion order, which is the order the pass that
built it walked the tree. A loaded table is therefore laid out in memory in
the order the next walk looks entries up, which saves most cache misses of a
nothing-changed pass (measured ~10 %); the sorted key list needed for subtree
queries is built lazily or carried over by the differ.
"""

from __future__ import annotations

import gc
import os
import struct
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ctindex.reconciler.fingerprint import Fingerprint
from ctindex.reconciler.platform_features import can_open_folders

if TYPE_CHECKING:
    from ctindex.reconciler.native import NativeTable

MAGIC = b"CTRMANI\x00"
VERSION = 1
_HEADER = struct.Struct("<8sIIQ")
# size, mtime_ns, ctime_ns, ino, dev, digest, recorded_ns
_RECORD = struct.Struct("<qqqQQ16sq")
_TRAILER_LEN = 16
_FS_ENCODING = sys.getfilesystemencoding()
_FS_ERRORS = sys.getfilesystemencodeerrors()
# POSIX-only / Windows-only open flags (0 where absent): no descriptor leaks
# into a child; no line-ending translation of the binary table on Windows.
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)

# A size no stat can report: marks an entry whose content must be re-hashed on
# the next pass (its file was changing while we read it).
DIRTY_SIZE = -1

RawEntry = tuple[int, int, int, int, int, bytes, int]


class ManifestCorrupt(Exception):
    """The manifest file is truncated, damaged or of an unknown format."""


class Entry(NamedTuple):
    fp: Fingerprint
    digest: bytes  # 16-byte xxh3_128
    recorded_ns: int  # clock reading taken just before the content was read


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Building 200k tuples would trigger repeated collections that rescan the
    half-built table (about a third of the load time); nothing built here
    can form a reference cycle, so collection is simply deferred."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _xxh3_128(data: bytes | memoryview) -> bytes:
    import xxhash  # lazy: the manifest module is imported on light paths too

    return xxhash.xxh3_128_digest(data)


class TableSource(Protocol):
    """A packed table a Manifest is built from only when someone needs the
    dict: a nothing-changed pass with the native scan never does
    (reconciler/native.py), so it never builds one tuple per entry."""

    def materialize(self) -> dict[str, RawEntry]: ...  # the whole table as a dict
    def native(self) -> NativeTable | None: ...  # the same table for the native scan


class _Packed:
    """A verified manifest file as a TableSource (layout in the module docstring)."""

    def __init__(self, data: bytes, count: int, rec_end: int, origin: str) -> None:
        self.data, self.count, self.rec_end, self.origin = data, count, rec_end, origin

    def materialize(self) -> dict[str, RawEntry]:
        body = memoryview(self.data)[:-_TRAILER_LEN]
        count, rec_end, origin = self.count, self.rec_end, self.origin
        keys = bytes(body[rec_end:]).decode(_FS_ENCODING, _FS_ERRORS).split("\0") if count else []
        if len(keys) != count:
            raise ManifestCorrupt(f"{origin}: manifest key count mismatch")
        with _gc_paused():
            records = _RECORD.iter_unpack(body[_HEADER.size : rec_end])
            raw: dict[str, RawEntry] = dict(zip(keys, records, strict=True))
        if len(raw) != count:
            raise ManifestCorrupt(f"{origin}: manifest has duplicate keys")
        return raw

    def native(self) -> NativeTable | None:
        from ctindex.reconciler.native import build_table

        body = memoryview(self.data)[:-_TRAILER_LEN]
        try:
            return build_table(body[_HEADER.size : self.rec_end], body[self.rec_end :], self.count)
        except ValueError as exc:  # key and record counts disagree
            raise ManifestCorrupt(f"{self.origin}: manifest key count mismatch") from exc


class Manifest(Mapping[str, Entry]):
    """Immutable mapping key -> Entry. Build new ones, never mutate.

    Built from a TableSource, the dict is materialized on first use; the
    answers are the same either way."""

    __slots__ = ("_native", "_raw", "_sorted", "_source")

    def __init__(
        self,
        raw: dict[str, RawEntry] | None = None,
        _sorted_keys: list[str] | None = None,
        *,
        source: TableSource | None = None,
    ) -> None:
        self._raw: dict[str, RawEntry] | None = (
            raw if raw is not None else (None if source is not None else {})
        )
        self._sorted: list[str] | None = _sorted_keys
        self._source = source
        self._native: list[NativeTable | None] = []  # decided on first use

    @classmethod
    def from_entries(cls, entries: Mapping[str, Entry] | Iterable[tuple[str, Entry]]) -> Manifest:
        items = entries.items() if isinstance(entries, Mapping) else entries
        return cls({k: (*e.fp, e.digest, e.recorded_ns) for k, e in items})

    # -- Mapping ---------------------------------------------------------------
    def __getitem__(self, key: str) -> Entry:
        r = self.raw()[key]
        return Entry(Fingerprint(r[0], r[1], r[2], r[3], r[4]), r[5], r[6])

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw())

    def __len__(self) -> int:
        if self._raw is None:
            table = self.native_table()
            if table is not None:
                return table.live
        return len(self.raw())

    def __contains__(self, key: object) -> bool:
        if self._raw is None and isinstance(key, str):
            return self.lookup(key) is not None
        return key in self.raw()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Manifest):
            return self.raw() == other.raw()
        return NotImplemented

    def __hash__(self) -> int:  # mappings are unhashable; keep Mapping semantics
        raise TypeError("Manifest is unhashable")

    def __repr__(self) -> str:
        return f"Manifest({len(self)} entries)"

    # -- fast internal access (used by the differ) -----------------------------
    def raw(self) -> dict[str, RawEntry]:
        """The underlying key -> tuple table. Callers must not mutate it."""
        if self._raw is None:
            assert self._source is not None
            with _gc_paused():
                self._raw = self._source.materialize()
        return self._raw

    def lookup(self, key: str) -> RawEntry | None:
        """One entry, without materializing a lazily built table."""
        if self._raw is None:
            table = self.native_table()
            if table is not None:
                from ctindex.reconciler.native import encode_key, unpack

                rec = table.get(encode_key(key))
                return None if rec is None else unpack(rec)
        return self.raw().get(key)

    def raw_view(self) -> Mapping[str, RawEntry]:
        """raw() as a read-only mapping that answers single keys without
        materializing a lazily built table (iterating it does)."""
        return self._raw if self._raw is not None else _RawView(self)

    def native_table(self) -> NativeTable | None:
        """The table as the native scan's lookup table (reconciler/native.py),
        or None: no extension, or a table built as a dict."""
        if not self._native:
            self._native.append(self._source.native() if self._source is not None else None)
        return self._native[0]

    def sorted_keys(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.raw())
        return self._sorted

    # -- serialisation -----------------------------------------------------------
    def known_sorted_keys(self) -> list[str] | None:
        """The sorted key list if already computed (no sorting cost)."""
        return self._sorted

    def to_bytes(self) -> bytes:
        raw = self.raw()
        keys = list(raw)
        blob = "\0".join(keys).encode(_FS_ENCODING, _FS_ERRORS)
        parts = [_HEADER.pack(MAGIC, VERSION, len(keys), len(blob))]
        pack = _RECORD.pack
        parts.extend(pack(*raw[k]) for k in keys)
        parts.append(blob)
        body = b"".join(parts)
        return body + _xxh3_128(body)

    @classmethod
    def from_bytes(cls, data: bytes, *, origin: str = "<bytes>") -> Manifest:
        if len(data) < _HEADER.size + _TRAILER_LEN:
            raise ManifestCorrupt(f"{origin}: manifest truncated ({len(data)} bytes)")
        body = memoryview(data)[:-_TRAILER_LEN]
        if _xxh3_128(body) != data[-_TRAILER_LEN:]:
            raise ManifestCorrupt(f"{origin}: manifest checksum mismatch (damaged or truncated)")
        magic, version, count, blob_len = _HEADER.unpack_from(data, 0)
        if magic != MAGIC or version != VERSION:
            raise ManifestCorrupt(f"{origin}: not a reconciler manifest v{VERSION}")
        rec_end = _HEADER.size + count * _RECORD.size
        if rec_end + blob_len != len(body):
            raise ManifestCorrupt(f"{origin}: manifest sizes inconsistent")
        source = _Packed(data, count, rec_end, origin)
        if _FS_ENCODING.lower() in ("utf-8", "utf8") and _FS_ERRORS == "surrogateescape":
            table = source.native()
            if table is not None:  # the dict is built only if someone asks for it
                if table.live != count:
                    raise ManifestCorrupt(f"{origin}: manifest has duplicate keys")
                return cls(source=source)
        return cls(source.materialize())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Manifest:
        """Read a manifest; FileNotFoundError propagates, damage raises ManifestCorrupt."""
        with open(path, "rb") as f:
            data = f.read()
        return cls.from_bytes(data, origin=os.fspath(path))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Atomic replace: temp sibling, fsync, rename, fsync the folder."""
        target = Path(path)
        data = self.to_bytes()
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _CLOEXEC | _BINARY, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        try:
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if not can_open_folders():  # Windows: a rename needs no folder fsync
            return
        dfd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class _RawView(Mapping[str, RawEntry]):
    """Manifest.raw_view() of a table not yet materialized."""

    __slots__ = ("_m",)

    def __init__(self, manifest: Manifest) -> None:
        self._m = manifest

    def __getitem__(self, key: str) -> RawEntry:
        e = self._m.lookup(key)
        if e is None:
            raise KeyError(key)
        return e

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._m.lookup(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._m.raw())

    def __len__(self) -> int:
        return len(self._m)
