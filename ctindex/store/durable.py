"""The store's file primitives: checksums, fresh names, bounded reads.

Every file the store publishes is written once under a fresh name, fsynced,
and only then named by a manifest (``write_new``); the manifest itself, and
every other file the store replaces in place, goes through ``atomic_write``:
a temp sibling and an atomic rename, followed by a folder fsync.
These two are the store's only ways to write a file, and give its files
their mode (docs/format.md, "Modes"); they live in ctindex/base/durable.py,
shared with the daemon's runtime records, and are re-exported here with the
fault hook (``fault``) the crash tests use.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from ctindex.base.durable import FAULT_ENV as FAULT_ENV
from ctindex.base.durable import atomic_write as atomic_write
from ctindex.base.durable import fault as fault
from ctindex.base.durable import fsync_dir as fsync_dir
from ctindex.base.durable import write_new as write_new
from ctindex.errors import IndexCorrupt as IndexCorrupt  # re-exported: its old home

INDEX_FILE_LIMIT = 1 << 40  # read_all: no index file comes near a TiB


def crc(data: bytes | memoryview) -> int:
    """CRC-32 of a block: zlib's C implementation, no import cost on the query path."""
    return zlib.crc32(data) & 0xFFFFFFFF


def unique_name(prefix: str, generation: int, suffix: str) -> str:
    """A file name no earlier writer can have used (a crashed writer may have
    left a file of the same generation behind)."""
    return f"{prefix}-{generation:08d}-{os.urandom(4).hex()}{suffix}"


def read_all(path: Path) -> bytes:
    """An index file, refused (OSError) unless it is a regular file: a FIFO
    or device put in its place must not hang a reader (ctindex/base/statefile.py).
    Index files are as large as the corpus needs, so the bound is generous;
    a regular file's read ends at its size anyway."""
    from ctindex.base.statefile import read_bounded

    return read_bounded(path, INDEX_FILE_LIMIT)
