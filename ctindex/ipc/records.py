"""The daemon's runtime records: small JSON objects that are hints, never proofs.

Written whole through the one atomic write (ctindex/base/durable.py: a
reader sees the old record or the new one, never half of one), read
bounded and without following links (ctindex/base/statefile.py); a record
that is missing, unreadable or corrupt reads as absent.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    # One record as JSON decodes it: values are checked where they are used.
    Record = dict[str, object]


def write_record(path: Path, record: Mapping[str, object]) -> None:
    """Replace `path` with `record` (sorted keys, one line); not fsynced:
    a record lost in a power cut is a hint lost. Raises IndexWriteError."""
    from ctindex.base.durable import atomic_write  # writers only: the query path reads

    atomic_write(path, (json.dumps(record, sort_keys=True) + "\n").encode(), sync=False)


def read_record(path: Path, limit: int = 1 << 20) -> Record | None:
    """A JSON object from `path`, or None when missing, unreadable or corrupt
    (runtime files are hints: a bad one is treated as absent, never trusted).
    A FIFO, device or symlink in its place is absent too: it is never opened
    in a way that could block or follow it (ctindex/base/statefile.py)."""
    from ctindex.base.statefile import read_bounded

    try:
        value = json.loads(read_bounded(path, limit))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
