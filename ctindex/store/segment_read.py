"""Reading a segment file: the term dictionary, postings, lengths, keys,
token streams and stored records, each read with ``os.pread`` only when a
query touches it and checked against its CRC (the format: segment.py,
docs/format.md). ``verify_all`` reads every byte (`ctindex verify`).
"""

from __future__ import annotations

import json
import os
import struct
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar, overload

from ctindex.base.statefile import open_regular
from ctindex.store.durable import IndexCorrupt, crc
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
    S_BLOCKS,
    S_DOCREFS,
    S_FLENS,
    S_KEYS,
    S_LENGTHS,
    S_POSTINGS,
    S_RECORDS,
    S_RTABLE,
    S_SEQOFFS,
    S_SEQS,
    S_TOP,
    SECTION,
    SEQ_BLOCK_DOCS,
    WORD_START,
    StoredDoc,
    from_le,
    to_le,
)

# What a reader keeps per segment (see Segment.__init__): inflated record
# blocks (about 64 blocks of usual pages, or a few of the largest), checked
# runs of token streams, parsed records (by their size in bytes), and
# checked postings as arrays.
RECORD_CACHE_BYTES = 2 * 1024 * 1024
RUN_CACHE_BYTES = 2 * 1024 * 1024
DOC_CACHE_BYTES = 2 * 1024 * 1024
POSTING_CACHE_BYTES = 2 * 1024 * 1024
LOOKED_TERMS = 4096  # terms whose dictionary entry (or absence) is kept, per segment

K = TypeVar("K", int, str)
V = TypeVar("V")
Posting = tuple["array[int]", "array[int]"]  # (doc ids, weighted tfs); read-only to every caller
Entry = tuple[int, int, int, int]  # a term's (postings offset, df, crc, rank)


class Kept(Generic[K, V]):
    """Values by key, least recently used first, the oldest dropped beyond
    `budget` bytes as their owner counts them (the newest always stays,
    whatever its size)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.nbytes = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[K]:
        return list(self._items)

    def get(self, key: K) -> V | None:
        got = self._items.get(key)
        if got is None:
            return None
        self._items.move_to_end(key)
        return got[0]

    def put(self, key: K, value: V, size: int) -> None:
        old = self._items.pop(key, None)
        self.nbytes += size - (old[1] if old is not None else 0)
        self._items[key] = (value, size)
        self._trim()

    def resize(self, budget: int) -> None:
        self.budget = budget
        self._trim()

    def _trim(self) -> None:
        while self.nbytes > self.budget and len(self._items) > 1:
            _, (_, dropped) = self._items.popitem(last=False)
            self.nbytes -= dropped

    def clear(self) -> None:
        self._items.clear()
        self.nbytes = 0


# (run, offsets, start, wanted, pattern, item size) -> the wanted documents
# holding the pattern: ctindex/search/native_rank.py `phrase_scan_py` and
# its C twin. `run` is the streams section from byte `start` on, `offsets`
# the section's per-document byte offsets (ndocs + 1), `wanted` increasing
# ids whose streams lie inside `run`.
PhraseScan = Callable[[bytes, "array[int]", int, list[int], bytes, int], list[int]]

# (runs, their starts, offsets, docs, ranks, separator, item size) -> for
# each of `docs`, the fewest consecutive tokens of its stream holding every
# rank with no separator among them (None: no such run):
# ctindex/search/native_rank.py `span_scan_py` and its C twin. Each run is
# the streams section from its start on, as PhraseScan's `run`; `docs`
# increasing, each stream inside one of the runs (in increasing order).
SpanScan = Callable[
    [Sequence[bytes], Sequence[int], "array[int]", list[int], list[int], int, int],
    "list[int | None]",
]

# One decompressor per thread (an instance is not safe to share between
# threads; the daemon answers queries on a worker thread): making one costs
# about as much as decompressing a small record block.
_LOCAL = threading.local()


def _decompress(blob: bytes) -> bytes:
    """A record block's bytes (ValueError: not a whole zstd frame)."""
    import zstandard  # lazy: only readers of stored fields need it

    dctx = getattr(_LOCAL, "dctx", None)
    if dctx is None:
        dctx = _LOCAL.dctx = zstandard.ZstdDecompressor()
    try:
        return dctx.decompress(blob)
    except zstandard.ZstdError as exc:
        raise ValueError(f"record block does not decompress ({exc})") from exc


class _KeyView(Sequence[str]):
    """The keys section as a lazily decoded sequence (for bisect, and for
    the few keys a query's results need), and the one reader of its
    layout: offsets, then the keys' bytes."""

    __slots__ = ("_at", "_data", "_n", "_offs")

    def __init__(self, data: bytes, ndocs: int) -> None:
        self._n = ndocs
        self._offs = from_le("I", data[: 4 * (ndocs + 1)])
        self._data = data
        self._at = 4 * (ndocs + 1)  # where the keys' bytes begin

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if not 0 <= i < self._n:
            raise IndexError(i)
        at, offs = self._at, self._offs
        return self._data[at + offs[i] : at + offs[i + 1]].decode("utf-8", "surrogateescape")

    def decoded(self) -> list[str]:
        """Every key, in doc id order."""
        blob, offs = self._data[self._at :], self._offs
        return [
            blob[offs[i] : offs[i + 1]].decode("utf-8", "surrogateescape") for i in range(self._n)
        ]


class PrefixRun(NamedTuple):
    """The dictionary's run of terms starting with a prefix (`Segment.prefix_postings`)."""

    terms: list[str]  # in dictionary order
    entries: bytes  # their ENTRY records (postings offset, df, crc), packed, same order
    first: int  # the postings offset `data` starts at
    data: bytes  # the postings of all of them, one read


def _run_end(names: list[str], prefix: str, start: int) -> int:
    """The end of the run of `names` (sorted) starting with `prefix` from
    `start` on: those names are adjacent, so a bisection finds it."""
    lo, hi = start, len(names)
    while lo < hi:
        mid = (lo + hi) // 2
        if names[mid].startswith(prefix):
            lo = mid + 1
        else:
            hi = mid
    return lo


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
        # What `lookup` found for a term, absent ones too (a query asks for
        # each word's field forms, most of which no document has): read
        # from the blocks above and dropped with them.
        self._looked: dict[str, Entry | None] = {}
        self._lengths: array[int] | None = None
        self._flens: list[array[int]] | None = None
        self._keys: list[str] | None = None
        self._key_view: _KeyView | None = None
        self._rtable: bytes | None = None
        self._seq_offs: array[int] | None = None
        self._seq_crcs: array[int] = array("I")
        # A long-lived reader (ctindex.Index, the daemon's query service)
        # shows the same documents and ranks the same candidates again and
        # again: it keeps inflated record blocks (a large page's costs far
        # more to inflate than to keep; each record read from one is still
        # checked against its own CRC), token-stream runs whose CRC held,
        # records parsed (a large page's JSON costs more than its inflating)
        # and postings checked and decoded (a prefix scores fifty of them).
        self._rblocks: Kept[int, bytes] = Kept(RECORD_CACHE_BYTES)
        self._runs: Kept[int, bytes] = Kept(RUN_CACHE_BYTES)
        self._docs: Kept[int, StoredDoc] = Kept(DOC_CACHE_BYTES)
        self._postings: Kept[str, Posting] = Kept(POSTING_CACHE_BYTES)

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
        magic, fmt, ndocs, nterms, nblocks, flags, word_base, nsec = HEAD.unpack_from(head)
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
            SECTION.unpack_from(head, HEAD.size + i * SECTION.size) for i in range(NSECTIONS)
        ]
        top = self._section(S_TOP)
        nb = struct.unpack_from("<I", top)[0]
        p = 4
        ft_offs = from_le("I", top[p : p + 4 * (nb + 1)])
        p += 4 * (nb + 1)
        self._block_offs = from_le("Q", top[p : p + 8 * (nb + 1)])
        p += 8 * (nb + 1)
        self._block_crcs = from_le("I", top[p : p + 4 * nb])
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

    def keep_within(self, nbytes: int) -> None:
        """Keep at most `nbytes` of records, token streams and parsed records
        in all (a quarter each; a long-lived process sharing memory with
        more, the daemon, keeps less)."""
        for kept in self._kept():
            kept.resize(nbytes // 4)

    @property
    def kept_bytes(self) -> int:
        """Bytes of record blocks, token-stream runs and parsed records kept
        from earlier reads (each within its own budget per segment)."""
        return sum(kept.nbytes for kept in self._kept())

    def forget_blocks(self) -> None:
        """Drop the cached dictionary blocks and record block; they are read
        again when needed."""
        self._blocks.clear()
        self._looked.clear()
        self._forget_records()

    def _forget_records(self) -> None:
        for kept in self._kept():
            kept.clear()

    def _kept(
        self,
    ) -> tuple[Kept[int, bytes], Kept[int, bytes], Kept[int, StoredDoc], Kept[str, Posting]]:
        return self._rblocks, self._runs, self._docs, self._postings

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
        offs = from_le("I", data[4 : 8 + 4 * n])
        ent_start = 8 + 4 * n
        blob_start = ent_start + n * ENTRY.size
        blob = data[blob_start:]
        names = [blob[offs[i] : offs[i + 1]].decode("utf-8", "surrogatepass") for i in range(n)]
        got = (names, memoryview(data)[ent_start:blob_start])
        self._blocks[b] = got
        return got

    def _entry(self, b: int, i: int) -> tuple[int, int, int, int]:
        _, ents = self._block(b)
        off, df, ccrc = ENTRY.unpack_from(ents, i * ENTRY.size)
        return off, df, ccrc, b * BLOCK_TERMS + i

    def lookup(self, term: str) -> Entry | None:
        """(postings offset, df, crc, rank) of a term, or None."""
        looked = self._looked
        if term in looked:
            return looked[term]
        enc = term.encode("utf-8", "surrogatepass")
        b = bisect_right(self._first, enc) - 1
        found = None
        if b >= 0:
            names, _ = self._block(b)
            i = bisect_left(names, term)
            if i < len(names) and names[i] == term:
                found = self._entry(b, i)
        if len(looked) >= LOOKED_TERMS:
            looked.clear()
        looked[term] = found
        return found

    def _prefix_entries(self, prefix: str) -> tuple[list[str], bytes]:
        """The terms starting with `prefix` (adjacent in the dictionary) and
        their entries, packed as stored: one bisection per block at each end
        of the run, no Python step per term."""
        enc = prefix.encode("utf-8", "surrogatepass")
        b = max(bisect_left(self._first, enc) - 1, 0)
        terms: list[str] = []
        packed: list[bytes] = []
        while b < self.nblocks:
            names, ents = self._block(b)
            start = bisect_left(names, prefix)
            stop = _run_end(names, prefix, start)
            terms += names[start:stop]
            packed.append(bytes(ents[start * ENTRY.size : stop * ENTRY.size]))
            if stop < len(names):
                break
            b += 1
        return terms, b"".join(packed)

    def terms_with_prefix(self, prefix: str) -> list[str]:
        return self._prefix_entries(prefix)[0]

    def postings(self, term: str) -> Posting | None:
        """(doc ids, weighted tfs) of a term, verified, or None when absent.
        Kept for the next query: callers only read the arrays."""
        got = self._postings.get(term)
        if got is not None:
            return got
        found = self.lookup(term)
        if found is None:
            return None
        off, df, want, _ = found
        data = self._read(self.sections[S_POSTINGS][0] + off, df * (self.doc_size + 2))
        if crc(data) != want:
            raise self.corrupt_postings(term)
        return self._keep_posting(term, data, df)

    def _keep_posting(self, term: str, data: bytes, df: int) -> Posting:
        cut = df * self.doc_size
        got = from_le(self.doc_code, data[:cut]), from_le("H", data[cut:])
        self._postings.put(term, got, len(data))
        return got

    def corrupt_postings(self, term: str) -> IndexCorrupt:
        """The error of a posting failing its checksum (raised by whoever
        checks it: `postings`, or a prefix's union, ctindex/search/native_rank.py)."""
        return self._corrupt(f"postings of {term!r}")

    def prefix_postings(self, prefix: str) -> PrefixRun:
        """Every term starting with `prefix`, their entries and one read of
        their postings (adjacent, as the terms are), not yet checked: each
        term's CRC is in its entry, checked as its posting is used."""
        terms, entries = self._prefix_entries(prefix)
        if not terms:
            return PrefixRun(terms, entries, 0, b"")
        first = ENTRY.unpack_from(entries)[0]
        off, df, _ = ENTRY.unpack_from(entries, len(entries) - ENTRY.size)
        # A damaged dictionary may order offsets wrongly: the read is then
        # empty and the union reports the first posting outside it.
        length = max(off + df * (self.doc_size + 2) - first, 0)
        data = self._read(self.sections[S_POSTINGS][0] + first, length)
        return PrefixRun(terms, entries, first, data)

    def entry_in(self, run: PrefixRun, term: str) -> tuple[int, int, int] | None:
        """(postings offset, df, crc) of `term`, which starts with the run's
        prefix (so is in the run or not in this segment), or None."""
        i = bisect_left(run.terms, term)
        if i == len(run.terms) or run.terms[i] != term:
            return None
        off, df, want = ENTRY.unpack_from(run.entries, i * ENTRY.size)
        return off, df, want

    def postings_in(self, run: PrefixRun, term: str) -> tuple[array[int], array[int]] | None:
        """`postings(term)` for a term of the run, taken from the run's
        read (no dictionary lookup, no read of its own), checked as there."""
        got = self._postings.get(term)
        if got is not None:
            return got
        found = self.entry_in(run, term)
        if found is None:
            return None
        off, df, want = found
        start = off - run.first
        data = run.data[start : start + df * (self.doc_size + 2)] if start >= 0 else b""
        if crc(data) != want or len(data) != df * (self.doc_size + 2):
            raise self.corrupt_postings(term)
        return self._keep_posting(term, data, df)

    def rank(self, term: str) -> int | None:
        """The rank token streams store for `term`; None if no stream holds
        it (not a term here, or not a word)."""
        if term < WORD_START:
            return None
        found = self.lookup(term)
        return None if found is None else found[3] - self.word_base

    # -- documents ---------------------------------------------------------------
    def lengths(self) -> array[int]:
        if self._lengths is None:
            self._lengths = from_le("I", self._section(S_LENGTHS))
        return self._lengths

    def field_lengths(self) -> list[array[int]]:
        """Raw token counts per field (title, tags, description, concept ID),
        one array of ndocs each."""
        if self._flens is None:
            data = from_le("I", self._section(S_FLENS))
            if len(data) != NFIELDS * self.ndocs:
                raise self._corrupt("field lengths")
            n = self.ndocs
            self._flens = [data[f * n : (f + 1) * n] for f in range(NFIELDS)]
        return self._flens

    def keys(self) -> list[str]:
        if self._keys is None:
            view = self._key_view or _KeyView(self._section(S_KEYS), self.ndocs)
            self._keys = view.decoded()
            self._key_view = None  # the list answers from now on
        return self._keys

    def key_view(self) -> Sequence[str]:
        """The keys by doc id, each decoded when asked for: a one-shot
        query needs the paths of its few results, not every key of every
        segment (at 153,616 documents decoding them all was ~30 ms a query)."""
        if self._keys is not None:
            return self._keys
        if self._key_view is None:
            self._key_view = _KeyView(self._section(S_KEYS), self.ndocs)
        return self._key_view

    def find(self, key: str) -> int | None:
        """The doc id of `key` (tombstoned or not), by bisecting the sorted
        keys section: a writer locating a few changed keys decodes about
        log2(ndocs) of them instead of all. The section is read and checked
        once, then kept: reading it again for each key made an update that
        changes every file quadratic (106 s for 153,604 files)."""
        view = self.key_view()
        i = bisect_left(view, key)
        return i if i < self.ndocs and view[i] == key else None

    def _record(self, docid: int) -> bytes:
        # One document: read its reference alone (checked via the record CRC).
        ref = self._read(self.sections[S_DOCREFS][0] + docid * DOCREF.size, DOCREF.size)
        block, start, length, want = DOCREF.unpack(ref)
        records = self._rblocks.get(block)
        if records is None:
            records = self._record_block(block, docid)
        rec = records[start : start + length]
        if crc(rec) != want:
            raise self._corrupt(f"document {docid}")
        return rec

    def _record_block(self, block: int, docid: int) -> bytes:
        """Read, check and inflate one record block, and keep it (dropping
        the least recently used beyond the budget; the newest always stays)."""
        if self._rtable is None:
            self._rtable = self._section(S_RTABLE)
        if (block + 1) * RBLOCK.size > len(self._rtable):
            raise self._corrupt(f"document {docid} reference")
        off, blen, bcrc = RBLOCK.unpack_from(self._rtable, block * RBLOCK.size)
        data = self._read(self.sections[S_RECORDS][0] + off, blen)
        if crc(data) != bcrc:
            raise self._corrupt(f"record block {block}")
        try:
            records = _decompress(data)
        except ValueError:
            raise self._corrupt(f"record block {block}") from None
        self._rblocks.put(block, records, len(records))
        return records

    def sequence(self, docid: int) -> array[int]:
        return next(self.sequences([docid]))[1]

    def sequences(self, docids: Iterable[int]) -> Iterator[tuple[int, array[int]]]:
        """Token streams (term ranks) of documents. Streams are read and
        CRC-checked in runs of SEQ_BLOCK_DOCS documents; give ids in
        increasing order so each run is read once."""
        offs, _ = self._seq_index()
        run, data, start = -1, memoryview(b""), 0
        for docid in docids:
            r = docid // SEQ_BLOCK_DOCS
            if r != run:
                data = memoryview(self._run(r))  # sliced without a copy: a stream may be large
                start = offs[r * SEQ_BLOCK_DOCS]
                run = r
            yield docid, from_le(self.seq_code, data[offs[docid] - start : offs[docid + 1] - start])

    def _run(self, r: int) -> bytes:
        """The token streams of run `r`, read and checked once, then kept."""
        got = self._runs.get(r)
        if got is not None:
            return got
        offs, crcs = self._seq_index()
        first = r * SEQ_BLOCK_DOCS
        start = offs[first]
        end = offs[min(first + SEQ_BLOCK_DOCS, self.ndocs)]
        data = self._read(self.sections[S_SEQS][0] + start, end - start)
        if crc(data) != crcs[r]:
            raise self._corrupt(f"token streams of documents {first}+")
        self._runs.put(r, data, len(data))
        return data

    def stream_lengths(self, docids: Sequence[int]) -> list[int]:
        """Tokens in each document's stream, from the stream offsets alone
        (no stream is read)."""
        offs, _ = self._seq_index()
        size = array(self.seq_code).itemsize
        return [(offs[d + 1] - offs[d]) // size for d in docids]

    def _seq_index(self) -> tuple[array[int], array[int]]:
        if self._seq_offs is None:
            data = self._section(S_SEQOFFS)
            cut = 8 * (self.ndocs + 1)
            self._seq_offs = from_le("Q", data[:cut])
            self._seq_crcs = from_le("I", data[cut:])
        return self._seq_offs, self._seq_crcs

    def phrase_docs(
        self, docids: Sequence[int], ranks: Sequence[int], scan: PhraseScan
    ) -> set[int]:
        """Those of `docids` (increasing) whose token stream holds `ranks`
        consecutively. `scan` (the search side's C scan or its pure twin,
        ctindex/search/native_rank.py) finds them in one call per run of
        SEQ_BLOCK_DOCS streams, read and checked once (`_run`): a phrase of
        common words checks thousands of documents, and a Python step per
        document or per occurrence would cost more than reading them."""
        if not ranks:
            return set(docids)
        pattern = to_le(array(self.seq_code, ranks))
        size = len(pattern) // len(ranks)
        offs, _ = self._seq_index()
        out: set[int] = set()
        for data, start, ids in self._by_run(docids):
            out.update(scan(data, offs, start, ids, pattern, size))
        return out

    def spans(
        self, docids: Sequence[int], ranks: Sequence[int], sep: int, scan: SpanScan
    ) -> list[int | None]:
        """For each of `docids` (increasing), the fewest consecutive tokens
        of its whole stream holding every one of `ranks` within one field
        (None: none does). One `scan` call over the runs of SEQ_BLOCK_DOCS
        streams that hold them, each read and checked once (`_run`), each
        stream read in place: a conjunction's proximity pool is up to a
        hundred short streams in dozens of runs, and a copy and a call per
        stream, or a call per run, cost more than the walk."""
        ids = docids if isinstance(docids, list) else list(docids)
        size = array(self.seq_code).itemsize
        offs, _ = self._seq_index()
        numbers = list(dict.fromkeys([d // SEQ_BLOCK_DOCS for d in ids]))
        runs = [self._run(r) for r in numbers]
        starts = [offs[r * SEQ_BLOCK_DOCS] for r in numbers]
        return scan(runs, starts, offs, ids, list(ranks), sep, size)

    def _by_run(self, docids: Sequence[int]) -> Iterator[tuple[bytes, int, list[int]]]:
        """(streams, their first byte's offset in the section, the ids among
        `docids` whose streams they hold) for each run of SEQ_BLOCK_DOCS
        streams holding one of `docids` (increasing), read and checked once
        (`_run`)."""
        ids = docids if isinstance(docids, list) else list(docids)
        offs, _ = self._seq_index()
        i = 0
        while i < len(ids):
            r = ids[i] // SEQ_BLOCK_DOCS
            j = bisect_left(ids, (r + 1) * SEQ_BLOCK_DOCS, i)
            yield self._run(r), offs[r * SEQ_BLOCK_DOCS], ids[i:j]
            i = j

    def stored(self, docid: int) -> StoredDoc:
        got = self._docs.get(docid)
        if got is not None:
            return got
        rec = self._record(docid)
        key, cid, scope, title, typ, desc, tags, body, size = json.loads(rec)
        doc = StoredDoc(key, cid, scope, title, typ, desc, tuple(tags), body, size)
        self._docs.put(docid, doc, len(rec))
        return doc

    # -- audit ---------------------------------------------------------------------
    def verify_all(self) -> int:
        """Read every byte of the file and check every checksum (`ctindex
        verify`). Queries check only the parts they read, so damage in a part
        no query touched would otherwise stay hidden. Also checks that the
        sections tile the file exactly (no gap, overlap or trailing bytes,
        each of which would be bytes no checksum covers). Returns the bytes
        read; raises IndexCorrupt naming the part at fault."""
        self.forget_blocks()  # every byte from the file, none from what queries kept
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
                off, df, want = ENTRY.unpack_from(ents, i * ENTRY.size)
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
        nrblocks = len(rtable) // RBLOCK.size
        expect = 0
        for block in range(nrblocks):
            off, blen, _ = RBLOCK.unpack_from(rtable, block * RBLOCK.size)
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
        self._forget_records()
        # Token streams, run by run; their offsets must end at the section end.
        offs, _ = self._seq_index()
        if self.ndocs and offs[self.ndocs] != self.sections[S_SEQS][1]:
            raise self._corrupt("token streams size")
        for _ in self.sequences(range(self.ndocs)):
            pass
        return size
