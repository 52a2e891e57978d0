"""The manifest: key -> (stat fingerprint, content digest, recorded-at time).

The reconciler keeps no file of its own: the table it compares against and
returns is stored by its user (ctindex/store/filetable.py writes it as the
index's file table, and hands it back packed as a TableSource).

In memory each entry is a plain tuple ``(size, mtime_ns, ctime_ns, ino, dev,
digest, recorded_ns)`` -- exactly what ``struct.iter_unpack`` yields from a
packed record, so loading builds no Python objects per entry beyond that
tuple; the public ``Entry``/``Fingerprint`` named tuples are built on access.
The sorted key list needed for subtree queries is built lazily or carried
over by the differ.
"""

from __future__ import annotations

import gc
import struct
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ctindex.reconciler.fingerprint import Fingerprint

if TYPE_CHECKING:
    from ctindex.reconciler.native import NativeTable

# A size no stat can report: marks an entry whose content must be re-hashed on
# the next pass (its file was changing while we read it).
DIRTY_SIZE = -1

RawEntry = tuple[int, int, int, int, int, bytes, int]
# An entry packed: size, mtime_ns, ctime_ns, ino, dev, digest, recorded_ns.
# The index's file table stores its records in this layout
# (ctindex/store/filetable.py), and a rebuild's workers send theirs back in it.
RECORD = struct.Struct("<qqqQQ16sq")


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


class TableSource(Protocol):
    """A packed table a Manifest is built from only when someone needs the
    dict: a nothing-changed pass with the native scan never does
    (ctindex/reconciler/native.py), so it never builds one tuple per entry."""

    def materialize(self) -> dict[str, RawEntry]: ...  # the whole table as a dict
    def native(self) -> NativeTable | None: ...  # the same table for the native scan


class PackedTable:
    """A TableSource kept as it was read: `keys` sorted, and their entries
    packed (RECORD) in that order. A rebuild's table of every file is made
    this way (ctindex/reconciler/capture.py complete()), and so is a full
    pass's new table from the previous one (`edited`); either is written out
    as the file table without a tuple per file ever being built
    (ctindex/store/filetable.py encode_manifest).

    `parent` and `edits`: the table this one was made from by `edited`, and
    the edits made (key -> entry, None for a key removed): what a writer
    records as the difference, without comparing the two tables."""

    def __init__(
        self,
        keys: list[str],
        records: bytes,
        parent: PackedTable | None = None,
        edits: dict[str, RawEntry | None] | None = None,
    ) -> None:
        if len(records) != len(keys) * RECORD.size:
            raise ValueError("packed table: keys and records disagree")
        self.keys = keys
        self.records = records
        self.parent = parent
        self.edits = edits
        self._blob: bytes | None = None

    def get(self, key: str) -> RawEntry | None:
        """One entry, by bisecting the keys."""
        i = bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            return RECORD.unpack_from(self.records, i * RECORD.size)
        return None

    def edited(self, edits: dict[str, RawEntry | None]) -> PackedTable:
        """This table with `edits` made: each key set to its entry (inserted
        in order when new), or removed where the entry is None. The runs
        between edits are copied as they are: a pass that changed a few
        files of a million builds no tuple for the others."""
        size, keys = RECORD.size, self.keys
        recs = memoryview(self.records)
        at_key = sorted((bisect_left(keys, k), k) for k in edits)
        out_keys: list[str] = []
        parts: list[bytes | memoryview] = []
        at = 0
        for i, key in at_key:
            if i > at:
                out_keys.extend(keys[at:i])
                parts.append(recs[at * size : i * size])
                at = i
            if at < len(keys) and keys[at] == key:
                at += 1  # replaced or removed
            entry = edits[key]
            if entry is not None:
                out_keys.append(key)
                parts.append(RECORD.pack(*entry))
        out_keys.extend(keys[at:])
        parts.append(recs[at * size :])
        return PackedTable(out_keys, b"".join(parts), self, edits)

    def blob(self) -> bytes:
        """The keys NUL-joined (UTF-8, surrogate escapes kept)."""
        if self._blob is None:
            self._blob = "\0".join(self.keys).encode("utf-8", "surrogateescape")
        return self._blob

    def materialize(self) -> dict[str, RawEntry]:
        return dict(zip(self.keys, RECORD.iter_unpack(self.records), strict=True))

    def native(self) -> NativeTable | None:
        from ctindex.reconciler.native import build_table

        return build_table(self.records, self.blob(), len(self.keys))


class Manifest(Mapping[str, Entry]):
    """Immutable mapping key -> Entry. Build new ones, never mutate.

    Built from a TableSource, the dict is materialized on first use; the
    answers are the same either way."""

    __slots__ = ("_native", "_packed", "_raw", "_sorted", "_source")

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
        self._packed: list[PackedTable | None] = []  # likewise

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
        """The table as the native scan's lookup table (ctindex/reconciler/native.py),
        or None: no extension, or a table built as a dict."""
        if not self._native:
            self._native.append(self._source.native() if self._source is not None else None)
        return self._native[0]

    def sorted_keys(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.raw())
        return self._sorted

    def packed(self) -> PackedTable | None:
        """The table as a PackedTable: the one it was made from, or one its
        source can give (the store's file table: `packed()`) while no dict
        was built from it. ctindex/store/filetable.py writes a packed table out
        as it is; a full pass edits it (ctindex/reconciler/diff.py)."""
        if not self._packed:
            source = self._source
            if isinstance(source, PackedTable):
                self._packed.append(source)
            elif source is not None and self._raw is None and hasattr(source, "packed"):
                self._packed.append(source.packed())
            else:
                self._packed.append(None)
        return self._packed[0]

    def known_sorted_keys(self) -> list[str] | None:
        """The sorted key list if already computed (no sorting cost)."""
        return self._sorted


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
