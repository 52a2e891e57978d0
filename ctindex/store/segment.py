"""The segment file format, shared by its builder (segment_build.py) and its
reader (segment_read.py): the header and section layout, the structs of its
tables, and the stored record of a document.

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

import struct
import sys
from array import array
from typing import NamedTuple

MAGIC = b"CTSEG\x00\x01\x00"
# 2: section 10, the per-field lengths BM25F normalises by (docs/format.md).
# 3: token streams rank word terms only (header field word_base).
# 4: record blocks are zstd frames (were zlib streams).
FORMAT = 4
BLOCK_TERMS = 64
# magic, format, ndocs, nterms, nblocks, flags, word_base, nsections
HEAD = struct.Struct("<8sIIIIIII")
SECTION = struct.Struct("<QQI")  # offset, length, crc (0 for regions checked piecewise)
ENTRY = struct.Struct("<QII")  # postings offset, df, postings crc
DOCREF = struct.Struct("<IIII")  # record block, offset in it, length, crc of the record
RBLOCK = struct.Struct("<QII")  # record block offset, length, crc
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
HEADER_SIZE = HEAD.size + NSECTIONS * SECTION.size + 4
TF_MAX = 0xFFFF
LITTLE = sys.byteorder == "little"


def to_le(arr: array[int]) -> bytes:
    if not LITTLE:  # pragma: no cover - the format is little-endian everywhere
        arr = array(arr.typecode, arr)
        arr.byteswap()
    return arr.tobytes()


def from_le(code: str, data: bytes | memoryview) -> array[int]:
    out = array(code)
    out.frombytes(data)
    if not LITTLE:  # pragma: no cover
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
