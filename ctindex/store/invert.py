"""The pure inverter: a segment's postings and token streams from its
documents' term counts and token lists. It is the specification the
optional C twin (ctindex/store/_invert.c, loaded by native_invert.py)
matches byte for byte; segment_build.py runs whichever is present.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from itertools import accumulate

from ctindex.store.durable import crc
from ctindex.store.segment import ENTRY, SEQ_BLOCK_DOCS, TF_MAX, to_le


def invert_py(tfws: list[dict[str, int]], docs32: bool) -> tuple[list[str], bytes, bytes]:
    """(sorted terms, postings, dictionary entries) of documents
    in doc-id order: per term its doc ids then its weighted tfs (u16, clipped
    at TF_MAX), and an ENTRY (offset, df, crc) each. ctindex/store/_invert.c
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
    pack_entry = ENTRY.pack
    off = 0
    for t in terms:
        lst = post[t]
        tfs = lst[1::2]
        try:
            tf_arr = array("H", tfs)
        except OverflowError:
            tf_arr = array("H", [min(x, TF_MAX) for x in tfs])
        chunk = to_le(array(doc_code, lst[0::2])) + to_le(tf_arr)
        postings.append(chunk)
        entries.append(pack_entry(off, len(tfs), crc(chunk)))
        off += len(chunk)
    return terms, b"".join(postings), b"".join(entries)


def streams_py(
    token_lists: list[list[str]], terms: list[str], sep: str, seq32: bool
) -> tuple[bytes, bytes, bytes]:
    """(token streams as ranks in `terms`, `sep` as the width's largest
    value; their offsets; a crc per SEQ_BLOCK_DOCS documents):
    ctindex/store/_invert.c `Inverter.streams` writes the same bytes."""
    seq_code = "I" if seq32 else "H"
    rank = {t: i for i, t in enumerate(terms)}
    rank[sep] = 0xFFFFFFFF if seq32 else 0xFFFF
    get_rank = rank.__getitem__
    seqs = [to_le(array(seq_code, map(get_rank, tokens))) for tokens in token_lists]
    seq_offs = array("Q", [0])
    seq_offs.extend(accumulate(map(len, seqs)))
    seq_crcs = array(
        "I",
        [crc(b"".join(seqs[i : i + SEQ_BLOCK_DOCS])) for i in range(0, len(seqs), SEQ_BLOCK_DOCS)],
    )
    return b"".join(seqs), to_le(seq_offs), to_le(seq_crcs)


class PyInverter:
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
        """(sorted terms, postings, dictionary entries): `invert_py`."""
        if self._terms is not None:
            raise ValueError("Inverter: postings() once")
        self._terms, postings, entries = invert_py(self._tfws, docs32)
        self._tfws = []
        return self._terms, postings, entries

    def streams(self, word_base: int, seq32: bool) -> tuple[bytes, bytes, bytes]:
        """The token streams as ranks among the terms from `word_base` on:
        `streams_py`."""
        if self._terms is None:
            raise ValueError("Inverter: streams() after postings()")
        return streams_py(self._tokens, self._terms[word_base:], self._sep, seq32)
