"""Immutable segment files: build one from analysed documents, read one back.

Layout (docs/format.md has the full description): a fixed header with a
section table, then a two-level sorted term dictionary (a small top level of
block-first terms, blocks of 64 terms each with its own CRC), postings as
plain little-endian arrays (doc ids, weighted term frequencies) with a CRC per
term, document lengths, and one record per document (its stored fields and body
text; zstd-compressed in blocks) with a CRC per record, and its token stream
as term ranks. A reader reads only the parts a query touches (``os.pread``, no mmap)
and verifies the CRC of each part it reads.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ctindex.base.statefile import open_regular
from ctindex.store.durable import IndexCorrupt, crc, write_new

if TYPE_CHECKING:
    from ctindex.store.native_invert import Inverter, InvertModule

    # A document's analysis still to be added: called once with the
    # builder's inverter, it adds the document's counts and token stream and
    # returns (length, flens) (ctindex/providers/base.py, `Feed`).
    Feed = Callable[[Inverter], tuple[int, tuple[int, int, int, int]]]

MAGIC = b"CTSEG\x00\x01\x00"
# 2: section 10, the per-field lengths BM25F normalises by (docs/format.md).
# 3: token streams rank word terms only (header field word_base).
# 4: record blocks are zstd frames (were zlib streams).
FORMAT = 4
BLOCK_TERMS = 64
# magic, format, ndocs, nterms, nblocks, flags, word_base, nsections
_HEAD = struct.Struct("<8sIIIIIII")
_SECTION = struct.Struct("<QQI")  # offset, length, crc (0 for regions checked piecewise)
_ENTRY = struct.Struct("<QII")  # postings offset, df, postings crc
_DOCREF = struct.Struct("<IIII")  # record block, offset in it, length, crc of the record
_RBLOCK = struct.Struct("<QII")  # record block offset, length, crc
NSECTIONS = 11
(
    S_TOP,
    S_BLOCKS,
    S_POSTINGS,
    S_LENGTHS,
    S_DOCREFS,
    S_RTABLE,
    S_RECORDS,
    S_KEYS,
    S_SEQOFFS,
    S_SEQS,
    S_FLENS,
) = range(NSECTIONS)
NFIELDS = 4  # title, tags, description, concept ID (providers/fields.py FIELD_TERM)
SEQ_BLOCK_DOCS = 64  # token streams are checksummed per run of this many documents
RECORD_BLOCK_DOCS = 32
RECORD_BLOCK_BYTES = 64 * 1024
FLAG_DOCS32 = 1  # doc ids are u32 (else u16)
FLAG_SEQ32 = 2  # token-stream ranks are u32 (else u16)
# Every term that is not a word (facets \0, ranking terms \1 and \2:
# docs/format.md "Terms") sorts below this, so the word terms are the sorted
# dictionary's tail from rank word_base on. Token streams hold words only
# and store rank - word_base: the ranking terms of tokenizer v2 outnumber the
# words about 2.7 to 1, and counting them would push a 20,000-document
# segment's ranks past 16 bits.
WORD_START = "\x03"
HEADER_SIZE = _HEAD.size + NSECTIONS * _SECTION.size + 4
TF_MAX = 0xFFFF
_LITTLE = sys.byteorder == "little"


def _le(arr: array[Any]) -> bytes:
    if not _LITTLE:  # pragma: no cover - the format is little-endian everywhere
        arr = array(arr.typecode, arr)
        arr.byteswap()
    return arr.tobytes()


def _arr(code: str, data: bytes | memoryview) -> array[Any]:
    out = array(code)
    out.frombytes(data)
    if not _LITTLE:  # pragma: no cover
        out.byteswap()
    return out


class StoredDoc(NamedTuple):
    """What a segment keeps per document besides its postings. Its record is
    this tuple as a JSON array: the fields' order is the format's
    (docs/format.md)."""

    key: str
    concept_id: str
    scope: str
    title: str
    type: str
    description: str
    tags: tuple[str, ...]
    body: str
    size: int


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


def _invert_py(tfws: list[dict[str, int]], docs32: bool) -> tuple[list[str], bytes, bytes]:
    """(sorted terms, postings, dictionary entries) of documents
    in doc-id order: per term its doc ids then its weighted tfs (u16, clipped
    at TF_MAX), and an _ENTRY (offset, df, crc) each. ctindex/store/_invert.c
    `Inverter.postings` writes the same bytes."""
    # Inverted lists, term -> [doc, tf, doc, tf, ...]: one list per term with
    # interleaved appends is the cheapest shape for this hot loop in CPython.
    post: defaultdict[str, list[int]] = defaultdict(list)
    for docid, tfw in enumerate(tfws):
        for term, w in tfw.items():
            lst = post[term]
            lst.append(docid)
            lst.append(w)
    terms = sorted(post)  # code-point order == UTF-8 byte order
    doc_code = "I" if docs32 else "H"
    postings: list[bytes] = []
    entries: list[bytes] = []
    pack_entry = _ENTRY.pack
    off = 0
    for t in terms:
        lst = post[t]
        tfs = lst[1::2]
        try:
            tf_arr = array("H", tfs)
        except OverflowError:
            tf_arr = array("H", [min(x, TF_MAX) for x in tfs])
        chunk = _le(array(doc_code, lst[0::2])) + _le(tf_arr)
        postings.append(chunk)
        entries.append(pack_entry(off, len(tfs), crc(chunk)))
        off += len(chunk)
    return terms, b"".join(postings), b"".join(entries)


def _streams_py(
    token_lists: list[list[str]], terms: list[str], sep: str, seq32: bool
) -> tuple[bytes, bytes, bytes]:
    """(token streams as ranks in `terms`, `sep` as the width's largest
    value; their offsets; a crc per SEQ_BLOCK_DOCS documents):
    ctindex/store/_invert.c `Inverter.streams` writes the same bytes."""
    seq_code = "I" if seq32 else "H"
    rank = {t: i for i, t in enumerate(terms)}
    rank[sep] = 0xFFFFFFFF if seq32 else 0xFFFF
    get_rank = rank.__getitem__
    seqs = [_le(array(seq_code, map(get_rank, tokens))) for tokens in token_lists]
    seq_offs = array("Q", [0])
    seq_offs.extend(accumulate(map(len, seqs)))
    seq_crcs = array(
        "I",
        [crc(b"".join(seqs[i : i + SEQ_BLOCK_DOCS])) for i in range(0, len(seqs), SEQ_BLOCK_DOCS)],
    )
    return b"".join(seqs), _le(seq_offs), _le(seq_crcs)


# Record blocks are zstd frames at level 1 (docs/decisions/native.md, "The
# rest of a worker's analysis"): for this text about 2.6x faster to write
# than zlib at its fastest level, and smaller, and about 4x faster to read.
def _compressor() -> Callable[[bytes], bytes]:
    import zstandard  # lazy: only writers and readers of stored fields need it

    return zstandard.ZstdCompressor(level=1).compress


def _decompress(blob: bytes) -> bytes:
    """A record block's bytes (ValueError: not a whole zstd frame)."""
    import zstandard

    try:
        return zstandard.ZstdDecompressor().decompress(blob)
    except zstandard.ZstdError as exc:
        raise ValueError(f"record block does not decompress ({exc})") from exc


class _PyInverter:
    """The specification of ctindex/store/_invert.c `Inverter`: a segment's
    postings and token streams, its documents added in doc-id order. This
    one keeps what it is given until the end; the C one keeps only term ids."""

    def __init__(self, sep: str) -> None:
        self._sep = sep
        self._tfws: list[dict[str, int]] = []
        self._tokens: list[list[str]] = []
        self._terms: list[str] | None = None

    def add(self, tfw: dict[str, int], tokens: list[str]) -> None:
        self._tfws.append(tfw)
        self._tokens.append(tokens)

    def postings(self, docs32: bool) -> tuple[list[str], bytes, bytes]:
        """(sorted terms, postings, dictionary entries): `_invert_py`."""
        if self._terms is not None:
            raise ValueError("Inverter: postings() once")
        self._terms, postings, entries = _invert_py(self._tfws, docs32)
        self._tfws = []
        return self._terms, postings, entries

    def streams(self, word_base: int, seq32: bool) -> tuple[bytes, bytes, bytes]:
        """The token streams as ranks among the terms from `word_base` on:
        `_streams_py`."""
        if self._terms is None:
            raise ValueError("Inverter: streams() after postings()")
        return _streams_py(self._tokens, self._terms[word_base:], self._sep, seq32)


def _record_encoder(native: InvertModule | None) -> Callable[[StoredDoc], bytes]:
    """A document's record: its StoredDoc as a JSON array, its fields in
    order (a NamedTuple, and its tags tuple, encodes as one: no list built).
    The C `record` writes the same bytes (tests/ctindex/store/test_segment_native.py)
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
        self._inverter = native.Inverter(sep) if native is not None else _PyInverter(sep)
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
        self._refs.append(_DOCREF.pack(len(self._rblocks), self._pending_len, len(rec), crc(rec)))
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
        self._rtable.append(_RBLOCK.pack(self._roff, len(blob), crc(blob)))
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
        esize = _ENTRY.size
        for b in range(0, nterms, BLOCK_TERMS):
            enc = [t.encode("utf-8", "surrogatepass") for t in terms[b : b + BLOCK_TERMS]]
            offs = array("I", [0])
            offs.extend(accumulate(map(len, enc)))
            blocks.append(
                struct.pack("<I", len(enc))
                + _le(offs)
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
            + _le(ft_offs)
            + _le(block_offs)
            + _le(array("I", [crc(b) for b in blocks]))
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
            _le(self._lengths),
            b"".join(self._refs),
            b"".join(self._rtable),
            b"".join(self._rblocks),
            _le(key_offs) + b"".join(self._keys),
            seq_offs + seq_crcs,
            seqs,
            b"".join(_le(self._flens[f::NFIELDS]) for f in range(NFIELDS)),
        ]
        checked = {S_TOP, S_LENGTHS, S_DOCREFS, S_RTABLE, S_KEYS, S_SEQOFFS, S_FLENS}
        table = b""
        pos = HEADER_SIZE
        for i, sec in enumerate(sections):
            table += _SECTION.pack(pos, len(sec), crc(sec) if i in checked else 0)
            pos += len(sec)
        flags = (FLAG_DOCS32 if docs32 else 0) | (FLAG_SEQ32 if seq32 else 0)
        head = (
            _HEAD.pack(MAGIC, FORMAT, ndocs, nterms, len(blocks), flags, word_base, NSECTIONS)
            + table
        )
        head_crc = crc(head)
        head += struct.pack("<I", head_crc)
        size = write_new(path, [head, *sections], fault_point=fault_point)
        return SegmentInfo(ndocs=ndocs, length_sum=sum(self._lengths), size=size, head=head_crc)


def build_segment(
    path: Path, items: Sequence[BuildInput], sep: str, fault_point: str | None = None
) -> SegmentInfo:
    """Write a complete, fsynced segment for `items` (any order; stored by key)."""
    builder = SegmentBuilder(sep)
    for it in sorted(items, key=lambda it: it.doc.key):
        builder.add(it)
    return builder.finish(path, fault_point)


class _KeyView:
    """The keys section as a lazily decoded sequence (for bisect)."""

    __slots__ = ("_blob", "_n", "_offs")

    def __init__(self, data: bytes, ndocs: int) -> None:
        self._n = ndocs
        self._offs = _arr("I", data[: 4 * (ndocs + 1)])
        self._blob = memoryview(data)[4 * (ndocs + 1) :]

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:
        return bytes(self._blob[self._offs[i] : self._offs[i + 1]]).decode(
            "utf-8", "surrogateescape"
        )


class Segment:
    """Read side of one segment file. Holds an fd; reads lazily with pread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name
        try:
            # Never blocks on a FIFO or reads a device put in the file's place.
            self._fd = open_regular(path)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise IndexCorrupt(f"{path}: cannot open segment ({exc.strerror})") from exc
        try:
            self._open()
        except BaseException:
            os.close(self._fd)
            raise
        self._blocks: dict[int, tuple[list[str], memoryview]] = {}
        self._lengths: array[Any] | None = None
        self._flens: list[array[Any]] | None = None
        self._keys: list[str] | None = None
        self._rtable: bytes | None = None
        self._seq_offs: array[Any] | None = None
        self._seq_crcs: array[Any] = array("I")
        self._rblock: tuple[int, bytes] | None = None  # the last record block read

    def _corrupt(self, what: str) -> IndexCorrupt:
        return IndexCorrupt(f"{self.path}: {what} checksum mismatch (damaged index file)")

    def _read(self, off: int, length: int) -> bytes:
        data = os.pread(self._fd, length, off)
        if len(data) != length:
            raise IndexCorrupt(f"{self.path}: truncated (wanted {length} bytes at {off})")
        return data

    def _open(self) -> None:
        head = self._read(0, HEADER_SIZE)
        self.head_crc = struct.unpack_from("<I", head, HEADER_SIZE - 4)[0]
        if crc(head[:-4]) != self.head_crc:
            raise self._corrupt("header")
        magic, fmt, ndocs, nterms, nblocks, flags, word_base, nsec = _HEAD.unpack_from(head)
        if magic != MAGIC or fmt != FORMAT or nsec != NSECTIONS:
            raise IndexCorrupt(f"{self.path}: not a ctindex segment of format {FORMAT}")
        if word_base > nterms:
            raise self._corrupt("header")
        self.ndocs, self.nterms, self.nblocks = ndocs, nterms, nblocks
        self.word_base = word_base
        self.doc_code = "I" if flags & FLAG_DOCS32 else "H"
        self.doc_size = 4 if flags & FLAG_DOCS32 else 2
        self.seq_code = "I" if flags & FLAG_SEQ32 else "H"
        self.sep_rank = 0xFFFFFFFF if flags & FLAG_SEQ32 else 0xFFFF
        self.sections = [
            _SECTION.unpack_from(head, _HEAD.size + i * _SECTION.size) for i in range(NSECTIONS)
        ]
        top = self._section(S_TOP)
        nb = struct.unpack_from("<I", top)[0]
        p = 4
        ft_offs = _arr("I", top[p : p + 4 * (nb + 1)])
        p += 4 * (nb + 1)
        self._block_offs = _arr("Q", top[p : p + 8 * (nb + 1)])
        p += 8 * (nb + 1)
        self._block_crcs = _arr("I", top[p : p + 4 * nb])
        p += 4 * nb
        blob = top[p:]
        self._first = [blob[ft_offs[i] : ft_offs[i + 1]] for i in range(nb)]

    def _section(self, idx: int) -> bytes:
        off, length, want = self.sections[idx]
        data = self._read(off, length)
        if crc(data) != want:
            raise self._corrupt(f"section {idx}")
        return data

    def file_size(self) -> int:
        """Bytes of the open file (one fstat): the manifest records it, so a
        valid segment swapped in under this name is told apart."""
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def cached_blocks(self) -> int:
        """Term-dictionary blocks held from earlier reads (a long-lived
        reader caps them: ctindex/daemon/query.py)."""
        return len(self._blocks)

    def forget_blocks(self) -> None:
        """Drop the cached dictionary blocks and record block; they are read
        again when needed."""
        self._blocks.clear()
        self._rblock = None

    # -- dictionary ------------------------------------------------------------
    def _block(self, b: int) -> tuple[list[str], memoryview]:
        got = self._blocks.get(b)
        if got is not None:
            return got
        base = self.sections[S_BLOCKS][0]
        start, end = self._block_offs[b], self._block_offs[b + 1]
        data = self._read(base + start, end - start)
        if crc(data) != self._block_crcs[b]:
            raise self._corrupt(f"term block {b}")
        n = struct.unpack_from("<I", data)[0]
        offs = _arr("I", data[4 : 8 + 4 * n])
        ent_start = 8 + 4 * n
        blob_start = ent_start + n * _ENTRY.size
        blob = data[blob_start:]
        names = [blob[offs[i] : offs[i + 1]].decode("utf-8", "surrogatepass") for i in range(n)]
        got = (names, memoryview(data)[ent_start:blob_start])
        self._blocks[b] = got
        return got

    def _entry(self, b: int, i: int) -> tuple[int, int, int, int]:
        _, ents = self._block(b)
        off, df, ccrc = _ENTRY.unpack_from(ents, i * _ENTRY.size)
        return off, df, ccrc, b * BLOCK_TERMS + i

    def lookup(self, term: str) -> tuple[int, int, int, int] | None:
        """(postings offset, df, crc, rank) of a term, or None."""
        enc = term.encode("utf-8", "surrogatepass")
        b = bisect_right(self._first, enc) - 1
        if b < 0:
            return None
        names, _ = self._block(b)
        i = bisect_left(names, term)
        if i < len(names) and names[i] == term:
            return self._entry(b, i)
        return None

    def terms_with_prefix(self, prefix: str) -> list[str]:
        enc = prefix.encode("utf-8", "surrogatepass")
        b = max(bisect_left(self._first, enc) - 1, 0)
        out: list[str] = []
        while b < self.nblocks:
            names, _ = self._block(b)
            for name in names[bisect_left(names, prefix) :]:
                if not name.startswith(prefix):
                    return out
                out.append(name)
            b += 1
        return out

    def postings(self, term: str) -> tuple[array[Any], array[Any]] | None:
        """(doc ids, weighted tfs) of a term, verified, or None when absent."""
        found = self.lookup(term)
        if found is None:
            return None
        off, df, want, _ = found
        data = self._read(self.sections[S_POSTINGS][0] + off, df * (self.doc_size + 2))
        if crc(data) != want:
            raise self._corrupt(f"postings of {term!r}")
        cut = df * self.doc_size
        return _arr(self.doc_code, data[:cut]), _arr("H", data[cut:])

    def prefix_doc_ids(self, prefix: str) -> set[int]:
        """Doc ids (tombstones included) of every term starting with `prefix`.

        Those terms are adjacent in the dictionary and so are their postings:
        one read covers them all; each term's CRC is still checked."""
        enc = prefix.encode("utf-8", "surrogatepass")
        b = max(bisect_left(self._first, enc) - 1, 0)
        entries: list[tuple[int, int, int]] = []
        while b < self.nblocks:
            names, ents = self._block(b)
            start = bisect_left(names, prefix)
            stop = start
            while stop < len(names) and names[stop].startswith(prefix):
                stop += 1
            entries.extend(_ENTRY.unpack_from(ents, i * _ENTRY.size) for i in range(start, stop))
            if stop < len(names):
                break
            b += 1
        out: set[int] = set()
        if not entries:
            return out
        width = self.doc_size + 2
        first = entries[0][0]
        data = self._read(
            self.sections[S_POSTINGS][0] + first, entries[-1][0] + entries[-1][1] * width - first
        )
        # Most frequent terms first: once every document is in, the rest
        # can add nothing (a short prefix often matches them all).
        entries.sort(key=lambda e: -e[1])
        for off, df, want in entries:
            chunk = data[off - first : off - first + df * width]
            if crc(chunk) != want:
                raise self._corrupt("postings")
            out.update(_arr(self.doc_code, chunk[: df * self.doc_size]))
            if len(out) >= self.ndocs:
                break
        return out

    def rank(self, term: str) -> int | None:
        """The rank token streams store for `term`; None if no stream holds
        it (not a term here, or not a word)."""
        if term < WORD_START:
            return None
        found = self.lookup(term)
        return None if found is None else found[3] - self.word_base

    # -- documents ---------------------------------------------------------------
    def lengths(self) -> array[Any]:
        if self._lengths is None:
            self._lengths = _arr("I", self._section(S_LENGTHS))
        return self._lengths

    def field_lengths(self) -> list[array[Any]]:
        """Raw token counts per field (title, tags, description, concept ID),
        one array of ndocs each."""
        if self._flens is None:
            data = _arr("I", self._section(S_FLENS))
            if len(data) != NFIELDS * self.ndocs:
                raise self._corrupt("field lengths")
            n = self.ndocs
            self._flens = [data[f * n : (f + 1) * n] for f in range(NFIELDS)]
        return self._flens

    def keys(self) -> list[str]:
        if self._keys is None:
            data = self._section(S_KEYS)
            offs = _arr("I", data[: 4 * (self.ndocs + 1)])
            blob = data[4 * (self.ndocs + 1) :]
            self._keys = [
                blob[offs[i] : offs[i + 1]].decode("utf-8", "surrogateescape")
                for i in range(self.ndocs)
            ]
        return self._keys

    def find(self, key: str) -> int | None:
        """The doc id of `key` (tombstoned or not), by bisecting the sorted
        keys section: a writer locating a few changed keys decodes about
        log2(ndocs) of them instead of all."""
        if self._keys is not None:
            i = bisect_left(self._keys, key)
            return i if i < self.ndocs and self._keys[i] == key else None
        view = _KeyView(self._section(S_KEYS), self.ndocs)
        i = bisect_left(view, key)
        return i if i < self.ndocs and view[i] == key else None

    def _record(self, docid: int) -> bytes:
        # One document: read its reference alone (checked via the record CRC).
        ref = self._read(self.sections[S_DOCREFS][0] + docid * _DOCREF.size, _DOCREF.size)
        block, start, length, want = _DOCREF.unpack(ref)
        if self._rblock is None or self._rblock[0] != block:
            if self._rtable is None:
                self._rtable = self._section(S_RTABLE)
            if (block + 1) * _RBLOCK.size > len(self._rtable):
                raise self._corrupt(f"document {docid} reference")
            off, blen, bcrc = _RBLOCK.unpack_from(self._rtable, block * _RBLOCK.size)
            data = self._read(self.sections[S_RECORDS][0] + off, blen)
            if crc(data) != bcrc:
                raise self._corrupt(f"record block {block}")
            try:
                self._rblock = (block, _decompress(data))
            except ValueError:
                raise self._corrupt(f"record block {block}") from None
        rec = self._rblock[1][start : start + length]
        if crc(rec) != want:
            raise self._corrupt(f"document {docid}")
        return rec

    def sequence(self, docid: int) -> array[Any]:
        return next(self.sequences([docid]))[1]

    def sequences(self, docids: Iterable[int]) -> Iterator[tuple[int, array[Any]]]:
        """Token streams (term ranks) of documents. Streams are read and
        CRC-checked in runs of SEQ_BLOCK_DOCS documents; give ids in
        increasing order so each run is read once."""
        offs, crcs = self._seq_index()
        base = self.sections[S_SEQS][0]
        run, data, start = -1, b"", 0
        for docid in docids:
            r = docid // SEQ_BLOCK_DOCS
            if r != run:
                first = r * SEQ_BLOCK_DOCS
                start = offs[first]
                end = offs[min(first + SEQ_BLOCK_DOCS, self.ndocs)]
                data = self._read(base + start, end - start)
                if crc(data) != crcs[r]:
                    raise self._corrupt(f"token streams of documents {first}+")
                run = r
            yield docid, _arr(self.seq_code, data[offs[docid] - start : offs[docid + 1] - start])

    def _seq_index(self) -> tuple[array[Any], array[Any]]:
        if self._seq_offs is None:
            data = self._section(S_SEQOFFS)
            cut = 8 * (self.ndocs + 1)
            self._seq_offs = _arr("Q", data[:cut])
            self._seq_crcs = _arr("I", data[cut:])
        return self._seq_offs, self._seq_crcs

    def phrase_docs(self, docids: Iterable[int], ranks: Sequence[int]) -> set[int]:
        """Those of `docids` (increasing) whose token stream holds `ranks`
        consecutively. One ``bytes.find`` scan per run of SEQ_BLOCK_DOCS
        streams instead of one array per document: a phrase of common words
        checks tens of thousands of documents."""
        offs, crcs = self._seq_index()
        if not ranks:
            return set(docids)
        pattern = array(self.seq_code, ranks).tobytes()
        size = len(pattern) // len(ranks)
        base = self.sections[S_SEQS][0]
        out: set[int] = set()
        by_run: dict[int, set[int]] = defaultdict(set)
        for d in docids:
            by_run[d // SEQ_BLOCK_DOCS].add(d)
        for r, wanted in by_run.items():
            first = r * SEQ_BLOCK_DOCS
            last = min(first + SEQ_BLOCK_DOCS, self.ndocs)
            start = offs[first]
            data = self._read(base + start, offs[last] - start)
            if crc(data) != crcs[r]:
                raise self._corrupt(f"token streams of documents {first}+")
            # Every find resumes at the next item boundary at least, and a
            # document that is decided (found, or not a candidate) is skipped
            # whole: a stream with many occurrences costs one pass, not one
            # find per overlapping occurrence.
            at = data.find(pattern)
            while at >= 0:
                if at % size:
                    at = data.find(pattern, at - at % size + size)
                    continue
                pos = start + at
                d = bisect_right(offs, pos, first, last) - 1
                end = offs[d + 1]
                # A hit running past `end` spills into the next document, and
                # so would every later hit in this one.
                if d in wanted and pos + len(pattern) <= end:
                    out.add(d)
                at = data.find(pattern, end - start)  # next document
        return out

    def stored(self, docid: int) -> StoredDoc:
        key, cid, scope, title, typ, desc, tags, body, size = json.loads(self._record(docid))
        return StoredDoc(key, cid, scope, title, typ, desc, tuple(tags), body, size)

    # -- audit ---------------------------------------------------------------------
    def verify_all(self) -> int:
        """Read every byte of the file and check every checksum (`ctindex
        verify`). Queries check only the parts they read, so damage in a part
        no query touched would otherwise stay hidden. Also checks that the
        sections tile the file exactly (no gap, overlap or trailing bytes,
        each of which would be bytes no checksum covers). Returns the bytes
        read; raises IndexCorrupt naming the part at fault."""
        size = self.file_size()
        pos = HEADER_SIZE
        for idx, (off, length, _) in enumerate(self.sections):
            if off != pos:
                raise IndexCorrupt(
                    f"{self.path}: section {idx} at byte {off}, expected {pos} (damaged index file)"
                )
            pos = off + length
        if pos != size:
            raise IndexCorrupt(
                f"{self.path}: {size} bytes, its sections end at byte {pos} (damaged or truncated)"
            )
        for idx, (_, _, want) in enumerate(self.sections):
            if want:
                self._section(idx)
        # Term blocks, then each term's postings: together they must cover
        # the postings section end to end.
        if self._block_offs[-1] != self.sections[S_BLOCKS][1]:
            raise self._corrupt("term blocks length")
        width = self.doc_size + 2
        expect = 0
        terms = 0
        for b in range(self.nblocks):
            names, ents = self._block(b)
            for i in range(len(names)):
                off, df, want = _ENTRY.unpack_from(ents, i * _ENTRY.size)
                if off != expect:
                    raise self._corrupt(f"postings layout at term {b * BLOCK_TERMS + i}")
                data = self._read(self.sections[S_POSTINGS][0] + off, df * width)
                if crc(data) != want:
                    raise self._corrupt(f"postings of {names[i]!r}")
                expect += df * width
            terms += len(names)
            self._blocks.pop(b, None)  # an audit must not keep the whole dictionary
        if terms != self.nterms or expect != self.sections[S_POSTINGS][1]:
            raise self._corrupt("term dictionary size")
        # Stored records: every record block, every document's record.
        rtable = self._section(S_RTABLE)
        nrblocks = len(rtable) // _RBLOCK.size
        expect = 0
        for block in range(nrblocks):
            off, blen, _ = _RBLOCK.unpack_from(rtable, block * _RBLOCK.size)
            if off != expect:
                raise self._corrupt(f"record block {block} layout")
            expect += blen
        if expect != self.sections[S_RECORDS][1]:
            raise self._corrupt("record blocks size")
        for docid in range(self.ndocs):
            try:
                json.loads(self._record(docid))
            except ValueError as exc:
                raise IndexCorrupt(
                    f"{self.path}: document {docid} unreadable ({exc}) (damaged index file)"
                ) from exc
        self._rblock = None
        # Token streams, run by run; their offsets must end at the section end.
        offs, _ = self._seq_index()
        if self.ndocs and offs[self.ndocs] != self.sections[S_SEQS][1]:
            raise self._corrupt("token streams size")
        for _ in self.sequences(range(self.ndocs)):
            pass
        return size
