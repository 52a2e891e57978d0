"""The files a deferring pass accepted and would have read, kept packed.

A rebuild walks first and reads later, in its workers
(ctindex/reconciler/capture.py): until then it holds one record per file of
the corpus. A tuple and a fingerprint tuple of five integer objects per file
cost about 300 bytes; two flat integer arrays cost 40, and a `Pending` is
made only for the file a reader is about to open.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from typing import NamedTuple

from ctindex.reconciler.fingerprint import Fingerprint


class Pending(NamedTuple):
    """One file to read: its key and the fingerprint the walk saw."""

    key: str
    fingerprint: Fingerprint


class PendingReads:
    """`Pending` reads in the order added: keys in a list, fingerprints in
    two arrays (size, mtime_ns, ctime_ns signed; inode, device unsigned)."""

    __slots__ = ("_signed", "_unsigned", "keys")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._signed = array("q")
        self._unsigned = array("Q")

    def add(self, key: str, st: os.stat_result) -> None:
        self.keys.append(key)
        self._signed.extend((st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        self._unsigned.extend((st.st_ino, st.st_dev))

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Pending:
        s, u = self._signed, self._unsigned
        j, k = 3 * i, 2 * i
        return Pending(self.keys[i], Fingerprint(s[j], s[j + 1], s[j + 2], u[k], u[k + 1]))

    def __iter__(self) -> Iterator[Pending]:
        return (self[i] for i in range(len(self.keys)))

    def size(self, i: int) -> int:
        """The byte size the walk saw of the i-th file."""
        return self._signed[3 * i]

    def by_key(self) -> PendingReads:
        """The same reads sorted by key (code point order, as keys sort)."""
        order = sorted(range(len(self.keys)), key=self.keys.__getitem__)
        out = PendingReads()
        s, u = self._signed, self._unsigned
        out.keys = [self.keys[i] for i in order]
        out._signed = array("q", (s[3 * i + f] for i in order for f in range(3)))
        out._unsigned = array("Q", (u[2 * i + f] for i in order for f in range(2)))
        return out
