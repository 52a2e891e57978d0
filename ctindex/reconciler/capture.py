"""Deferred capture: read the files a walk decided to read, later, elsewhere.

A pass made with ``reconcile(..., defer_reads=True)`` walks and stats but
reads nothing; it lists each file it would have read as a `Pending` read.
Whoever holds the pending list reads them with a `KeyReader` (a rebuild's
forked workers each read their own key range, ctindex/indexing/analyse.py) and hands
the outcomes back to `complete`, which finishes the result exactly as the
walk's own reads would have: the same manifest entries, the same added,
dirty and problem lists.

Only a pass that starts from an empty manifest may defer: with nothing
before it, no read decides a rename or a change, so the walk's result does
not depend on a digest until `complete` (ctindex/reconciler/diff.py enforces it).

A `KeyReader` opens the folders along a key from the base down, each
relative to its parent with O_NOFOLLOW|O_DIRECTORY (path_folders' checked
handles where there is no dir_fd), as the walk did: a folder swapped for a
symlink since the walk is refused, never followed. Consecutive keys in one
folder (keys come sorted) reuse the open chain.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from ctindex.reconciler import native
from ctindex.reconciler.diff import ReconcileResult, finish_fresh
from ctindex.reconciler.fingerprint import Fingerprint
from ctindex.reconciler.hashing import (
    DEFAULT_RETRIES,
    FILE_FLAGS,
    Outcome,
    ReadResult,
    read_stable,
)
from ctindex.reconciler.manifest import RECORD, Manifest, PackedTable, RawEntry
from ctindex.reconciler.oserr import GONE
from ctindex.reconciler.pending import Pending, PendingReads
from ctindex.reconciler.walk import DIR_FLAGS, ROOT_FLAGS, FsOps, record_failure


class Captured(NamedTuple):
    """The outcome of reading one pending key, without its bytes (what a
    worker process sends back: small and picklable)."""

    key: str
    outcome: Outcome
    fingerprint: Fingerprint | None = None
    digest: bytes = b""
    recorded_ns: int = 0
    size: int = 0  # bytes read
    errno: int = 0
    strerror: str = ""

    @classmethod
    def of(cls, key: str, r: ReadResult) -> Captured:
        err = r.error
        return cls(
            key,
            r.outcome,
            r.fp,
            r.digest,
            r.recorded_ns,
            len(r.data),
            (err.errno or 0) if err is not None else 0,
            (err.strerror or str(err)) if err is not None else "",
        )

    def error(self) -> OSError:
        return OSError(self.errno, self.strerror)


# The outcomes as a worker process sends them back (ship): the OK ones,
# nearly all, as one byte string of fixed records beside their keys, each
# record already the manifest entry `complete` makes of it; the rest as they
# are. Pickling 20,000 Captured tuples, each holding a Fingerprint and an
# enum member, took ~0.1 s in the worker and again in the parent, and making
# them back into tuples there ~0.06 s more, after the last worker was done:
# time no other process overlaps.
_ENTRY = RECORD  # size, mtime, ctime, ino, dev, digest, recorded_ns


# ctindex/reconciler/_native.c read_files(dir_fd, names, flags, digest): the bytes of
# each file one attempt read stably (else None) and, for those, their entries.
BatchRead = Callable[
    [int, list[str], int, Callable[[bytes], bytes]], tuple[list[bytes | None], bytes]
]


class Shipment(NamedTuple):
    keys: list[str]  # of the packed entries, in order
    packed: bytes
    nbytes: int  # bytes read of the packed ones
    others: list[Captured]


class ShipmentBuilder:
    """A Shipment made up as reads come in: the entries a native batch read
    packed already are kept as they are (`add_packed`, from
    KeyReader.read_keys); any other outcome is added one at a time (`add`:
    a good read packed here, anything else kept as its Captured)."""

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._packed: list[bytes] = []
        self._nbytes = 0
        self._others: list[Captured] = []

    def add(self, c: Captured) -> None:
        fp = c.fingerprint
        if (
            c.outcome is Outcome.OK
            and fp is not None
            and len(c.digest) == 16
            and not (c.errno or c.strerror)
        ):
            self._keys.append(c.key)
            self._packed.append(_ENTRY.pack(*fp, c.digest, c.recorded_ns))
            self._nbytes += c.size
        else:
            self._others.append(c)

    def add_packed(self, keys: list[str], records: bytes, nbytes: int) -> None:
        """Successful reads of `keys`, their entries packed in that order."""
        assert len(records) == len(keys) * _ENTRY.size
        self._keys.extend(keys)
        self._packed.append(records)
        self._nbytes += nbytes

    def shipment(self) -> Shipment:
        return Shipment(list(self._keys), b"".join(self._packed), self._nbytes, list(self._others))


def ship(captured: Iterable[Captured]) -> Shipment:
    built = ShipmentBuilder()
    for c in captured:
        built.add(c)
    return built.shipment()


class KeyReader:
    """Reads files under `base` by key; close() it when done."""

    def __init__(
        self,
        base: str,
        ops: FsOps | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self.base = base
        self.ops = ops or FsOps()
        self.clock_ns = clock_ns
        self.retries = retries
        self._names: list[str] = []  # components of the open chain, base excluded
        self._fds: list[int] = []  # base, then one descriptor per component
        # The folder key the chain ends at, when it was opened whole: keys
        # come sorted, so most reads are in the folder of the one before.
        self._at: str | None = None

    def read(self, pending: Pending) -> ReadResult:
        folder, _, name = pending.key.rpartition("/")
        try:
            dfd = self._dir_for(folder)
        except OSError as exc:
            return ReadResult(Outcome.GONE if exc.errno in GONE else Outcome.ERROR, error=exc)
        return read_stable(
            dfd,
            name,
            f"{self.base}/{pending.key}",
            pending.fingerprint,
            None,
            self.clock_ns,
            self.retries,
            self.ops.open,
        )

    def read_keys(self, pending: Sequence[Pending], into: ShipmentBuilder) -> list[bytes | None]:
        """The bytes of each pending file (None where there are none to
        index), each outcome added to `into`: what `read` and `Captured.of`
        give one key at a time. Keys come sorted, so a folder's keys are
        consecutive; with the native core a folder's files are read in one
        call (ctindex/reconciler/_native.c read_files) and whatever that one attempt
        did not read stably is read again here by `read`, so retries, errors
        and vanished files keep their one handling."""
        from xxhash import xxh3_128_digest  # as hashing.read_stable: where a pass reads

        batch = self._batch_reader()
        out: list[bytes | None] = []
        start = 0
        while start < len(pending):
            folder = pending[start].key.rpartition("/")[0]
            end = start + 1
            while end < len(pending) and pending[end].key.rpartition("/")[0] == folder:
                end += 1
            group = pending[start:end]
            start = end
            dfd = None
            if batch is not None:
                with contextlib.suppress(OSError):  # `read` meets and reports it per key
                    dfd = self._dir_for(folder)
            if batch is None or dfd is None:
                out.extend(self._read_one(p, into) for p in group)
                continue
            datas, records = batch(
                dfd, [p.key.rpartition("/")[2] for p in group], FILE_FLAGS, xxh3_128_digest
            )
            read: list[str] = []
            nbytes = 0
            for p, data in zip(group, datas, strict=True):
                if data is None:
                    out.append(self._read_one(p, into))
                else:
                    read.append(p.key)
                    nbytes += len(data)
                    out.append(data)
            into.add_packed(read, records, nbytes)
        return out

    def _read_one(self, p: Pending, into: ShipmentBuilder) -> bytes | None:
        got = self.read(p)
        into.add(Captured.of(p.key, got))
        return got.data if got.outcome is Outcome.OK else None

    def _batch_reader(self) -> BatchRead | None:
        """The native batch read, where `read` itself would take the native
        attempt (the default opener) and records the real clock."""
        if self.ops.open is not os.open or self.clock_ns is not time.time_ns:
            return None
        mod = native.module()
        found: BatchRead | None = getattr(mod, "read_files", None)  # absent from an older build
        return found

    def _dir_for(self, folder: str) -> int:
        """The open folder of `folder`'s keys; OSError if it can not be opened."""
        if folder != self._at:
            self._at = None  # until the new chain is open
            self._folder(folder.split("/") if folder else [])
            self._at = folder
        return self._fds[-1]

    def _folder(self, parts: list[str]) -> int:
        """The open folder `parts` names, reusing the common prefix."""
        if not self._fds:
            self._fds.append(self.ops.open(self.base, ROOT_FLAGS))
        common = 0
        for a, b in zip(self._names, parts, strict=False):
            if a != b:
                break
            common += 1
        while len(self._names) > common:
            self._names.pop()
            self.ops.close(self._fds.pop())
        for comp in parts[common:]:
            self._fds.append(self.ops.open(comp, DIR_FLAGS, dir_fd=self._fds[-1]))
            self._names.append(comp)
        return self._fds[-1]

    def close(self) -> None:
        self._at = None
        while self._fds:
            self.ops.close(self._fds.pop())
        self._names.clear()

    def __enter__(self) -> KeyReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def complete(result: ReconcileResult, shipments: Iterable[Shipment]) -> None:
    """Finish a deferred pass's `result` with the outcomes of its pending
    reads (every one of them, in shipments of any order), as the walk's
    reads would have.

    The good reads come packed, each shipment's in key order. Put one after
    the other by their first keys, they are usually the whole table in key
    order already (a rebuild's workers read consecutive key ranges): the
    table is then kept packed (PackedTable), with no tuple per file.
    Otherwise it is built as a dict."""
    res = result
    runs: list[Shipment] = []
    loose: dict[str, RawEntry] = {}
    for shipment in shipments:
        if shipment.keys:
            runs.append(shipment)
        res.metrics.files_hashed += len(shipment.keys)
        res.metrics.bytes_hashed += shipment.nbytes
        for c in shipment.others:
            if c.outcome is Outcome.GONE:
                res.report.vanished.add(c.key)
            elif c.outcome is Outcome.ERROR:
                record_failure(res.report, c.key, c.error(), is_dir=False)
            elif c.outcome is Outcome.DIRTY:
                res.dirty.append(c.key)
            else:
                assert c.fingerprint is not None
                res.metrics.files_hashed += 1
                res.metrics.bytes_hashed += c.size
                loose[c.key] = (*c.fingerprint, c.digest, c.recorded_ns)
    res.pending = PendingReads()
    runs.sort(key=lambda s: s.keys[0])
    keys = [k for s in runs for k in s.keys]
    records = b"".join(s.packed for s in runs)
    if not loose and all(a < b for a, b in itertools.pairwise(keys)):
        table = PackedTable(keys, records)
        finish_fresh(res, Manifest(source=table, _sorted_keys=keys), keys)
        return
    entries = dict(zip(keys, _ENTRY.iter_unpack(records), strict=True))
    entries.update(loose)
    keys = sorted(entries)
    finish_fresh(res, Manifest(entries, list(keys)), keys)
