"""Query semantics, once: evaluation and BM25 over any ``Partition``.

The index (one partition per segment) and the ``--direct`` oracle (one
partition built in memory from freshly parsed files) implement the same small
``Partition`` interface; everything that decides *which* documents match and
how they score lives here, so the two paths can not drift apart.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from itertools import compress
from typing import NamedTuple, Protocol, TypeAlias, TypeVar, cast

from ctindex.providers.fields import (
    EXACT_ID,
    EXACT_LAST,
    EXACT_TITLE,
    EXACT_TITLE_SET,
    FIELD_TERM,
    WEIGHTS,
)
from ctindex.providers.fields import (
    FIELDS as TEXT_FIELDS,
)
from ctindex.search import native_rank
from ctindex.search.query import (
    And,
    Facet,
    Field,
    IdWord,
    Node,
    Not,
    Or,
    PathPrefix,
    Phrase,
    Prefix,
    Term,
)

# Per field (docs/search.md, "Ranking"): (its weight under the "bm25f"
# experiment, b), in the order title, tags, description, concept ID, body;
# the kept per-field weights are PER_FIELD's. Short identifying fields get a
# high b, so a title that *is* the query beats a long title that merely
# contains it; the body keeps BM25's usual 0.75.
K1 = 1.2
FIELDS = (
    ("title", 4.0, 0.9),
    ("tags", 2.0, 0.6),
    ("description", 2.0, 0.75),
    ("id", 3.0, 0.9),
    ("body", 1.0, 0.75),
)
# How per-field counts become a score (docs/search.md, "Ranking"; measured
# in docs/decisions/ranking.md): "perfield" saturates each field on its own and sums
# them with PER_FIELD's weights, so a title hit keeps its worth however often
# the body repeats the word; "bm25f" (the bench's --saturation experiment)
# saturates the weighted sum of the fields' normalised counts once, so a
# long body that repeats the words drowns the title. Per field won on the
# partial-title queries of bench/relevance.py (npm corpus top-1 0.890 to
# 0.985, Tantivy's) with titles and IDs unchanged.
SATURATION = "perfield"
PER_FIELD = (
    ("title", 3.0),
    ("tags", 1.0),
    ("description", 1.0),
    ("id", 2.0),
    ("body", 1.0),
)
# A prefix scores like its expansions (the best one per document); past this
# many expansions only the closest to the prefix (shortest, then in term
# order) score, and the answer says so. Matching always uses all of them.
PREFIX_CAP = 50
# Order of matches: tier first (exact, near-exact, other), then score.
TIER_EXACT = 2
TIER_NEAR = 1


class Partition(Protocol):
    """A set of documents with local integer ids (live documents only)."""

    def universe(self) -> set[int]: ...
    def size(self) -> int: ...  # number of live documents
    def tf(self, term: str) -> dict[int, int]: ...  # live doc id -> weighted tf
    def df(self, term: str) -> int: ...  # len(tf(term)), maybe without reading it
    def tf_in(self, term: str, docs: set[int]) -> dict[int, int]: ...  # tf(term) on docs
    def term_docs(self, term: str) -> set[int]: ...  # set(tf(term))
    def term_docs_in(self, term: str, docs: set[int]) -> set[int]: ...  # set(tf_in(term, docs))
    def tf_over(self, term: str, docs: set[int]) -> tuple[dict[int, int], set[int] | None]: ...
    #    (posting, filter): tf(term) on docs is the posting's entries in the
    #    filter (None: all of them), whichever is cheaper to give
    def prefix_docs(self, prefix: str) -> set[int]: ...  # live docs with a word term
    #                                                        starting with prefix
    def rank(self, term: str) -> int | None: ...  # id of a term in token streams
    def sequences(self, docs: Iterable[int]) -> Iterator[tuple[int, array[int]]]: ...
    #                                               (doc, token stream as term ranks)
    def stream_lengths(self, docs: Sequence[int]) -> list[int]: ...  # tokens per stream,
    #                                               without reading the streams
    def spans(self, docs: Sequence[int], ranks: Sequence[int], sep: int) -> list[int | None]: ...
    #    per doc (increasing ids), the fewest consecutive tokens of its whole
    #    stream holding every rank with no `sep` among them (None: none)
    def sep_rank(self) -> int: ...
    def path_prefix(self, prefix: str) -> set[int]: ...  # docs whose key starts with prefix
    def key(self, doc: int) -> str: ...  # the document's project-relative path
    def lengths(self) -> Sequence[int]: ...  # weighted length per doc id
    def length_sum(self) -> int: ...  # over live docs
    def field_lengths(self) -> Sequence[Sequence[int]]: ...  # per FIELD_TERM field:
    #                                   raw token count per doc id
    def field_length_sums(self) -> Sequence[int]: ...  # the same summed over live docs
    def terms_with_prefix(self, prefix: str) -> list[str]: ...  # word terms, sorted


def path_matches(key: str, prefix: str) -> bool:
    return key.startswith(prefix)


def has_run(seq: array[int], ranks: Sequence[int]) -> bool:
    """True when `ranks` occur consecutively in `seq` (a phrase match).

    Works on the raw bytes with ``bytes.find`` (C speed); a hit must start on
    an item boundary, else the search resumes at the next boundary (not the
    next byte), so there are at most len(seq) finds however the bytes of
    the ranks overlap.
    """
    pattern = array(seq.typecode, ranks).tobytes()
    hay = seq.tobytes()
    size = seq.itemsize
    at = hay.find(pattern)
    while at >= 0:
        if at % size == 0:
            return True
        at = hay.find(pattern, at - at % size + size)
    return False


def positions(seq: array[int], rank: int) -> list[int]:
    """Indexes of `rank` in `seq`, found with ``bytes.find`` on item
    boundaries (as ``has_run``): O(occurrences) finds at C speed, not a
    Python step per token."""
    hay = seq.tobytes()
    pattern = array(seq.typecode, [rank]).tobytes()
    size = seq.itemsize
    out: list[int] = []
    at = hay.find(pattern)
    while at >= 0:
        if at % size == 0:
            out.append(at // size)
            at = hay.find(pattern, at + size)
        else:
            at = hay.find(pattern, at - at % size + size)
    return out


def field_docs(node: Field, part: Partition) -> set[int]:
    """The live documents holding `node.terms` consecutively in its field.
    The field terms say which documents hold each word there; for several
    words the field's stretch of the token stream must hold them in a row
    (the stream is title, SEP, each tag and SEP, description, SEP, body:
    ctindex/providers/okf_markdown.py `_fold`)."""
    head = FIELD_TERM[TEXT_FIELDS.index(node.field)]
    cands: set[int] | None = None
    for t in node.terms:
        docs = part.term_docs(head + t)
        cands = docs if cands is None else cands & docs
        if not cands:
            return set()
    if cands is None or len(node.terms) == 1:
        return cands or set()
    ranks = [part.rank(t) for t in node.terms]
    want = [r for r in ranks if r is not None]
    if len(want) < len(ranks):
        return set()
    sep = part.sep_rank()
    found: set[int] = set()
    for d, seq in part.sequences(sorted(cands)):
        seps = positions(seq, sep)
        lo, hi = (0, seps[0]) if node.field == "title" else (seps[-2] + 1, seps[-1])
        if has_run(seq[lo:hi], want):
            found.add(d)
    return found


def evaluate(node: Node, part: Partition) -> set[int]:
    """The live documents of `part` matching `node`."""
    if isinstance(node, Term):
        return part.term_docs(node.term)
    if isinstance(node, Field):
        return field_docs(node, part)
    if isinstance(node, Facet):
        return part.term_docs(node.term)
    if isinstance(node, Phrase):
        # Every word must be present: the rarest first, then each other word
        # narrows the candidates by looking them up (as a conjunction does).
        cands: set[int] | None = None
        for t in sorted(set(node.terms), key=part.df):
            cands = part.term_docs(t) if cands is None else part.term_docs_in(t, cands)
            if not cands:
                return set()
        ranks = [part.rank(t) for t in node.terms]
        if cands is None or any(r is None for r in ranks):
            return set()
        want = [r for r in ranks if r is not None]
        # A partition may scan its streams in bulk (segments); else one by one.
        bulk = getattr(part, "phrase_docs", None)
        if bulk is not None:
            found: set[int] = bulk(sorted(cands), want)
            return found
        return {d for d, seq in part.sequences(sorted(cands)) if has_run(seq, want)}
    if isinstance(node, IdWord):
        words: Node = Term(node.terms[0]) if len(node.terms) == 1 else Phrase(node.terms)
        return evaluate(words, part) | part.term_docs(EXACT_ID + " ".join(node.terms))
    if isinstance(node, Prefix):
        out: set[int] = set()
        for form in node.forms:
            out |= part.prefix_docs(form)
        return out
    if isinstance(node, PathPrefix):
        return part.path_prefix(node.prefix)
    if isinstance(node, Not):
        return part.universe() - evaluate(node.child, part)
    if isinstance(node, Or):
        out = set()
        for child in node.children:
            out |= evaluate(child, part)
        return out
    # And: positives narrow first, negations subtract; all-negative starts from everything.
    # Plain words come last, rarest first: each narrows the matches so far
    # by looking them up in its posting (tf_in), never reading it whole.
    plain = sorted(
        (c for c in node.children if isinstance(c, (Term, Facet))), key=lambda c: part.df(c.term)
    )
    result: set[int] | None = None
    for c in node.children:
        if isinstance(c, (Not, Term, Facet)):
            continue
        got = evaluate(c, part)
        result = got if result is None else result & got
        if not result:
            return set()
    for w in plain:
        result = part.term_docs(w.term) if result is None else part.term_docs_in(w.term, result)
        if not result:
            return set()
    if result is None:
        result = part.universe()
    for c in node.children:
        if isinstance(c, Not):
            result -= evaluate(c.child, part)
    return result


def scoring_terms(node: Node) -> list[str]:
    """Terms that contribute to the score: every word and phrase word of
    the query outside a negation. Filters do not score; prefixes score through
    their expansions (``prefix_clauses``)."""
    out: dict[str, None] = {}
    for n in _positive(node):
        if isinstance(n, Term):
            out[n.term] = None
        elif isinstance(n, (Phrase, IdWord, Field)):
            out.update(dict.fromkeys(n.terms))
    return list(out)


def prefix_clauses(node: Node) -> list[Prefix]:
    """Prefix clauses outside a negation."""
    return [n for n in _positive(node) if isinstance(n, Prefix)]


def _positive(node: Node) -> Iterator[Node]:
    if isinstance(node, (Or, And)):
        for c in node.children:
            yield from _positive(c)
    elif not isinstance(node, Not):
        yield node


def exact_sequences(node: Node) -> list[list[str]]:
    """The word sequences exact-match tiers compare with titles and IDs: a
    plain conjunction of words, phrases and ID-shaped words (filters and
    negations aside) gives its words in order; each alternative of an OR
    gives its own; a prefix gives itself as a word (``revenue*`` is exact for
    the title "Revenue"). A conjunction with an OR or a prefix among other
    words gives none: it asks for no single concept."""
    if isinstance(node, Or):
        return [seq for c in node.children for seq in exact_sequences(c)]
    if isinstance(node, Prefix):
        return [[f] for f in node.forms]
    clauses = [
        c for c in (node.children if isinstance(node, And) else (node,)) if not _is_filter(c)
    ]
    if len(clauses) == 1 and isinstance(clauses[0], (Or, Prefix)):
        return exact_sequences(clauses[0])
    seq: list[str] = []
    for c in clauses:
        if isinstance(c, Term):
            seq.append(c.term)
        elif isinstance(c, (Phrase, IdWord, Field)):
            seq.extend(c.terms)
        else:
            return []
    return [seq] if seq else []


def is_filter_only(node: Node) -> bool:
    """True when the query is made of filters and negations only (``type:X``,
    ``tag:x``, ``path:p/``, ``-word``, their ORs): nothing in it scores, so
    every match has score 0 and tier 0 and the order is the title's
    (ctindex/search/execute.py, docs/search.md "Filter-only queries")."""
    return all(isinstance(n, (Facet, PathPrefix)) for n in _positive(node))


def _is_filter(node: Node) -> bool:
    if isinstance(node, Or):
        return all(_is_filter(c) for c in node.children)
    return isinstance(node, (Facet, PathPrefix, Not))


class Hit(NamedTuple):
    part: int  # index of the partition
    doc: int
    score: float


class Ranking(NamedTuple):
    scores: list[MutableMapping[int, float]]  # per partition: every match -> score
    tiers: list[dict[int, int]]  # per partition: matches of a tier above 0
    notes: tuple[str, ...]  # e.g. a prefix's expansion cap was hit


def idf(n_docs: int, df: int) -> float:
    """Tantivy's BM25 idf: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


class _Stats(NamedTuple):
    n_docs: int
    avg: tuple[float, ...]  # average raw length per field of FIELDS


def _stats(parts: Sequence[Partition]) -> _Stats:
    n_docs = sum(p.size() for p in parts)
    sums = [sum(p.field_length_sums()[f] for p in parts) for f in range(len(FIELD_TERM))]
    weighted = sum(p.length_sum() for p in parts)
    body = weighted - WEIGHTS[0] * sums[0] - WEIGHTS[1] * sums[1] - WEIGHTS[2] * sums[2]
    n = max(n_docs, 1)
    return _Stats(n_docs, tuple(max(x / n, 1e-9) for x in (*sums, body)))


def _term_scores(
    term: str, parts: Sequence[Partition], docs: Sequence[set[int]], st: _Stats
) -> list[dict[int, float]]:
    """The score of one term for the given documents of each partition.
    Per field f, the length-normalised count n_f = tf_f / (1 - b_f + b_f
    len_f / avglen_f); then, by SATURATION, a saturation per field (idf *
    sum_f w_f n_f (k1 + 1) / (n_f + k1)) or one saturation of the weighted
    sum (BM25F: idf * x (k1 + 1) / (x + k1), x = sum_f w_f n_f).
    Statistics span all partitions."""
    w = idf(st.n_docs, sum(p.df(term) for p in parts))
    if SATURATION == "bm25f":
        return _bm25f_scores(term, parts, docs, st, [p.tf(term) for p in parts], w)
    out: list[dict[int, float]] = []
    for p, want in zip(parts, docs, strict=True):
        got: dict[int, float] = {}
        out.append(got)
        if want:
            _per_field_scores(got, term, p, want, st, w)
    return out


def _per_field_scores(
    got: dict[int, float],
    term: str,
    p: Partition,
    want: set[int],
    st: _Stats,
    w: float,
) -> None:
    """Per-field saturation: the fields add up independently, so each
    field's posting is walked on its own (no per-document lists); the
    body's count is the weighted total less the weighted field counts.
    Postings come with a filter rather than copied down to `want`
    (`Partition.tf_over`); the loops run in C when ctindex/search/_rank.c
    is built (`_kernels`)."""
    k1p = K1 + 1
    flens = p.field_lengths()
    field_scores, body_scores = _kernels(flens[0])
    field_tf: list[dict[int, int]] = []
    for f, head in enumerate(FIELD_TERM):
        posting, only = p.tf_over(head + term, want)
        field_tf.append(posting)
        a, bl, wf = 1 - FIELDS[f][2], FIELDS[f][2] / st.avg[f], w * PER_FIELD[f][1] * k1p
        if posting:
            field_scores(got, posting, only, flens[f], a, bl, wf, K1)
    a, bl, wf = 1 - FIELDS[4][2], FIELDS[4][2] / st.avg[4], w * PER_FIELD[4][1] * k1p
    main, only = p.tf_over(term, want)
    body_scores(
        got,
        main,
        only,
        (field_tf[0], field_tf[1], field_tf[2]),
        p.lengths(),
        (flens[0], flens[1], flens[2]),
        (WEIGHTS[0], WEIGHTS[1], WEIGHTS[2]),
        a,
        bl,
        wf,
        K1,
    )


def _field_scores_py(
    got: dict[int, float],
    posting: dict[int, int],
    only: set[int] | None,
    lens: Sequence[int],
    a: float,
    bl: float,
    wf: float,
    k1: float,
) -> None:
    """One field's share of a term's score (ctindex/search/_rank.c
    `field_scores` computes the same floats). Entries outside `only` (when
    not None) are skipped."""
    for d, t in posting.items():
        if only is not None and d not in only:
            continue
        n = t / (a + bl * lens[d])
        got[d] = got.get(d, 0.0) + wf * n / (n + k1)


def _body_scores_py(
    got: dict[int, float],
    main: dict[int, int],
    only: set[int] | None,
    fields: tuple[dict[int, int], dict[int, int], dict[int, int]],
    lengths: Sequence[int],
    flens: tuple[Sequence[int], Sequence[int], Sequence[int]],
    weights: tuple[int, int, int],
    a: float,
    bl: float,
    wf: float,
    k1: float,
) -> None:
    """The body's share: its count is the weighted total (`main`) less the
    weighted counts of title, tags and description (ctindex/search/_rank.c
    `body_scores` computes the same floats). Entries of `main` outside
    `only` (when not None) are skipped; the field postings may hold more
    documents than are scored."""
    title, tags, desc = fields
    f0, f1, f2 = flens
    w0, w1, w2 = weights
    for d, body in main.items():
        if only is not None and d not in only:
            continue
        if d in title or d in tags or d in desc:
            body -= w0 * title.get(d, 0) + w1 * tags.get(d, 0) + w2 * desc.get(d, 0)
            if body <= 0:
                continue
        body_len = lengths[d] - w0 * f0[d] - w1 * f1[d] - w2 * f2[d]
        n = body / (a + bl * max(body_len, 0))
        got[d] = got.get(d, 0.0) + wf * n / (n + k1)


def _add_into_py(scores: dict[int, float], got: dict[int, float]) -> None:
    for d, v in got.items():
        scores[d] += v


def _max_into_py(best: dict[int, float], got: dict[int, float]) -> None:
    for d, v in got.items():
        if v > best.get(d, 0.0):
            best[d] = v


def _kernels(lens: Sequence[int]) -> tuple[native_rank.FieldScores, native_rank.BodyScores]:
    """(field_scores, body_scores): the C ones when built and the lengths
    are arrays of u32 (a segment's; --direct's too), else the pure ones."""
    native = native_rank.module()
    if native is not None and isinstance(lens, array) and lens.typecode == "I":
        return native.field_scores, native.body_scores
    return _field_scores_py, _body_scores_py


def _add_into(scores: dict[int, float], got: dict[int, float]) -> None:
    native = native_rank.module()
    (native.add_into if native is not None else _add_into_py)(scores, got)


def _max_into(best: dict[int, float], got: dict[int, float]) -> None:
    native = native_rank.module()
    (native.max_into if native is not None else _max_into_py)(best, got)


class ArrayPartition(Partition, Protocol):
    """A partition that can hand a term's posting as arrays (a segment's:
    doc ids and weighted tfs, tombstoned documents included)."""

    def posting_arrays(self, term: str) -> tuple[array[int], array[int]] | None: ...


# The dense scores serve a query matching at least one document in this many.
DENSE_SHARE = 16
# A term's main posting where a segment has none (its ids, its counts).
_NO_POSTING: tuple[array[int], array[int]] = (array("I"), array("I"))


def _array_parts(
    parts: Sequence[Partition],
) -> tuple[native_rank.RankModule, list[ArrayPartition]] | None:
    """The C module and the partitions as arrays, when the array kernels
    apply: built, per-field saturation, and every partition a segment's
    (--direct's keeps the dict loops)."""
    native = native_rank.module()
    if native is None or SATURATION != "perfield":
        return None
    arrays: list[ArrayPartition] = []
    for p in parts:
        lens = p.lengths()
        if not hasattr(p, "posting_arrays") or not isinstance(lens, array):
            return None
        if lens.typecode != "I":
            return None
        arrays.append(cast("ArrayPartition", p))
    return native, arrays


_Params = tuple[float, float, float]  # a field's (a, bl, wf) as _per_field_scores has them


def _term_params(
    term: str, parts: Sequence[Partition], st: _Stats
) -> tuple[tuple[_Params, ...], _Params]:
    """The four fields' and the body's (a, bl, wf) for `term`, the same
    floats `_per_field_scores` computes."""
    w = idf(st.n_docs, sum(p.df(term) for p in parts))
    k1p = K1 + 1
    fparams = tuple(
        (1 - FIELDS[f][2], FIELDS[f][2] / st.avg[f], w * PER_FIELD[f][1] * k1p)
        for f in range(len(FIELD_TERM))
    )
    return fparams, (1 - FIELDS[4][2], FIELDS[4][2] / st.avg[4], w * PER_FIELD[4][1] * k1p)


_Posting: TypeAlias = "tuple[array[int], array[int]]"  # a segment's (doc ids, counts)


def _term_postings(
    p: ArrayPartition, term: str
) -> tuple[_Posting, tuple[_Posting | None, ...]] | None:
    """(main, fields) posting arrays of `term`, None when it has none. The
    concept ID's terms are not in the main posting
    (ctindex/providers/fields.py), so a document matched by another clause
    still gets its ID share, as in the dict loops (`_per_field_scores`),
    from an empty main posting."""
    fields = tuple(p.posting_arrays(head + term) for head in FIELD_TERM)
    main = p.posting_arrays(term)
    if main is None:
        if all(f is None for f in fields):
            return None
        main = _NO_POSTING
    return main, fields


_Into = TypeVar("_Into")
_Which = TypeVar("_Which")
# _rank.c's score_term or score_docs: (into, which documents, main posting,
# field postings, lengths, field lengths, field params, body params,
# weights, k1, add).
_TermKernel: TypeAlias = Callable[
    [
        _Into,
        _Which,
        _Posting,
        "tuple[_Posting | None, ...]",
        Sequence[int],
        tuple[Sequence[int], ...],
        tuple[_Params, ...],
        _Params,
        tuple[int, int, int],
        float,
        bool,
    ],
    None,
]


def _score_with(
    kernel: _TermKernel[_Into, _Which],
    term: str,
    parts: Sequence[ArrayPartition],
    into: Sequence[_Into],
    which: Sequence[_Which | None],
    st: _Stats,
    add: bool,
) -> None:
    """`term`'s score of `which` documents of each partition (None or empty:
    none), added into (`add`) or, where higher, put in `into` by `kernel`."""
    fparams, body = _term_params(term, parts, st)
    for p, target, docs in zip(parts, into, which, strict=True):
        postings = _term_postings(p, term) if docs else None
        if not docs or postings is None:
            continue
        main, fields = postings
        kernel(
            target,
            docs,
            main,
            fields,
            p.lengths(),
            tuple(p.field_lengths()),
            fparams,
            body,
            (WEIGHTS[0], WEIGHTS[1], WEIGHTS[2]),
            K1,
            add,
        )


class _Dense:
    """The per-field scores of every match kept as one float per document
    of each partition, computed by ctindex/search/_rank.c `score_term` over
    the postings' arrays: no dict per term or per prefix expansion. The
    operations and their order are the dict loops' (`_term_scores`, then
    `_add_into` or `_max_into`), so the floats are the same. Where the
    array kernels apply (`_array_parts`; else the dict loops), `of` gives
    None for a query matching a sliver of the documents: `_Sparse`'s."""

    def __init__(
        self,
        native: native_rank.RankModule,
        parts: list[ArrayPartition],
        matched: Sequence[set[int]],
    ) -> None:
        self.native = native
        self.parts = parts
        self.matched = matched
        self.sizes = [len(p.lengths()) for p in parts]
        self.accs = [self.zeros(n) for n in self.sizes]
        self.masks = self.masks_of(matched)

    @classmethod
    def of(
        cls,
        native: native_rank.RankModule,
        arrays: list[ArrayPartition],
        matched: Sequence[set[int]],
    ) -> _Dense | None:
        # One float and one mask byte per document of each segment: worth
        # it when the matches are not a sliver of the documents, so a
        # query's cost stays bounded by its matches, not the index's size.
        if sum(map(len, matched)) * DENSE_SHARE < sum(len(p.lengths()) for p in arrays):
            return None
        return cls(native, arrays, matched)

    @staticmethod
    def zeros(n: int) -> array[float]:
        return array("d", bytes(8 * n))

    def masks_of(self, docs: Sequence[set[int]]) -> list[bytearray | None]:
        return [
            self.native.mask(n, d) if d else None for n, d in zip(self.sizes, docs, strict=True)
        ]

    def add(self, term: str, st: _Stats) -> None:
        """`term`'s score of each match, added."""
        self.score(term, self.accs, self.masks, st, add=True)

    def score(
        self,
        term: str,
        into: Sequence[array[float]],
        masks: Sequence[bytearray | None],
        st: _Stats,
        add: bool,
    ) -> None:
        """`term`'s score of each masked document added to (`add`) or, where
        higher, put in (else) `into`."""
        _score_with(self.native.score_term, term, self.parts, into, masks, st, add)

    def best_of(self, terms: Sequence[str], inside: Sequence[set[int]], st: _Stats) -> None:
        """A prefix: the best of its expansions' scores per document, added."""
        best = [self.zeros(n) for n in self.sizes]
        masks = self.masks_of(inside)
        for t in terms:
            self.score(t, best, masks, st, add=False)
        for acc, b in zip(self.accs, best, strict=True):
            self.native.add_arrays(acc, b)

    def results(self) -> list[MutableMapping[int, float]]:
        """Each partition's scores, kept in the arrays."""
        return [
            DenseScores(acc, mask, m)
            for acc, mask, m in zip(self.accs, self.masks, self.matched, strict=True)
        ]


class DenseScores(MutableMapping[int, float]):
    """One partition's scores as `_Dense` leaves them: acc[d] for each match
    d (mask[d] set), never copied into a dict. A query matching thousands
    of documents needs a handful of them by key (the leaders, the
    proximity pool); gathering them all into a dict cost a float object
    and an insertion each, more than scoring them. `leaders` hands the
    arrays themselves to ctindex/search/_rank.c (`kernel_scores`). Only
    matches are keys; a score is set (the proximity bonus), never removed."""

    __slots__ = ("acc", "docs", "mask")

    def __init__(self, acc: array[float], mask: bytearray | None, docs: set[int]) -> None:
        self.acc, self.mask, self.docs = acc, mask, docs

    def __getitem__(self, d: int) -> float:
        if d not in self.docs:
            raise KeyError(d)
        return self.acc[d]

    def __setitem__(self, d: int, value: float) -> None:
        if d not in self.docs:
            raise KeyError(d)
        self.acc[d] = value

    def __delitem__(self, d: int) -> None:
        raise TypeError("a match's score is never removed")

    def __iter__(self) -> Iterator[int]:
        return iter(self.docs)

    def __len__(self) -> int:
        return len(self.docs)

    def __contains__(self, d: object) -> bool:
        return d in self.docs

    def kernel_scores(self, tier: dict[int, int]) -> KernelScores:
        """The scores as _rank.c's `kth_largest` and `at_least` read them,
        with each tiered match's tier added as `leaders` adds it (to a copy)."""
        if self.mask is None:
            return {}
        acc = self.acc
        if tier:
            acc = array("d", acc)
            for d, t in tier.items():
                acc[d] += _TIER_SCALE * t
        return acc, self.mask


class _Sparse:
    """The per-field scores of a query matching a sliver of the documents,
    one dict per partition as the dict loops keep them, computed by
    ctindex/search/_rank.c `score_docs`: each match's counts are looked up
    in the term's five postings' arrays in one call per term and segment,
    where the dict loops make ten calls, a dict or two per field, and a
    dict per term. The operations and their order are the dict loops', so
    the floats are the same."""

    def __init__(
        self,
        native: native_rank.RankModule,
        parts: list[ArrayPartition],
        matched: Sequence[set[int]],
    ) -> None:
        self.native = native
        self.parts = parts
        self.matched = matched
        self.scores = [dict.fromkeys(m, 0.0) for m in matched]

    def add(self, term: str, st: _Stats) -> None:
        """`term`'s score of each match, added."""
        self.score(term, self.scores, self.matched, st, add=True)

    def score(
        self,
        term: str,
        into: Sequence[dict[int, float]],
        docs: Sequence[set[int]],
        st: _Stats,
        add: bool,
    ) -> None:
        """`term`'s score of each of `docs` added to (`add`) or, where
        higher, put in (else) `into`."""
        _score_with(self.native.score_docs, term, self.parts, into, docs, st, add)

    def best_of(self, terms: Sequence[str], inside: Sequence[set[int]], st: _Stats) -> None:
        """A prefix: the best of its expansions' scores per document, added."""
        best: list[dict[int, float]] = [{} for _ in self.parts]
        for t in terms:
            self.score(t, best, inside, st, add=False)
        for sc, b in zip(self.scores, best, strict=True):
            self.native.add_into(sc, b)

    def results(self) -> list[MutableMapping[int, float]]:
        """Each partition's scores."""
        return list(self.scores)


def _bm25f_scores(
    term: str,
    parts: Sequence[Partition],
    docs: Sequence[set[int]],
    st: _Stats,
    mains: list[dict[int, int]],
    w: float,
) -> list[dict[int, float]]:
    """One saturation of the weighted sum (the --saturation experiment)."""
    ws = [f[1] for f in FIELDS]
    a = [1 - FIELDS[f][2] for f in range(5)]
    bl = [FIELDS[f][2] / st.avg[f] for f in range(5)]
    k1p = K1 + 1
    out: list[dict[int, float]] = []
    for p, main, want in zip(parts, mains, docs, strict=True):
        got: dict[int, float] = {}
        out.append(got)
        if not want:
            continue
        fields = [p.tf(head + term) for head in FIELD_TERM]
        flens = p.field_lengths()
        lengths = p.lengths()
        touched = want.intersection(main)
        for posting in fields:
            touched.update(want.intersection(posting))
        for d in touched:
            tf = [f.get(d, 0) for f in fields]
            fl = [flens[f][d] for f in range(4)]
            body = main.get(d, 0) - WEIGHTS[0] * tf[0] - WEIGHTS[1] * tf[1] - WEIGHTS[2] * tf[2]
            body_len = lengths[d] - WEIGHTS[0] * fl[0] - WEIGHTS[1] * fl[1] - WEIGHTS[2] * fl[2]
            x = 0.0
            for f in range(4):
                if tf[f]:
                    x += ws[f] * tf[f] / (a[f] + bl[f] * fl[f])
            if body > 0:
                x += ws[4] * body / (a[4] + bl[4] * max(body_len, 0))
            got[d] = w * x * k1p / (x + K1)
    return out


# Proximity (docs/search.md, "Proximity"; measured in docs/decisions/ranking.md):
# a match holding every scoring word of the query inside one field gets
# PROXIMITY_WEIGHT * k * k / span on top of its score, span being the
# shortest run of tokens holding all k words (k / span = 1 when they stand
# together). The extra k makes the bonus grow with the query as the sum of
# per-word scores does, so a six-word sentence standing together is worth
# more than a pair. Only the first PROXIMITY_POOL matches by (tier, score,
# path) are read: the bonus only raises, so they stay above every other
# match, and the work is at most that many token streams whatever the query
# matches. 0 turns it off. 3.0: with per-field saturation, the sentence
# queries of bench/relevance.py need it to stay where the old ranking had
# them; partial titles stay at Tantivy's from 0 up to 4 (docs/decisions/ranking.md).
PROXIMITY_WEIGHT = 3.0
PROXIMITY_POOL = 100


# A long token stream is not walked whole for proximity: only PROXIMITY_REACH
# tokens either side of the first PROXIMITY_ANCHORS occurrences of the query's
# rarest word (every run holding all the words holds
# one of its occurrences; the rarest by document frequency over the whole
# index, so every partition picks the same). Runs longer than the reach may go unseen there;
# their bonus would be small. Work per document is bounded by
# PROXIMITY_ANCHORS * 2 * PROXIMITY_REACH tokens plus C-speed counts.
PROXIMITY_LONG = 4096
PROXIMITY_ANCHORS = 64
PROXIMITY_REACH = 32
# (An anchor's occurrences are found in place by ctindex/search/_rank.c, or
# with ``bytes.find`` on item boundaries: C speed, not a Python step per token.)


def min_span(seq: array[int], ranks: Sequence[int], sep: int) -> int | None:
    """The length of the shortest run of `seq` inside one field (no `sep`)
    holding every one of `ranks` (distinct); None when no field holds them
    all. A stream longer than PROXIMITY_LONG is first narrowed to the
    windows around its anchors (`_narrow`)."""
    return _min_span(seq, list(ranks), sep, _span_kernel())


# `min_span` on a stream already narrowed: ctindex/search/_rank.c's or
# ctindex/search/native_rank.py `min_span_py`.
SpanKernel: TypeAlias = "Callable[[array[int], list[int], int], int | None]"


def _span_kernel() -> SpanKernel:
    native = native_rank.module()
    return native.min_span if native is not None else native_rank.min_span_py


def _min_span(seq: array[int], ranks: list[int], sep: int, kernel: SpanKernel) -> int | None:
    """`min_span` with its kernel chosen by the caller (once per query, not
    once per document)."""
    if len(seq) > PROXIMITY_LONG:
        narrowed = _narrow(seq, ranks, sep)
        if narrowed is None:
            return None
        seq = narrowed
    return kernel(seq, ranks, sep)


def _narrow(seq: array[int], ranks: Sequence[int], sep: int) -> array[int] | None:
    """The windows of a long stream around the first occurrences of its
    anchor, `ranks[0]` (the caller puts the query's rarest word first),
    joined by `sep` so no run crosses from one to the next; None when the
    anchor is absent."""
    # C when built (a build older than it, not rebuilt since, finds them here).
    find: Callable[[array[int], int, int], list[int]] = getattr(
        native_rank.module(), "anchor_positions", _anchor_positions_py
    )
    found = find(seq, ranks[0], PROXIMITY_ANCHORS)
    spans: list[list[int]] = []
    for pos in found:
        lo, hi = max(pos - PROXIMITY_REACH, 0), pos + PROXIMITY_REACH + 1
        if spans and lo <= spans[-1][1]:
            spans[-1][1] = hi
        else:
            spans.append([lo, hi])
    if not spans:
        return None
    out = array(seq.typecode)
    for lo, hi in spans:
        out.extend(seq[lo:hi])
        out.append(sep)
    return out


def _anchor_positions_py(seq: array[int], anchor: int, limit: int) -> list[int]:
    """The first `limit` positions of `anchor` in `seq` (ctindex/search/_rank.c
    `anchor_positions` answers the same without copying the stream)."""
    hay = seq.tobytes()
    pattern = array(seq.typecode, [anchor]).tobytes()
    size = seq.itemsize
    found: list[int] = []
    at = hay.find(pattern)
    while at >= 0 and len(found) < limit:
        if at % size:  # not on an item boundary: resume at the next one
            at = hay.find(pattern, at - at % size + size)
            continue
        found.append(at // size)
        at = hay.find(pattern, at + size)
    return found


# Tiers above scores in one float (a score stays far below it), so the best
# few matches can be found from plain floats before their paths are read.
_TIER_SCALE = 1e9


def leaders(
    scores: Sequence[MutableMapping[int, float]],
    tiers: Sequence[dict[int, int]],
    count: int,
    margin: float = 0.0,
) -> list[list[int]]:
    """Per partition, the matches that can be among the first `count` by
    (tier, score, anything else): those whose tier and score reach the
    count-th best's, less `margin` on the score (a caller that compares
    scores rounded to 4 decimals passes 1e-4: rounding moves a score by at
    most half that each way). Every such match is returned, ties included,
    so the caller's full order over them picks exactly the first `count`;
    no path is read for the rest (the cost is one float per match)."""
    total = sum(map(len, scores))
    if total <= count:
        return [list(sc) for sc in scores]
    # Tier and score in one float per match; only the (few) tiered matches
    # are touched one by one, the rest are copied at C speed.
    merged = [_tiered(sc, tier) for sc, tier in zip(scores, tiers, strict=True)]
    native = native_rank.module()
    if native is not None:  # a selection in C, the same float
        bar = native.kth_largest(merged, count) - margin - 1e-9
        return [native.at_least(sc, bar) for sc in merged]
    pairs = [list(_kernel_items(sc)) for sc in merged]
    bar = heapq.nlargest(count, [v for sc in pairs for _, v in sc])[-1] - margin - 1e-9
    return [[d for d, v in sc if v >= bar] for sc in pairs]


# One partition's scores as ctindex/search/_rank.c `kth_largest` and
# `at_least` take them: a dict, or DenseScores' arrays (scores, matches).
KernelScores: TypeAlias = "dict[int, float] | tuple[array[float], bytearray]"


def _kernel_items(sc: KernelScores) -> Iterable[tuple[int, float]]:
    """(match, score) of KernelScores, as the C functions read them."""
    if isinstance(sc, dict):
        return sc.items()
    acc, mask = sc
    return ((d, acc[d]) for d in compress(range(len(mask)), mask))


def _tiered(sc: MutableMapping[int, float], tier: dict[int, int]) -> KernelScores:
    """`sc` with each tiered match's tier added above its score."""
    if isinstance(sc, DenseScores):
        return sc.kernel_scores(tier)
    out = sc if isinstance(sc, dict) and not tier else dict(sc)
    for d, t in tier.items():
        out[d] += _TIER_SCALE * t
    return out


def _proximity(
    node: Node,
    parts: Sequence[Partition],
    scores: Sequence[MutableMapping[int, float]],
    tiers: list[dict[int, int]],
) -> None:
    terms = scoring_terms(node)
    if PROXIMITY_WEIGHT <= 0 or len(terms) < 2:
        return
    # Rarest first: min_span anchors a long stream on ranks[0].
    terms.sort(key=lambda t: sum(p.df(t) for p in parts))
    ranks = [[p.rank(t) for t in terms] for p in parts]
    # A total key over all partitions, so the index and --direct pick the same pool.
    eligible = [sc if all(r is not None for r in ranks[i]) else {} for i, sc in enumerate(scores)]
    leading = leaders(eligible, tiers, PROXIMITY_POOL)
    by_part: list[list[int]] = leading
    if sum(map(len, leading)) > PROXIMITY_POOL:  # else every one of them is in the pool
        by_part = [[] for _ in parts]
        pool = heapq.nsmallest(
            PROXIMITY_POOL,
            (
                (-tiers[i].get(d, 0), -eligible[i][d], p.key(d), i, d)
                for i, (p, docs) in enumerate(zip(parts, leading, strict=True))
                for d in docs
            ),
        )
        for *_, i, d in pool:
            by_part[i].append(d)
    kernel = _span_kernel()
    for i, (p, sc) in enumerate(zip(parts, scores, strict=True)):
        want = [r for r in ranks[i] if r is not None]
        sep = p.sep_rank()
        docs = sorted(by_part[i])
        if not docs:
            continue
        lens = p.stream_lengths(docs)
        short = [d for d, n in zip(docs, lens, strict=True) if n <= PROXIMITY_LONG]
        # Streams short enough to be searched whole: all in one call per
        # partition, unless a phrase's span is known without reading them.
        known = _phrase_span(node, p, want)
        spans = [known] * len(short) if known is not None else p.spans(short, want, sep)
        for d, span in zip(short, spans, strict=True):
            if span is not None:
                sc[d] += PROXIMITY_WEIGHT * len(want) ** 2 / span
        # A longer one is narrowed around its anchor first.
        longer = [d for d, n in zip(docs, lens, strict=True) if n > PROXIMITY_LONG]
        for d, seq in p.sequences(longer):
            span = _min_span(seq, want, sep, kernel)
            if span is not None:
                sc[d] += PROXIMITY_WEIGHT * len(want) ** 2 / span


def _phrase_span(node: Node, part: Partition, want: list[int]) -> int | None:
    """The span `min_span` finds in every match of `node` whose stream is
    searched whole, when it is known without reading it: `node` is a phrase
    whose own words hold every one of `want` (its distinct words) in a run
    of len(want) tokens. Every match holds the phrase inside one field, so
    it has such a run, and no run of fewer tokens holds len(want) distinct
    words. (In `"a b b c"` the shortest run is the phrase itself, 4 tokens,
    but a match may also hold `a b c` elsewhere: None, its streams are read.)"""
    if not isinstance(node, Phrase) or not want:
        return None
    ranks = [part.rank(t) for t in node.terms]
    words = array("q", [r for r in ranks if r is not None])
    if len(words) < len(ranks):
        return None
    return len(want) if native_rank.min_span_py(words, want, part.sep_rank()) == len(want) else None


def _closest(found: set[str]) -> list[str]:
    """The first PREFIX_CAP of `found` by length, then in term order. Ordered
    by length alone first (a C-level key, no tuple per term), then only the
    terms as short as the cut's are put in term order: a short prefix has
    thousands of expansions, and comparing them all as strings cost more
    than scoring the fifty kept."""
    by_length = sorted(found, key=len)
    if len(by_length) > PREFIX_CAP:
        cut = len(by_length[PREFIX_CAP - 1])
        end = PREFIX_CAP
        while end < len(by_length) and len(by_length[end]) == cut:
            end += 1
        by_length = by_length[:end]
    closest = sorted(by_length)
    closest.sort(key=len)
    return closest[:PREFIX_CAP]


def search(node: Node, parts: Sequence[Partition]) -> Ranking:
    """Score and tier of every match, per partition, with statistics
    summed over all partitions (so the index and --direct agree exactly)."""
    matched = [evaluate(node, p) for p in parts]
    tiers: list[dict[int, int]] = [{} for _ in parts]
    if not any(matched):
        return Ranking([{} for _ in parts], tiers, ())
    st = _stats(parts)
    kernels = _array_parts(parts)
    arrays: _Dense | _Sparse | None = (
        None if kernels is None else _Dense.of(*kernels, matched) or _Sparse(*kernels, matched)
    )
    # The dict loops add into a dict per partition; the array kernels keep
    # their own (`results`).
    sums: list[dict[int, float]] = (
        [] if arrays is not None else [dict.fromkeys(m, 0.0) for m in matched]
    )
    for t in scoring_terms(node):
        if arrays is not None:
            arrays.add(t, st)
            continue
        for sc, got in zip(sums, _term_scores(t, parts, matched, st), strict=True):
            _add_into(sc, got)
    notes: list[str] = []
    for clause in prefix_clauses(node):
        inside = [evaluate(clause, p) & m for p, m in zip(parts, matched, strict=True)]
        found: set[str] = set()
        for p in parts:
            for form in clause.forms:
                found.update(p.terms_with_prefix(form))
        expansions = _closest(found)
        if len(found) > PREFIX_CAP:
            notes.append(
                f"prefix {clause.forms[0]}* has {len(found)} expansions: the "
                f"{PREFIX_CAP} closest score, all of them match"
            )
        if arrays is not None:
            arrays.best_of(expansions, inside, st)
            continue
        best: list[dict[int, float]] = [{} for _ in parts]
        for t in expansions:
            for b, got in zip(best, _term_scores(t, parts, inside, st), strict=True):
                _max_into(b, got)
        for sc, b in zip(sums, best, strict=True):
            _add_into(sc, b)
    scores: list[MutableMapping[int, float]] = (
        arrays.results() if arrays is not None else list(sums)
    )
    keys: list[tuple[str, int]] = []
    for seq in exact_sequences(node):
        joined = " ".join(seq)
        keys += [
            (EXACT_TITLE + joined, TIER_EXACT),
            (EXACT_ID + joined, TIER_EXACT),
            (EXACT_LAST + joined, TIER_EXACT),
            (EXACT_TITLE_SET + " ".join(sorted(set(seq))), TIER_NEAR),
        ]
    for p, m, tier in zip(parts, matched, tiers, strict=True):
        for key, level in keys:
            for d in m.intersection(p.tf(key)):
                if level > tier.get(d, 0):
                    tier[d] = level
    _proximity(node, parts, scores, tiers)
    return Ranking(scores, tiers, tuple(notes))
