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
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

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

# BM25F (docs/search.md, "Ranking"): per field (weight, b), in the order
# title, tags, description, concept ID, body. Short identifying fields get a
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
    def prefix_docs(self, prefix: str) -> set[int]: ...  # live docs with a word term
    #                                                        starting with prefix
    def rank(self, term: str) -> int | None: ...  # id of a term in token streams
    def sequences(self, docs: Iterable[int]) -> Iterator[tuple[int, array[Any]]]: ...
    #                                               (doc, token stream as term ranks)
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


def has_run(seq: array[Any], ranks: Sequence[int]) -> bool:
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


def field_docs(node: Field, part: Partition) -> set[int]:
    """The live documents holding `node.terms` consecutively in its field.
    The field terms say which documents hold each word there; for several
    words the field's stretch of the token stream must hold them in a row
    (the stream is title, SEP, each tag and SEP, description, SEP, body:
    ctindex/providers/okf_markdown.py `_fold`)."""
    head = FIELD_TERM[TEXT_FIELDS.index(node.field)]
    cands: set[int] | None = None
    for t in node.terms:
        docs = set(part.tf(head + t))
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
        return set(part.tf(node.term))
    if isinstance(node, Field):
        return field_docs(node, part)
    if isinstance(node, Facet):
        return set(part.tf(node.term))
    if isinstance(node, Phrase):
        cands: set[int] | None = None
        for t in node.terms:
            docs = set(part.tf(t))
            cands = docs if cands is None else cands & docs
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
        return evaluate(words, part) | set(part.tf(EXACT_ID + " ".join(node.terms)))
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
    result: set[int] | None = None
    for c in node.children:
        if isinstance(c, Not):
            continue
        got = evaluate(c, part)
        result = got if result is None else result & got
        if not result:
            return set()
    if result is None:
        result = part.universe()
    for c in node.children:
        if isinstance(c, Not):
            result -= evaluate(c.child, part)
    return result


def scoring_terms(node: Node) -> list[str]:
    """Terms that contribute BM25F to the score: every word and phrase word of
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
    scores: list[dict[int, float]]  # per partition: every match -> BM25F score
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
    """BM25F of one term for the given documents of each partition:
    tf~ = sum_f w_f tf_f / (1 - b_f + b_f len_f / avglen_f), then
    idf * tf~ (k1 + 1) / (tf~ + k1). Statistics span all partitions."""
    mains = [p.tf(term) for p in parts]
    w = idf(st.n_docs, sum(map(len, mains)))
    # Field order of FIELD_TERM is title, tags, description, ID; FIELDS adds body.
    ws = [FIELDS[f][1] for f in range(4)]
    a = [1 - FIELDS[f][2] for f in range(5)]
    bl = [FIELDS[f][2] / st.avg[f] for f in range(5)]
    wb = FIELDS[4][1]
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
                x += wb * body / (a[4] + bl[4] * max(body_len, 0))
            got[d] = w * x * k1p / (x + K1)
    return out


# Proximity (docs/search.md, "Proximity"; measured in docs/benchmarks.md):
# a match holding every scoring word of the query inside one field gets
# PROXIMITY_WEIGHT * k / span on top of its BM25F, span being the shortest
# run of tokens holding all k words (k / span = 1 when they stand together).
# Only the first PROXIMITY_POOL matches by (tier, BM25F, path) are read: the
# bonus only raises, so they stay above every other match, and the work is
# at most that many token streams whatever the query matches. 0 turns it off.
# 2.0, about half of what one well-matched word scores: the passage queries
# of bench/relevance.py improve with every weight tried (0.5 to 8), since
# their words stand together by construction, so the weight is not tuned to
# their maximum; it reorders close BM25F calls without overriding a clearly
# better match.
PROXIMITY_WEIGHT = 2.0
PROXIMITY_POOL = 100


def positions(seq: array[Any], rank: int) -> list[int]:
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


def min_span(seq: array[Any], ranks: Sequence[int], sep: int) -> int | None:
    """The length of the shortest run of `seq` inside one field (no `sep`)
    holding every one of `ranks` (distinct); None when no field holds them
    all. Walks the occurrences of the ranks only, O(occurrences * k)."""
    k = len(ranks)
    events = [(pos, -1) for pos in positions(seq, sep)]
    for i, r in enumerate(ranks):
        found = positions(seq, r)
        if not found:
            return None
        events += [(pos, i) for pos in found]
    events.sort()
    last = [-1] * k
    seen = 0
    best: int | None = None
    for pos, i in events:
        if i < 0:  # a field boundary: a run never spans it
            last = [-1] * k
            seen = 0
            continue
        if last[i] < 0:
            seen += 1
        last[i] = pos
        if seen == k:
            span = pos - min(last) + 1
            if best is None or span < best:
                best = span
    return best


def _proximity(
    node: Node,
    parts: Sequence[Partition],
    scores: list[dict[int, float]],
    tiers: list[dict[int, int]],
) -> None:
    terms = scoring_terms(node)
    if PROXIMITY_WEIGHT <= 0 or len(terms) < 2:
        return
    ranks = [[p.rank(t) for t in terms] for p in parts]
    # A total key over all partitions, so the index and --direct pick the same pool.
    pool = heapq.nsmallest(
        PROXIMITY_POOL,
        (
            (-tiers[i].get(d, 0), -s, p.key(d), i, d)
            for i, (p, sc) in enumerate(zip(parts, scores, strict=True))
            if all(r is not None for r in ranks[i])
            for d, s in sc.items()
        ),
    )
    by_part: list[list[int]] = [[] for _ in parts]
    for *_, i, d in pool:
        by_part[i].append(d)
    for i, (p, sc) in enumerate(zip(parts, scores, strict=True)):
        want = [r for r in ranks[i] if r is not None]
        sep = p.sep_rank()
        for d, seq in p.sequences(sorted(by_part[i])):
            span = min_span(seq, want, sep)
            if span is not None:
                sc[d] += PROXIMITY_WEIGHT * len(want) / span


def search(node: Node, parts: Sequence[Partition]) -> Ranking:
    """BM25F score and tier of every match, per partition, with statistics
    summed over all partitions (so the index and --direct agree exactly)."""
    matched = [evaluate(node, p) for p in parts]
    scores: list[dict[int, float]] = [dict.fromkeys(m, 0.0) for m in matched]
    tiers: list[dict[int, int]] = [{} for _ in parts]
    if not any(matched):
        return Ranking(scores, tiers, ())
    st = _stats(parts)
    for t in scoring_terms(node):
        for sc, got in zip(scores, _term_scores(t, parts, matched, st), strict=True):
            for d, v in got.items():
                sc[d] += v
    notes: list[str] = []
    for clause in prefix_clauses(node):
        inside = [evaluate(clause, p) & m for p, m in zip(parts, matched, strict=True)]
        found: set[str] = set()
        for p in parts:
            for form in clause.forms:
                found.update(p.terms_with_prefix(form))
        expansions = sorted(found, key=lambda t: (len(t), t))
        if len(expansions) > PREFIX_CAP:
            notes.append(
                f"prefix {clause.forms[0]}* has {len(expansions)} expansions: the "
                f"{PREFIX_CAP} closest score, all of them match"
            )
            expansions = expansions[:PREFIX_CAP]
        best: list[dict[int, float]] = [{} for _ in parts]
        for t in expansions:
            for b, got in zip(best, _term_scores(t, parts, inside, st), strict=True):
                for d, v in got.items():
                    if v > b.get(d, 0.0):
                        b[d] = v
        for sc, b in zip(scores, best, strict=True):
            for d, v in b.items():
                sc[d] += v
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
