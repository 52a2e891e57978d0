"""Fakes for tests and benchmarks that drive the reconciler: a simple path
filter and distorted views of the filesystem's stat (rounded timestamps,
remapped inodes, an attribute cache). Test code only: not installed with the
package."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctindex.reconciler import Manifest, native
from ctindex.reconciler.manifest import RawEntry

if TYPE_CHECKING:
    from ctindex.reconciler.native import NativeTable

StatFn = Callable[[str], os.stat_result]


@dataclass
class SimpleFilter:
    """A PathFilter: walk `root_keys`, prune folders named in `skip_dirs`, cap file size."""

    root_keys: Sequence[str] = ("",)
    skip_dirs: frozenset[str] = field(default_factory=frozenset)
    max_size: int | None = None

    def roots(self) -> Sequence[str]:
        return self.root_keys

    def descend(self, key: str) -> bool:
        return key.rsplit("/", 1)[-1] not in self.skip_dirs

    def accept(self, key: str, st: os.stat_result) -> bool:
        return self.max_size is None or st.st_size <= self.max_size


def with_fields(st: os.stat_result, **ns_fields: int) -> os.stat_result:
    """A copy of st with some of st_size/st_ino/st_dev/st_mtime_ns/st_ctime_ns replaced."""
    seq = list(st[:10])
    index = {"st_mode": 0, "st_ino": 1, "st_dev": 2, "st_size": 6}
    extra = {
        "st_atime_ns": st.st_atime_ns,
        "st_mtime_ns": st.st_mtime_ns,
        "st_ctime_ns": st.st_ctime_ns,
    }
    for name, value in ns_fields.items():
        if name in index:
            seq[index[name]] = value
        else:
            extra[name] = value
    seq[8] = extra["st_mtime_ns"] // 1_000_000_000
    seq[9] = extra["st_ctime_ns"] // 1_000_000_000
    return os.stat_result(seq, extra)


def rounding_stat(step_ns: int, base: StatFn = os.lstat, ctime_is_mtime: bool = False) -> StatFn:
    """A stat that truncates mtime/ctime to `step_ns` (1 s: HFS+, 2 s: FAT).

    With ctime_is_mtime the ctime mirrors the (rounded) mtime, as on
    filesystems without a change time, so a same-size edit that restores the
    mtime is invisible to the fingerprint: only the racy rule can catch it.
    """

    def stat(path: str) -> os.stat_result:
        st = base(path)
        m = st.st_mtime_ns // step_ns * step_ns
        c = m if ctime_is_mtime else st.st_ctime_ns // step_ns * step_ns
        return with_fields(st, st_mtime_ns=m, st_ctime_ns=c)

    return stat


class AttributeCacheStat:
    """An NFS-like client attribute cache (actimeo): a path's attributes are
    fetched from `base` at most once per `ttl_ns` of the injected clock and
    served from the cache in between, however the file changed meanwhile.
    Contents are never cached (NFS close-to-open consistency re-validates data
    on open; the reconciler reads what is on disk)."""

    def __init__(self, ttl_ns: int, clock_ns: Callable[[], int], base: StatFn = os.lstat) -> None:
        self.ttl_ns = ttl_ns
        self.clock_ns = clock_ns
        self.base = base
        self.cache: dict[str, tuple[int, os.stat_result]] = {}

    def __call__(self, path: str) -> os.stat_result:
        now = self.clock_ns()
        hit = self.cache.get(path)
        if hit is not None and now - hit[0] < self.ttl_ns:
            return hit[1]
        st = self.base(path)
        self.cache[path] = (now, st)
        return st


class RemappingStat:
    """A FUSE-like view whose inode and device numbers are reassigned on
    every mount (`remount()`): same files, same contents, new (dev, ino)."""

    def __init__(self, base: StatFn = os.lstat) -> None:
        self.base = base
        self.epoch = 0

    def remount(self) -> None:
        self.epoch += 1

    def __call__(self, path: str) -> os.stat_result:
        st = self.base(path)
        ino = (st.st_ino * 2654435761 + self.epoch * 40503) % (1 << 62) + 1
        return with_fields(st, st_ino=ino, st_dev=1000 + self.epoch)


class PackedSource:
    """A table packed as the store packs its file table (64-byte records and
    NUL-joined keys, ctindex/reconciler/native.py), kept in the order it was built
    in (a pass's walk order): a TableSource, so a Manifest over it takes the
    native scan's path, and its hash index, since walk order is not byte
    order."""

    def __init__(self, table: Manifest) -> None:
        raw = table.raw()
        self.keys = list(raw)
        self.records = b"".join(native.pack(raw[k]) for k in self.keys)
        self.blob = "\0".join(self.keys).encode("utf-8", "surrogateescape")

    def materialize(self) -> dict[str, RawEntry]:
        size = len(self.records) // max(len(self.keys), 1)
        return {
            k: native.unpack(self.records[i * size : (i + 1) * size])
            for i, k in enumerate(self.keys)
        }

    def native(self) -> NativeTable | None:
        return native.build_table(self.records, self.blob, len(self.keys))


def as_packed(table: Manifest) -> Manifest:
    """`table` as a packed, lazily materialized Manifest (see PackedSource)."""
    return Manifest(source=PackedSource(table))
