"""A segment of the published index seen as a matcher ``Partition``."""

from __future__ import annotations

import weakref
from array import array
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Sequence

from ctindex.providers.fields import FIELD_TERM
from ctindex.search import native_rank
from ctindex.store.segment import NFIELDS
from ctindex.store.segment_read import PrefixRun, Segment
from ctindex.store.snapshot import SegmentView

# Below one wanted document per this many posting entries, `tf_in` binary
# searches the posting instead of turning it into a dict.
SKIP_RATIO = 8


class SegmentPartition:
    def __init__(self, view: SegmentView) -> None:
        self.seg = view.segment
        self.deleted = view.deleted
        self.ref = view.ref
        self._tf: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, tuple[array[int], array[int]] | None] = {}
        self._universe: set[int] | None = None
        self._prefix: dict[str, set[int]] = {}
        # Runs of the dictionary read for a prefix (its terms, and each
        # field's terms starting with it): matching, and then scoring the
        # expansions, take their entries and postings from them.
        self._runs: dict[str, PrefixRun] = {}
        self._run_lengths: list[int] = []  # the lengths of the runs' prefixes
        self._flen_sums: list[int] | None = None

    def universe(self) -> set[int]:
        if self._universe is None:
            self._universe = set(range(self.seg.ndocs)) - self.deleted
        return self._universe

    def size(self) -> int:
        return self.seg.ndocs - len(self.deleted)

    def tf(self, term: str) -> dict[int, int]:
        got = self._tf.get(term)
        if got is None:
            post = self._posting(term)
            got = {} if post is None else dict(zip(post[0], post[1], strict=True))
            for d in self.deleted.intersection(got) if got and self.deleted else ():
                del got[d]
            self._tf[term] = got
        return got

    def df(self, term: str) -> int:
        """Live documents holding `term`: the dictionary's count when
        nothing is tombstoned (no posting read)."""
        if term in self._tf:
            return len(self._tf[term])
        if not self.deleted:
            run = self._covering(term)
            found = self.seg.lookup(term) if run is None else self.seg.entry_in(run, term)
            return 0 if found is None else found[1]
        post = self._posting(term)
        if post is None:
            return 0
        ids = post[0]
        if len(self.deleted) * SKIP_RATIO >= len(ids):
            return len(self.tf(term))
        n = len(ids)
        gone = 0
        for d in self.deleted:
            at = bisect_left(ids, d)
            gone += at < n and ids[at] == d
        return n - gone

    def posting_arrays(self, term: str) -> tuple[array[int], array[int]] | None:
        """(doc ids, weighted tfs) of `term` as the segment stores them,
        tombstoned documents included (the dense scoring masks them)."""
        return self._posting(term)

    def _posting(self, term: str) -> tuple[array[int], array[int]] | None:
        if term not in self._arrays:
            run = self._covering(term)
            got = self.seg.postings(term) if run is None else self.seg.postings_in(run, term)
            self._arrays[term] = got
        return self._arrays[term]

    def _run(self, prefix: str) -> PrefixRun:
        run = self._runs.get(prefix)
        if run is None:
            run = self._runs[prefix] = self.seg.prefix_postings(prefix)
            self._run_lengths = sorted({*self._run_lengths, len(prefix)})
        return run

    def _covering(self, term: str) -> PrefixRun | None:
        """A run read earlier that holds `term` if this segment has it (any
        such run: each holds the same entries). Found by looking up the
        term's first n characters for each length n of the runs' prefixes,
        not by trying run after run: a prefix scores every expansion in
        five fields."""
        runs = self._runs
        for n in self._run_lengths:
            run = runs.get(term[:n])
            if run is not None:
                return run
        return None

    def tf_in(self, term: str, docs: set[int]) -> dict[int, int]:
        """`tf(term)` restricted to `docs` (live documents). When `docs` are
        few beside the posting, each is found by binary search in the
        posting's sorted ids (skipping, not walking, the list's bulk):
        no Python step per posting entry."""
        if term in self._tf:
            full = self._tf[term]
            return _restrict(full, docs)
        post = self._posting(term)
        if post is None:
            return {}
        ids, tfs = post
        if len(docs) * SKIP_RATIO >= len(ids):
            full = self.tf(term)
            return _restrict(full, docs)
        return native_rank.restrict()(ids, tfs, docs)

    def term_docs(self, term: str) -> set[int]:
        """The live documents holding `term`, made from the posting's ids at
        C speed (no dict of its tfs)."""
        if term in self._tf:
            return set(self._tf[term])
        post = self._posting(term)
        if post is None:
            return set()
        out = set(post[0])
        if self.deleted:
            out.difference_update(self.deleted)
        return out

    def term_docs_in(self, term: str, docs: set[int]) -> set[int]:
        """Those of `docs` (live) holding `term`: a set intersection when
        the posting is not much longer than `docs`, else a binary search per
        document (`tf_in`)."""
        post = self._posting(term) if term not in self._tf else None
        if post is not None and len(docs) * SKIP_RATIO >= len(post[0]):
            return docs.intersection(post[0])
        return set(self.tf_in(term, docs))

    def tf_over(self, term: str, docs: set[int]) -> tuple[dict[int, int], set[int] | None]:
        """`tf_in` without the copy when it would be one: a posting that
        is not much longer than `docs` comes whole, with `docs` as the
        filter its reader applies (the scoring loops skip what is not in
        it at C speed); a long one is looked up by binary search."""
        if term in self._tf:
            return self._tf[term], docs
        post = self._posting(term)
        if post is None:
            return {}, None
        if len(docs) * SKIP_RATIO >= len(post[0]):
            return self.tf(term), docs
        return self.tf_in(term, docs), None

    def prefix_docs(self, prefix: str) -> set[int]:
        got = self._prefix.get(prefix)
        if got is None:
            got = self._prefix_ids(prefix)
            got.difference_update(self.deleted)
            self._prefix[prefix] = got
        return got

    def _prefix_ids(self, prefix: str) -> set[int]:
        """Doc ids (tombstones included) of every term starting with
        `prefix`: their postings are adjacent, read at once, and united in
        one call (ctindex/search/native_rank.py `prefix_union_py`, or its C
        twin), each term's CRC checked."""
        run = self._run(prefix)
        if not run.terms:
            return set()
        union = native_rank.prefix_union()
        ids, bad = union(run.data, run.first, run.entries, self.seg.doc_size == 4, self.seg.ndocs)
        if bad >= 0:
            raise self.seg.corrupt_postings(run.terms[bad])
        return ids

    def rank(self, term: str) -> int | None:
        return self.seg.rank(term)

    def sequences(self, docs: Iterable[int]) -> Iterator[tuple[int, array[int]]]:
        return self.seg.sequences(docs)

    def phrase_docs(self, docs: Iterable[int], ranks: list[int]) -> set[int]:
        return self.seg.phrase_docs(list(docs), ranks, native_rank.phrase_scan())

    def stream_lengths(self, docs: Sequence[int]) -> list[int]:
        return self.seg.stream_lengths(docs)

    def spans(self, docs: Sequence[int], ranks: Sequence[int], sep: int) -> list[int | None]:
        return self.seg.spans(docs, ranks, sep, native_rank.span_scan())

    def sep_rank(self) -> int:
        return self.seg.sep_rank

    def path_prefix(self, prefix: str) -> set[int]:
        keys = self.seg.key_view()  # sorted: the matches are one contiguous run
        start = bisect_left(keys, prefix)
        out: set[int] = set()
        for d in range(start, len(keys)):
            if not keys[d].startswith(prefix):
                break
            if d not in self.deleted:
                out.add(d)
        return out

    def key(self, doc: int) -> str:
        return self.seg.key_view()[doc]

    def lengths(self) -> array[int]:
        return self.seg.lengths()

    def length_sum(self) -> int:
        return self.ref.length_sum

    def field_lengths(self) -> list[array[int]]:
        return self.seg.field_lengths()

    def field_length_sums(self) -> list[int]:
        if self._flen_sums is None:
            self._flen_sums = _field_length_sums(self.seg, self.deleted, self.ref.field_sums)
        return self._flen_sums

    def terms_with_prefix(self, prefix: str) -> list[str]:
        """The words starting with `prefix`. The matcher scores some of them
        next, each in every field: the runs read here (the words', and each
        field's terms starting with `prefix`) then give their entries and
        postings, instead of a dictionary lookup and a read per term and field."""
        for head in FIELD_TERM:
            self._run(head + prefix)
        return list(self._run(prefix).terms)


# Per open segment, (its tombstones, its live field length sums): a
# partition lives for one query, the segment (and its generation's
# tombstones) for as long as the API keeps the generation open, and summing
# four arrays of every document's lengths was a tenth of a rare word's query.
_SUMS: weakref.WeakKeyDictionary[Segment, tuple[frozenset[int], list[int]]] = (
    weakref.WeakKeyDictionary()
)


def _field_length_sums(
    seg: Segment, deleted: Collection[int], recorded: list[int] | None
) -> list[int]:
    """Raw token counts per field summed over the live documents
    (tombstoned documents are no part of the statistics). `recorded`: the
    sums over every document, as the manifest records them (SegmentRef
    field_sums): then only the tombstoned documents' lengths are summed, and
    none while there are none (a one-shot query over 153,604 documents
    summed 600,000 lengths, ~2.5 ms)."""
    if recorded is not None and len(recorded) != NFIELDS:
        recorded = None  # not this format's fields: summed instead
    if recorded is not None and not deleted:
        return list(recorded)
    held = _SUMS.get(seg)
    if held is not None and held[0] == deleted:
        return held[1]
    flens = seg.field_lengths()
    totals = recorded if recorded is not None else [sum(f) for f in flens]
    sums = [total - sum(f[d] for d in deleted) for total, f in zip(totals, flens, strict=True)]
    _SUMS[seg] = (frozenset(deleted), sums)
    return sums


def _restrict(full: dict[int, int], docs: set[int]) -> dict[int, int]:
    """`full` on `docs`, walking the smaller of the two."""
    if len(full) <= len(docs):
        return {d: t for d, t in full.items() if d in docs}
    return {d: full[d] for d in docs if d in full}
