"""The store manifest (`.ct/okf/MANIFEST`) and the small immutable side files.

MANIFEST is one JSON object followed by a line ``crc32:XXXXXXXX`` over the
JSON bytes. It is the only mutable name in the store: a writer replaces it
atomically, so a reader sees one complete generation or the previous one.
"""

from __future__ import annotations

import json
import os
import struct
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xxhash

from ctindex.errors import IndexBusy, IndexFormatChanged
from ctindex.reconciler.fingerprint import Fingerprint, fingerprint_of, racily_clean
from ctindex.store.durable import IndexCorrupt, crc, read_all, write_new

if TYPE_CHECKING:
    from ctindex.base.jsontypes import JSONObject
    from ctindex.store.filetable import DeltaJSON

MANIFEST_NAME = "MANIFEST"
# 2: sorted file-table base + inline delta; 3: segment format 3, token streams
# rank word terms only; 4: segment format 4, zstd record blocks
# (docs/format.md). A manifest of another format is read as damaged, so the
# next writer rebuilds and says why.
FORMAT = 4
_DEL_MAGIC = b"CTDEL\x00\x01\x00"
# How many ancestors a manifest names (`lineage`): a writer that finds the
# generation it knew among them knows every publish since was a writer's
# pass on top of it, not a copy or a restore (docs/format.md, "Lineage").
LINEAGE = 8
# A file a generation stopped naming, and when (ns): the garbage collector
# removes it once the grace period has passed (store/writer.py).
RetiredFile = tuple[str, int]
# Why an answer or a pass could not trust the published generation: it is
# not the one vouched for, nor one published on top of it.
OUTSIDE = "index changed outside ctindex"


def manifest_identity(data: bytes) -> str:
    """The identity of one published manifest: a digest of its exact bytes.
    Two manifests with one identity name the same files with the same
    content (every name they list carries a random part), so a reader that
    was vouched an identity can tell that generation from any other one of
    the same number (a restored copy, another project's index)."""
    return xxhash.xxh3_128_hexdigest(data)


# Plain classes rather than dataclasses: every search reads a manifest, and
# importing dataclasses (inspect, ast, ...) cost a search ~8 ms.
class SegmentRef:
    def __init__(
        self,
        name: str,
        ndocs: int,
        deleted: int = 0,
        dels: str | None = None,
        length_sum: int = 0,
        size: int = 0,
        head: int = 0,
        field_sums: list[int] | None = None,
    ) -> None:
        self.name = name
        self.ndocs = ndocs  # documents stored in the segment file
        self.deleted = deleted  # of them tombstoned
        self.dels = dels  # the .del file holding the tombstoned doc ids
        self.length_sum = length_sum  # weighted length of the live documents (BM25 avgdl)
        self.size = size  # bytes of the segment file
        # the checksum its header carries (0: not recorded); the header covers
        # every section's checksum, so another segment under this name fails it
        self.head = head
        # Raw token counts per field summed over every document in the file,
        # tombstoned ones included: a query subtracts those it must, and
        # sums no field lengths while there are none. None: a
        # manifest written before it was recorded (then they are summed).
        self.field_sums = field_sums

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SegmentRef) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"SegmentRef({vars(self)})"

    @property
    def live(self) -> int:
        return self.ndocs - self.deleted


class StoreManifest:
    def __init__(
        self,
        generation: int = 0,
        created_ns: int = 0,
        provider: dict[str, int | str] | None = None,
        scopes: dict[str, str] | None = None,
        plan_digest: str = "",
        segments: list[SegmentRef] | None = None,
        files: str | None = None,
        files_delta: DeltaJSON | None = None,
        diag: str | None = None,
        errors: int = 0,
        warnings: int = 0,
        source_bytes: int = 0,
        reconcile: JSONObject | None = None,
        retired: list[RetiredFile] | None = None,
        store_id: str = "",
        lineage: list[str] | None = None,
        home: list[int] | None = None,
    ) -> None:
        self.generation = generation
        self.created_ns = created_ns
        self.provider = provider if provider is not None else {}  # id, versions
        self.scopes = scopes if scopes is not None else {}  # scope root -> scope digest
        self.plan_digest = plan_digest
        self.segments = segments if segments is not None else []
        self.files = files  # base of the reconciler file table (store/filetable.py)
        self.files_delta = files_delta if files_delta is not None else {}  # since that base
        self.diag = diag  # provider errors and frontmatter warnings (JSON file)
        self.errors = errors
        self.warnings = warnings
        self.source_bytes = source_bytes  # logical bytes of the indexed documents
        self.reconcile = reconcile if reconcile is not None else {}  # last pass: ms, kind
        self.retired = retired if retired is not None else []  # [file name, retired_at_ns]
        # Where this generation comes from (docs/format.md, "Lineage"): the
        # store's random id, kept by every later generation; the identities
        # of up to LINEAGE ancestors, newest first; the (device, inode) of the
        # folder it was published in, as its writer saw it.
        self.store_id = store_id
        self.lineage = lineage if lineage is not None else []
        self.home = home
        # The identity of the bytes this manifest was read from or written
        # as (manifest_identity); not itself stored. "" until then.
        self.identity = ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoreManifest) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"StoreManifest(generation={self.generation}, segments={self.segments})"

    def as_dict(self) -> dict[str, object]:
        fields = {k: v for k, v in vars(self).items() if k != "identity"}
        return {**fields, "segments": [dict(vars(s)) for s in self.segments]}

    def descends_from(self, identity: str) -> bool:
        """This is the generation `identity` names, or one that writers
        published on top of it (within LINEAGE publishes)."""
        return bool(identity) and (self.identity == identity or identity in self.lineage)

    @property
    def documents(self) -> int:
        return sum(s.live for s in self.segments)

    @property
    def tombstones(self) -> int:
        return sum(s.deleted for s in self.segments)

    def referenced(self) -> set[str]:
        names = {s.name for s in self.segments}
        names.update(s.dels for s in self.segments if s.dels)
        names.update(n for n in (self.files, self.diag) if n)
        return names

    def to_bytes(self) -> bytes:
        body = json.dumps(
            {"format": FORMAT, **self.as_dict()}, sort_keys=True, separators=(",", ":")
        ).encode()
        return body + b"\ncrc32:%08x\n" % crc(body)

    @classmethod
    def from_bytes(cls, data: bytes, origin: str) -> StoreManifest:
        body, _, tail = data.rstrip(b"\n").rpartition(b"\n")
        if not tail.startswith(b"crc32:") or tail[6:] != b"%08x" % crc(body):
            raise IndexCorrupt(f"{origin}: manifest checksum mismatch (damaged or truncated)")
        try:
            raw = _known(json.loads(body), _MANIFEST_KEYS | {"format"})
            fmt = raw.pop("format")
            if fmt != FORMAT:
                raise IndexFormatChanged(
                    f"{origin}: index format {fmt}, this version reads format {FORMAT}"
                )
            # Keys are only ever added within a format: a key this build does
            # not know came from a newer build of the same format and is
            # dropped, never a reason to call the index corrupt and rebuild it
            # (two builds would then rebuild against each other, docs/format.md).
            raw["segments"] = [SegmentRef(**_known(s, _REF_KEYS)) for s in raw["segments"]]
            if "retired" in raw:  # JSON has no pairs: each [name, at] list becomes one
                raw["retired"] = [(name, at) for name, at in raw["retired"]]
            m = cls(**_known(raw, _MANIFEST_KEYS))
        except (ValueError, TypeError, KeyError) as exc:
            raise IndexCorrupt(f"{origin}: manifest unreadable ({exc})") from exc
        m.identity = manifest_identity(data)
        return m


_MANIFEST_KEYS = frozenset(vars(StoreManifest())) - {"identity"}
_REF_KEYS = frozenset(vars(SegmentRef("", 0)))


# The manifest's fields go to the constructors as read: the checksum vouches
# that a writer of this format wrote them, and a search reads a manifest
# every time, so their types are trusted, not checked one by one.
# Their shape is checked (an object where one is expected), as a checksum
# cannot tell a writer's body from any other bytes followed by their CRC.
def _known(raw: object, keys: frozenset[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TypeError(f"a JSON object expected, not {type(raw).__name__}")
    return {k: v for k, v in raw.items() if k in keys}


def read_manifest(index_dir: Path) -> StoreManifest | None:
    """The published manifest, None when there is none; IndexCorrupt if
    damaged; TornManifest when it keeps reading damaged through a network
    mount (see below)."""
    path = index_dir / MANIFEST_NAME
    try:
        return _read_manifest_once(path)
    except IndexFormatChanged:
        raise
    except IndexCorrupt as damaged:
        if not _through_a_mount(path):
            raise
        first = damaged
    # MANIFEST is replaced by a rename, so on a local disk a reader sees the
    # old file or the new one, whole. A network client may keep the old
    # file's size in its attribute cache (sshfs for 20 s) and cut the new
    # one short: it reads "damaged" where nothing is. Read again a few
    # times; still damaged, it is not this reader's to repair (a rebuild
    # from a mount's view is how a stale index reaches everyone): the caller
    # answers from the files, or `rebuild` starts afresh.
    for pause in MOUNT_REREAD_PAUSES_S:
        time.sleep(pause)
        try:
            return _read_manifest_once(path)
        except IndexFormatChanged:
            raise
        except IndexCorrupt:
            continue
    raise TornManifest(
        f"{first}; read {len(MOUNT_REREAD_PAUSES_S) + 1} times through a network mount, "
        "whose cache may cut a new MANIFEST short: not repaired from here "
        "(`ctindex rebuild` starts afresh if it lasts)"
    ) from first


# Pauses before a MANIFEST that read damaged through a network mount is read again.
MOUNT_REREAD_PAUSES_S = (0.05, 0.1, 0.2, 0.4)


class TornManifest(IndexBusy):
    """MANIFEST keeps reading damaged through a network mount: possibly only
    cut short by the mount's cache, so not repaired by this reader; a query
    answers from the files (it is an IndexBusy), `update` stops (exit 2)."""


def _read_manifest_once(path: Path) -> StoreManifest | None:
    try:
        data = read_all(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexCorrupt(f"{path}: cannot read ({exc.strerror})") from exc
    return StoreManifest.from_bytes(data, str(path))


def _through_a_mount(path: Path) -> bool:
    from ctindex.policy.netfs import share_of

    return share_of([os.fspath(path.parent)], below=False) is not None


class ManifestReader:
    """The published manifest for a long-lived reader, read again only when
    its full stat fingerprint (ctindex/reconciler/fingerprint.py) differs from the
    one it had when read, or when that one was racily clean (taken within a
    timestamp tick of its last change, as a manifest published a moment ago
    is). A restore, a copy or any write in place gives the file another
    inode or ctime, so an unchanged fingerprint means unchanged bytes; the
    rule spares each query and each barrier a read, a parse and a checksum.
    Only on the local, kernel-owned filesystem the folder was on when this
    reader was made: a network client's stat may come from its attribute
    cache while open() revalidates (NFS close-to-open, sshfs), so there
    every call reads. Raises as read_manifest does."""

    def __init__(self, index_dir: Path, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.index_dir = index_dir
        self._manifest = os.path.join(index_dir, MANIFEST_NAME)  # stat on every query
        self.clock_ns = clock_ns  # the wall clock, as file timestamps are
        self.reads = 0
        self._kept: tuple[Fingerprint, StoreManifest] | None = None
        # The device fingerprints may vouch on (its filesystem judged local
        # once, at the first manifest seen); -1: none.
        self._local_dev: int | None = None

    def read(self) -> StoreManifest | None:
        before = self.clock_ns()  # before the stat: the racy rule's reference
        try:
            fp: Fingerprint | None = fingerprint_of(os.lstat(self._manifest))
        except OSError:
            fp = None  # gone or unreadable: read_manifest says which
        kept, self._kept = self._kept, None
        if fp is not None and kept is not None and kept[0] == fp:
            self._kept = kept
            return kept[1]
        self.reads += 1
        m = read_manifest(self.index_dir)
        # Bytes newer than the stat (a publish in between) are kept under the
        # older fingerprint, which the next stat no longer matches.
        if (
            m is not None
            and fp is not None
            and fp.dev == self._local(fp.dev)
            and not racily_clean(fp, before)
        ):
            self._kept = (fp, m)
        return m

    def _local(self, dev: int) -> int:
        if self._local_dev is None:
            from ctindex.backends.mounts import check_paths

            local = check_paths([os.fspath(self.index_dir)]) is None
            self._local_dev = dev if local else -1
        return self._local_dev


# -- tombstone files ----------------------------------------------------------------


def write_dels(path: Path, docids: set[int]) -> None:
    ids = array("I", sorted(docids))
    body = _DEL_MAGIC + struct.pack("<I", len(ids)) + ids.tobytes()
    write_new(path, body + struct.pack("<I", crc(body)))


def read_dels(path: Path) -> frozenset[int]:
    data = read_all(path)
    body, tail = data[:-4], data[-4:]
    if len(data) < 16 or body[:8] != _DEL_MAGIC or struct.unpack("<I", tail)[0] != crc(body):
        raise IndexCorrupt(f"{path}: tombstone file checksum mismatch (damaged index file)")
    (n,) = struct.unpack_from("<I", body, 8)
    ids = array("I")
    ids.frombytes(body[12 : 12 + 4 * n])
    return frozenset(ids)


# -- diagnostics (provider errors, frontmatter warnings) ------------------------------


def write_diag(path: Path, errors: dict[str, str], warnings: dict[str, str]) -> None:
    body = json.dumps({"errors": errors, "warnings": warnings}, sort_keys=True).encode()
    write_new(path, body + b"\ncrc32:%08x\n" % crc(body))


def read_diag(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    data = read_all(path)
    body, _, tail = data.rstrip(b"\n").rpartition(b"\n")
    if tail != b"crc32:%08x" % crc(body):
        raise IndexCorrupt(f"{path}: diagnostics checksum mismatch (damaged index file)")
    raw = json.loads(body)
    return dict(raw["errors"]), dict(raw["warnings"])
