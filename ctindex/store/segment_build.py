"""Writing a segment file: its documents added one at a time in key order,
inverted (invert.py, or its optional C twin) and their records compressed
in blocks, then the whole file written and fsynced once (the format:
segment.py, docs/format.md).
"""

from __future__ import annotations

import json
import struct
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctindex.store.durable import crc, write_new
from ctindex.store.invert import PyInverter
from ctindex.store.segment import (
    BLOCK_TERMS,
    DOCREF,
    ENTRY,
    FLAG_DOCS32,
    FLAG_SEQ32,
    FORMAT,
    HEAD,
    HEADER_SIZE,
    MAGIC,
    NFIELDS,
    NSECTIONS,
    RBLOCK,
    RECORD_BLOCK_BYTES,
    RECORD_BLOCK_DOCS,
    S_DOCREFS,
    S_FLENS,
    S_KEYS,
    S_LENGTHS,
    S_RTABLE,
    S_SEQOFFS,
    S_TOP,
    SECTION,
    WORD_START,
    StoredDoc,
    to_le,
)

if TYPE_CHECKING:
    from ctindex.store.native_invert import Inverter, InvertModule

    # A document's analysis still to be added: called once with the
    # builder's inverter, it adds the document's counts and token stream and
    # returns (length, flens) (ctindex/providers/base.py, `Feed`).
    Feed = Callable[[Inverter], tuple[int, tuple[int, int, int, int]]]


class BuildInput(NamedTuple):
    doc: StoredDoc
    tokens: list[str]  # analysis token stream (SEP between fields)
    tfw: dict[str, int]
    length: int
    flens: tuple[int, int, int, int] = (0, 0, 0, 0)  # Analysis.flens


class SegmentInfo(NamedTuple):
    ndocs: int
    length_sum: int
    size: int
    head: int  # the header's own checksum (SegmentRef.head)
    field_sums: tuple[int, ...] = ()  # per field, over every document (SegmentRef.field_sums)


# Record blocks are zstd frames at level 1 (docs/decisions/native.md, "The
# rest of a worker's analysis"): for this text about 2.6x faster to write
# than zlib at its fastest level, and smaller, and about 4x faster to read.
def _compressor() -> Callable[[bytes], bytes]:
    import zstandard  # lazy: only writers and readers of stored fields need it

    return zstandard.ZstdCompressor(level=1).compress


def _record_encoder(native: InvertModule | None) -> Callable[[StoredDoc], bytes]:
    """A document's record: its StoredDoc as a JSON array, its fields in
    order (a NamedTuple, and its tags tuple, encodes as one: no list built).
    The C `record` writes the same bytes (tests/ctindex/store/test_segment_build_native.py)
    and leaves what is not a str, an int or a tuple of them to json."""
    # One encoder for every record: json.dumps with a keyword builds a new
    # JSONEncoder per call (~a third of the cost of a small record).
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    if native is None:
        return lambda d: dumps(d).encode()
    record = native.record

    def encode(d: StoredDoc) -> bytes:
        rec = record(d)
        return rec if rec is not None else dumps(d).encode()

    return encode


class SegmentBuilder:
    """One segment, its documents added one at a time in key order and
    dropped as they are added: the inverter keeps each one's term ids and
    its stored fields are compressed at once, so a worker building a segment
    of 20,000 documents never holds all their dicts, token lists and bodies
    (docs/decisions/native.md, "Documents streamed into the segment")."""

    def __init__(self, sep: str) -> None:
        from ctindex.store import native_invert

        native = native_invert.module()
        self._inverter = native.Inverter(sep) if native is not None else PyInverter(sep)
        self._compress = _compressor()
        self._encode = _record_encoder(native)
        self._rblocks: list[bytes] = []
        self._rtable: list[bytes] = []
        self._refs: list[bytes] = []
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._roff = 0
        self._lengths = array("I")
        self._flens = array("I")
        self._keys: list[bytes] = []
        self._last: str | None = None

    def add(self, item: BuildInput) -> None:
        """The next document; its key must not sort before the last one's."""
        self._next(item.doc.key)
        self._inverter.add(item.tfw, item.tokens)
        self._record(item.doc, item.length, item.flens)

    def add_fed(self, doc: StoredDoc, feed: Feed) -> None:
        """`add` of a document whose analysis `feed` adds to the inverter
        itself (ctindex/providers/base.py, `Provider.feed_many`)."""
        self._next(doc.key)
        length, flens = feed(self._inverter)
        self._record(doc, length, flens)

    def _next(self, key: str) -> None:
        if self._last is not None and key < self._last:
            raise ValueError(f"segment: {key!r} added after {self._last!r}")

    def _record(self, d: StoredDoc, length: int, flens: tuple[int, ...]) -> None:
        """A document's stored fields and lengths, once its terms are in."""
        self._last = d.key
        rec = self._encode(d)
        self._refs.append(DOCREF.pack(len(self._rblocks), self._pending_len, len(rec), crc(rec)))
        self._pending.append(rec)
        self._pending_len += len(rec)
        # Stored fields, compressed in blocks of RECORD_BLOCK_DOCS (one frame
        # per document costs a compressor set-up each and compresses worse).
        if len(self._pending) >= RECORD_BLOCK_DOCS or self._pending_len >= RECORD_BLOCK_BYTES:
            self._flush()
        self._lengths.append(length)
        if len(flens) != NFIELDS:
            raise ValueError(f"segment: {d.key!r} has {len(flens)} field lengths")
        self._flens.extend(flens)  # document after document; by field in finish()
        self._keys.append(d.key.encode("utf-8", "surrogateescape"))

    def _flush(self) -> None:
        blob = self._compress(b"".join(self._pending))
        self._rblocks.append(blob)
        self._rtable.append(RBLOCK.pack(self._roff, len(blob), crc(blob)))
        self._roff += len(blob)
        self._pending.clear()
        self._pending_len = 0

    def finish(self, path: Path, fault_point: str | None = None) -> SegmentInfo:
        """Write the complete, fsynced segment file."""
        if self._pending:
            self._flush()
        ndocs = len(self._keys)
        docs32 = ndocs > 0xFFFF
        terms, postings, entries = self._inverter.postings(docs32)
        nterms = len(terms)
        word_base = bisect_left(terms, WORD_START)
        seq32 = nterms - word_base >= 0xFFFF

        # The dictionary blocks.
        blocks: list[bytes] = []
        first_terms: list[bytes] = []
        esize = ENTRY.size
        for b in range(0, nterms, BLOCK_TERMS):
            enc = [t.encode("utf-8", "surrogatepass") for t in terms[b : b + BLOCK_TERMS]]
            offs = array("I", [0])
            offs.extend(accumulate(map(len, enc)))
            blocks.append(
                struct.pack("<I", len(enc))
                + to_le(offs)
                + entries[b * esize : (b + len(enc)) * esize]
                + b"".join(enc)
            )
            first_terms.append(enc[0])
        del entries, terms
        block_offs = array("Q", [0])
        block_offs.extend(accumulate(map(len, blocks)))
        ft_offs = array("I", [0])
        ft_offs.extend(accumulate(map(len, first_terms)))
        top = (
            struct.pack("<I", len(blocks))
            + to_le(ft_offs)
            + to_le(block_offs)
            + to_le(array("I", [crc(b) for b in blocks]))
            + b"".join(first_terms)
        )

        # Per-document token streams (word ranks, uncompressed: phrase
        # queries read many of them).
        seqs, seq_offs, seq_crcs = self._inverter.streams(word_base, seq32)
        key_offs = array("I", [0])
        key_offs.extend(accumulate(map(len, self._keys)))

        sections = [
            top,
            b"".join(blocks),
            postings,
            to_le(self._lengths),
            b"".join(self._refs),
            b"".join(self._rtable),
            b"".join(self._rblocks),
            to_le(key_offs) + b"".join(self._keys),
            seq_offs + seq_crcs,
            seqs,
            b"".join(to_le(self._flens[f::NFIELDS]) for f in range(NFIELDS)),
        ]
        checked = {S_TOP, S_LENGTHS, S_DOCREFS, S_RTABLE, S_KEYS, S_SEQOFFS, S_FLENS}
        table = b""
        pos = HEADER_SIZE
        for i, sec in enumerate(sections):
            table += SECTION.pack(pos, len(sec), crc(sec) if i in checked else 0)
            pos += len(sec)
        flags = (FLAG_DOCS32 if docs32 else 0) | (FLAG_SEQ32 if seq32 else 0)
        head = (
            HEAD.pack(MAGIC, FORMAT, ndocs, nterms, len(blocks), flags, word_base, NSECTIONS)
            + table
        )
        head_crc = crc(head)
        head += struct.pack("<I", head_crc)
        size = write_new(path, [head, *sections], fault_point=fault_point)
        return SegmentInfo(
            ndocs=ndocs,
            length_sum=sum(self._lengths),
            size=size,
            head=head_crc,
            field_sums=tuple(sum(self._flens[f::NFIELDS]) for f in range(NFIELDS)),
        )


def build_segment(
    path: Path, items: Sequence[BuildInput], sep: str, fault_point: str | None = None
) -> SegmentInfo:
    """Write a complete, fsynced segment for `items` (any order; stored by key)."""
    builder = SegmentBuilder(sep)
    for it in sorted(items, key=lambda it: it.doc.key):
        builder.add(it)
    return builder.finish(path, fault_point)
