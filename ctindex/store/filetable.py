"""The reconciler file table of a generation: a sorted, immutable base file
plus a small delta carried inline in MANIFEST.

Rewriting a 40k-entry table (3 MB) for every one-file change cost most of a
small update; now a change touches only the delta, and the base is rewritten
(compacted) when the delta grows past DELTA_MAX keys or a rebuild starts
over. Keys are stored sorted so a narrowed pass can read just the entries
under the folders it looks at (bisect), without building the whole table.

Base file (``files-<gen>-<rand>.bin``), little-endian::

    header   magic "CTFILES\\0" | u32 version | u32 count | u64 blob_len
    records  count x (i64 size, i64 mtime_ns, i64 ctime_ns, u64 ino, u64 dev,
             16-byte xxh3-128 digest, i64 recorded_ns), in key order
    offsets  u32 key_off[count + 1] into the blob
    blob     keys (UTF-8, surrogateescape) joined by NUL, sorted by code point
    trailer  xxh3-128 of everything before it

Delta (``MANIFEST.files_delta``): key -> [size, mtime_ns, ctime_ns, ino, dev,
digest hex, recorded_ns], or null for a key removed since the base.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctindex.policy.project import key_under_any, key_within
from ctindex.reconciler.manifest import RECORD, PackedTable
from ctindex.store.durable import IndexCorrupt, read_all

if TYPE_CHECKING:
    from ctindex.reconciler import Fingerprint, Manifest, ReconcileResult
    from ctindex.reconciler.manifest import RawEntry as RawEntry
    from ctindex.reconciler.native import NativeTable
    from ctindex.store.generation import StoreManifest

MAGIC = b"CTFILES\x00"
VERSION = 1
DELTA_MAX = 256  # keys in the inline delta before the base is rewritten
_HEAD = struct.Struct("<8sIIQ")
_RECORD = RECORD  # the reconciler's packed entry is this format's record
_SIZE = struct.Struct(f"<q{RECORD.size - 8}x")  # a record's size field alone
_TRAILER = 16

# One file-table entry is the reconciler's RawEntry (ctindex/reconciler/manifest.py):
# (size, mtime_ns, ctime_ns, ino, dev, digest, recorded_ns), kept a plain
# tuple because tables hold tens of thousands of them (entry[:5] is the full
# stat fingerprint, entry[6] the clock reading taken just before the content
# was read); `RecordedFile` is the named view the daemon is handed.
Delta = dict[str, "RawEntry | None"]
# The delta as MANIFEST carries it: key -> [size, mtime_ns, ctime_ns, ino,
# dev, digest hex, recorded_ns], or None for a key removed since the base.
DeltaJSON = dict[str, "list[int | str] | None"]


class RecordedFile(NamedTuple):
    """A file as a file table records it: the full stat fingerprint it was
    read under, and when it was read."""

    fingerprint: Fingerprint
    recorded_ns: int


def _xxh3(data: bytes | memoryview) -> bytes:
    import xxhash  # lazy: only writers and reconciling readers pay for it

    return xxhash.xxh3_128_digest(data)


def encode_manifest(m: Manifest) -> list[bytes]:
    """A whole table as the chunks of its base file. One kept packed
    (ctindex/reconciler/manifest.py PackedTable: a rebuild's, or a full
    pass's edit of the previous table) is written from its records and keys
    as they are: no tuple per file, and no copy of the whole file joined in
    memory."""
    packed = m.packed()
    return _encode(packed if packed is not None else _packed(m.raw()))


def encode_base(raw: Mapping[str, RawEntry]) -> bytes:
    return b"".join(_encode(_packed(raw)))


def _packed(raw: Mapping[str, RawEntry]) -> PackedTable:
    keys = sorted(raw)
    pack = _RECORD.pack
    return PackedTable(keys, b"".join([pack(*raw[k]) for k in keys]))


def _encode(packed: PackedTable) -> list[bytes]:
    """The base file's layout (the module's docstring), the one writer of it."""
    import xxhash

    lengths = (
        len(k) + 1 if k.isascii() else len(k.encode("utf-8", "surrogateescape")) + 1
        for k in packed.keys
    )
    offs = array("I", [0])
    offs.extend(accumulate(lengths))
    if sys.byteorder != "little":  # pragma: no cover - the format is little-endian
        offs.byteswap()
    blob = packed.blob()
    chunks = [
        _HEAD.pack(MAGIC, VERSION, len(packed.keys), len(blob)),
        packed.records,
        offs.tobytes(),
        blob,
    ]
    digest = xxhash.xxh3_128()
    for chunk in chunks:
        digest.update(chunk)
    return [*chunks, digest.digest()]


def source_bytes(m: Manifest) -> int:
    """Total size of the files a table records (a dirty entry counts none)."""
    packed = m.packed()
    if packed is None:
        return sum(e[0] for e in m.raw().values() if e[0] > 0)
    return sum(n for (n,) in _SIZE.iter_unpack(packed.records) if n > 0)


class BaseTable:
    """A verified base file; entries are decoded on demand."""

    def __init__(self, data: bytes, origin: str) -> None:
        if len(data) < _HEAD.size + 4 + _TRAILER:
            raise IndexCorrupt(f"{origin}: file table truncated")
        body = memoryview(data)[:-_TRAILER]
        if _xxh3(body) != data[-_TRAILER:]:
            raise IndexCorrupt(f"{origin}: file table checksum mismatch (damaged or truncated)")
        magic, version, count, blob_len = _HEAD.unpack_from(data, 0)
        if magic != MAGIC or version != VERSION:
            raise IndexCorrupt(f"{origin}: not a file table of version {VERSION}")
        self.count = count
        self._rec = _HEAD.size
        self._offs = self._rec + count * _RECORD.size
        self._blob = self._offs + 4 * (count + 1)
        if self._blob + blob_len != len(body):
            raise IndexCorrupt(f"{origin}: file table sizes inconsistent")
        self._data = data

    @classmethod
    def load(cls, path: Path) -> BaseTable:
        return cls(read_all(path), str(path))

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> str:  # the i-th key: lets bisect run on the file
        lo, hi = struct.unpack_from("<II", self._data, self._offs + 4 * i)
        start = self._blob
        return self._data[start + lo : start + hi - 1].decode("utf-8", "surrogateescape")

    def entry(self, i: int) -> RawEntry:
        return _RECORD.unpack_from(self._data, self._rec + i * _RECORD.size)

    def everything(self) -> dict[str, RawEntry]:
        if not self.count:
            return {}
        keys = self._data[self._blob : -_TRAILER].decode("utf-8", "surrogateescape").split("\0")
        if len(keys) != self.count:
            raise IndexCorrupt("file table key count mismatch")
        records = _RECORD.iter_unpack(memoryview(self._data)[self._rec : self._offs])
        return dict(zip(keys, records, strict=True))

    def subtrees(self, scopes: Iterable[str]) -> dict[str, RawEntry]:
        """Entries of the keys equal to or below each scope key ("" = all)."""
        out: dict[str, RawEntry] = {}
        for s in scopes:
            if not s:
                return self.everything()
            i = bisect_left(self, s)
            if i < self.count and self[i] == s:
                out[s] = self.entry(i)
            # '0' follows '/' in code-point order: [s/, s0) is exactly the subtree.
            lo = bisect_left(self, s + "/", i)
            hi = bisect_left(self, s + "0", lo)
            for j in range(lo, hi):
                out[self[j]] = self.entry(j)
        return out


class _FullTable:
    """A base file plus its delta as a reconciler TableSource (ctindex/reconciler/manifest.py)."""

    def __init__(self, base: BaseTable, delta: Delta) -> None:
        # The check everything() makes, made now: damage must surface while
        # loading (the caller rebuilds then), not in the middle of a pass.
        nuls = base._data.count(b"\0", base._blob, len(base._data) - _TRAILER)
        if base.count and nuls != base.count - 1:
            raise IndexCorrupt("file table key count mismatch")
        self.base, self.delta = base, delta

    def packed(self) -> PackedTable | None:
        """The base's keys and records as they are, the delta applied; None
        for a base whose keys are not in order (ctindex writes them sorted:
        editing by bisection needs that, so such a table is made a dict)."""
        from itertools import pairwise

        b = self.base
        keys = (
            b._data[b._blob : -_TRAILER].decode("utf-8", "surrogateescape").split("\0")
            if b.count
            else []
        )
        if not all(a < z for a, z in pairwise(keys)):
            return None
        table = PackedTable(keys, b._data[b._rec : b._offs])
        return table.edited(dict(self.delta)) if self.delta else table

    def materialize(self) -> dict[str, RawEntry]:
        raw = self.base.everything()
        for key, e in self.delta.items():
            if e is None:
                raw.pop(key, None)
            else:
                raw[key] = e
        return raw

    def native(self) -> NativeTable | None:
        from ctindex.reconciler.native import build_table

        b = self.base
        body = memoryview(b._data)[:-_TRAILER]
        try:
            return build_table(body[b._rec : b._offs], body[b._blob :], b.count, self.delta.items())
        except ValueError as exc:
            raise IndexCorrupt(f"file table keys and records disagree ({exc})") from exc


def delta_from_json(raw: Mapping[str, list[int | str] | None]) -> Delta:
    out: Delta = {}
    for key, v in raw.items():
        if v is None:
            out[key] = None
            continue
        digest = v[5]
        if not isinstance(digest, str):
            raise TypeError(f"digest of {key!r} is not a hex string")
        out[key] = (
            int(v[0]),
            int(v[1]),
            int(v[2]),
            int(v[3]),
            int(v[4]),
            bytes.fromhex(digest),
            int(v[6]),
        )
    return out


def delta_to_json(delta: Mapping[str, RawEntry | None]) -> DeltaJSON:
    return {k: None if e is None else [*e[:5], e[5].hex(), e[6]] for k, e in sorted(delta.items())}


def load(
    index_dir: Path,
    files: str | None,
    delta_json: Mapping[str, list[int | str] | None],
    scopes: list[str] | None = None,
) -> Manifest:
    """The table of a generation (base + delta) as a reconciler Manifest:
    all of it, or only the entries under `scopes` (minimal scope keys)."""
    from ctindex.reconciler import Manifest

    try:
        delta = delta_from_json(delta_json)
    except (TypeError, ValueError, IndexError) as exc:
        raise IndexCorrupt(f"{index_dir}: file table delta unreadable ({exc})") from exc
    raw: dict[str, RawEntry] = {}
    if files is not None:
        base = BaseTable.load(index_dir / files)
        if scopes is None:
            # Built as a dict only if someone needs one: a nothing-changed
            # pass with the native scan compares against the file in place.
            return Manifest(source=_FullTable(base, delta))
        raw = base.subtrees(scopes)
    for key, e in delta.items():
        if scopes is not None and not key_under_any(key, scopes):
            continue
        if e is None:
            raw.pop(key, None)
        else:
            raw[key] = e
    return Manifest(raw)


def changes(before: Mapping[str, RawEntry], after: Mapping[str, RawEntry]) -> Delta:
    """What turns `before` into `after` (same key space)."""
    out: Delta = {k: e for k, e in after.items() if before.get(k) != e}
    out.update((k, None) for k in before if k not in after)
    return out


def merge(old: Delta, new: Delta) -> Delta:
    """Delta `new` applied on top of delta `old` (a null for a key the base
    never had is harmless: loading drops it)."""
    merged = dict(old)
    merged.update(new)
    return merged


# -- a generation's table ------------------------------------------------------------


def load_file_table(
    index_dir: Path, m: StoreManifest, only: Iterable[str] | None = None
) -> Manifest:
    """The reconciler file table a generation names (base + delta, empty when
    it names none): all of it, or only the entries under the keys `only`."""
    from ctindex.reconciler.diff import minimal_scopes

    scopes = None if only is None else minimal_scopes(only)
    return load(index_dir, m.files, m.files_delta, None if scopes == [""] else scopes)


class RecordedFiles(Mapping[str, RecordedFile]):
    """The entries of a pass's file table within what it walked, as
    RecordedFile, made on access: a query that reconciles itself never
    builds 40,000 of them."""

    def __init__(self, raw: Mapping[str, RawEntry], only: list[str] | None) -> None:
        from ctindex.reconciler import Fingerprint  # once: not per entry (an import costs ~4 µs)

        self._raw = raw
        self._inside = None if only is None else set(only)
        self._fp = Fingerprint

    def __contains__(self, key: object) -> bool:
        if self._inside is None:
            return key in self._raw
        return isinstance(key, str) and key in self._raw and key_within(key, self._inside)

    def __getitem__(self, key: str) -> RecordedFile:
        e = self._raw[key]  # KeyError when absent
        if self._inside is not None and not key_within(key, self._inside):
            raise KeyError(key)
        return RecordedFile(self._fp(*e[:5]), e[6])

    def __iter__(self) -> Iterator[str]:
        inside = self._inside
        return (
            iter(self._raw) if inside is None else (k for k in self._raw if key_within(k, inside))
        )

    def __len__(self) -> int:
        return len(self._raw) if self._inside is None else sum(1 for _ in self)


def recorded(raw: Mapping[str, RawEntry], keys: Iterable[str]) -> dict[str, RecordedFile]:
    """RecordedFile of each of `keys` the table holds."""
    from ctindex.reconciler import Fingerprint

    return {
        k: RecordedFile(Fingerprint(*e[:5]), e[6]) for k in keys if (e := raw.get(k)) is not None
    }


def newly_trusted(previous: Manifest, res: ReconcileResult) -> bool:
    """True when the pass re-read racily-clean files (fingerprint too close
    to the time their content was read to be trusted, git's rule) that are
    now old enough: recording them spares re-reading them on every pass.
    While they are still within the window, recording would change nothing."""
    if not res.metrics.counts.get("racy_rehashed"):
        return False
    from ctindex.reconciler.fingerprint import racily_clean

    old = previous.raw()
    for key, e in res.manifest.raw().items():
        p = old.get(key)
        if p is not e and p != e and not racily_clean(e[:5], e[6]):
            return True
    return False


class TableUpdate(NamedTuple):
    """How a generation records a pass's file table (docs/format.md)."""

    base: list[bytes] | None  # a new base file (its chunks), or None: keep the base
    delta: DeltaJSON | None  # the new inline delta (JSON form), or None: none
    source_bytes: int  # total size of the files the table records


def table_update(
    index_dir: Path,
    base: StoreManifest | None,
    previous: Manifest | None,
    res: ReconcileResult,
    partial: bool,
) -> TableUpdate:
    """The table `res.manifest` as base and delta. `previous` is the table
    the pass started from (`partial`: only the entries under a narrowed
    pass's folders); None: start over. The base is rewritten only when the
    delta outgrows DELTA_MAX keys."""

    def size(e: RawEntry | None) -> int:
        return e[0] if e is not None and e[0] > 0 else 0

    if base is None or previous is None:
        return TableUpdate(encode_manifest(res.manifest), None, source_bytes(res.manifest))
    packed = res.manifest.packed()
    if not partial and packed is not None and packed.parent is previous.packed():
        # A full pass that edited the previous packed table: the edits are
        # the change (less those that set an entry to what it was), and
        # neither table is made a dict.
        before = packed.parent
        assert before is not None and packed.edits is not None
        olds = {k: before.get(k) for k in packed.edits}
        change = {k: e for k, e in packed.edits.items() if olds[k] != e}
        source = base.source_bytes + sum(size(e) - size(olds[k]) for k, e in change.items())
        merged = merge(delta_from_json(base.files_delta), change)
        if len(merged) <= DELTA_MAX:
            return TableUpdate(None, delta_to_json(merged), source)
        return TableUpdate(encode_manifest(res.manifest), None, source_bytes(res.manifest))
    new = res.manifest.raw()
    old = previous.raw()
    change = changes(old, new)
    source = base.source_bytes + sum(size(new.get(k)) - size(old.get(k)) for k in change)
    merged = merge(delta_from_json(base.files_delta), change)
    if len(merged) <= DELTA_MAX:
        return TableUpdate(None, delta_to_json(merged), source)
    if partial:  # the pass saw part of the table: compact the whole of it
        full = dict(load_file_table(index_dir, base).raw())
        for k, e in change.items():
            if e is None:
                full.pop(k, None)
            else:
                full[k] = e
        new = full
    return TableUpdate([encode_base(new)], None, sum(map(size, new.values())))
