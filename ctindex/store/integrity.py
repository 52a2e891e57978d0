"""The cheap integrity check of a published generation, and how damage it
finds is reported (a corrupt cache makes a query slower, never
wrong)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ctindex.errors import IndexFormatChanged
from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import StoreManifest, read_diag


def check_generation(index_dir: Path, m: StoreManifest, *, file_table: bool = True) -> None:
    """Every segment's header and term index, every tombstone and diagnostics
    file (a few KiB per segment) and, unless the caller loads it anyway, the
    file table. Raises IndexCorrupt. Deeper damage is caught by the reads
    that touch it, which verify their own checksums."""
    from ctindex.store.filetable import load_file_table
    from ctindex.store.generation import read_dels
    from ctindex.store.segment_read import Segment
    from ctindex.store.snapshot import check_segment

    if file_table:
        load_file_table(index_dir, m)

    for ref in m.segments:
        try:
            seg = Segment(index_dir / ref.name)
        except FileNotFoundError as exc:
            raise IndexCorrupt(f"{index_dir / ref.name}: missing") from exc
        try:
            check_segment(seg, ref)
        finally:
            seg.close()
        if ref.dels:
            _readable(index_dir / ref.dels, read_dels)
    if m.diag:
        _readable(index_dir / m.diag, read_diag)


def _readable(path: Path, reader: Callable[[Path], object]) -> None:
    try:
        reader(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IndexCorrupt(f"{path}: unreadable ({exc})") from exc


def damage_reason(exc: BaseException, index_dir: Path) -> str:
    """`index repaired: <file>: <what>` with the file named relative to the
    index folder; `index upgraded: …` for an index of an older format, which
    is not damaged (errors.IndexFormatChanged)."""
    text = str(exc).replace(f"{index_dir}{os.sep}", "")
    for tail in (" (damaged index file)", " (damaged or truncated)", "; run `ctindex rebuild`"):
        text = text.replace(tail, "")
    verb = "upgraded" if isinstance(exc, IndexFormatChanged) else "repaired"
    return f"index {verb}: {text}"
