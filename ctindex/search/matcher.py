"""Query semantics, once: evaluation and BM25 over any ``Partition``.

The index (one partition per segment) and the ``--direct`` oracle (one
partition built in memory from freshly parsed files) implement the same small
``Partition`` interface; everything that decides *which* documents match and
how they score lives here, so the two paths can not drift apart.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

from ctindex.search.query import And, Facet, Node, Not, Or, PathPrefix, Phrase, Prefix, Term

K1 = 1.2
B = 0.75
PREFIX_SCORE = 1.0


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
    def lengths(self) -> Sequence[int]: ...  # weighted length per doc id
    def length_sum(self) -> int: ...  # over live docs


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


def evaluate(node: Node, part: Partition) -> set[int]:
    """The live documents of `part` matching `node`."""
    if isinstance(node, Term):
        return set(part.tf(node.term))
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
    """Terms that contribute BM25 to the score: every word and phrase word of
    the query outside a negation. Filters do not score; prefixes score a
    constant (``prefix_clauses``)."""
    out: dict[str, None] = {}
    for n in _positive(node):
        if isinstance(n, Term):
            out[n.term] = None
        elif isinstance(n, Phrase):
            out.update(dict.fromkeys(n.terms))
    return list(out)


def prefix_clauses(node: Node) -> list[Prefix]:
    """Prefix clauses outside a negation. Like Lucene's constant-score rewrite
    of multi-term queries, a prefix adds PREFIX_SCORE to each document it
    matches instead of BM25 over its (possibly thousands of) expansions."""
    return [n for n in _positive(node) if isinstance(n, Prefix)]


def _positive(node: Node) -> Iterator[Node]:
    if isinstance(node, (Or, And)):
        for c in node.children:
            yield from _positive(c)
    elif not isinstance(node, Not):
        yield node


class Hit(NamedTuple):
    part: int  # index of the partition
    doc: int
    score: float


def idf(n_docs: int, df: int) -> float:
    """Tantivy's BM25 idf: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def search(node: Node, parts: Sequence[Partition]) -> list[dict[int, float]]:
    """BM25 score of every match, per partition (doc -> score), with
    statistics summed over all partitions."""
    matched = [evaluate(node, p) for p in parts]
    if not any(matched):
        return [{} for _ in parts]
    n_docs = sum(p.size() for p in parts)
    avgdl = max(sum(p.length_sum() for p in parts) / max(n_docs, 1), 1e-9)
    terms = scoring_terms(node)
    prefixes = prefix_clauses(node)
    tfs = [[p.tf(t) for t in terms] for p in parts]
    weights = [idf(n_docs, sum(len(tfs[i][j]) for i in range(len(parts))))
               for j in range(len(terms))]
    # Term at a time over each partition's matches; norm = k1 (1 - b + b dl / avgdl).
    norm_a, norm_b = K1 * (1 - B), K1 * B / avgdl
    k1p = K1 + 1
    out: list[dict[int, float]] = []
    for i, (p, docs) in enumerate(zip(parts, matched, strict=True)):
        scores = dict.fromkeys(docs, 0.0)
        if docs:
            lengths = p.lengths()
            for j, w in enumerate(weights):
                tf = tfs[i][j]
                for d in docs.intersection(tf) if len(tf) > len(docs) else (
                        d for d in tf if d in scores):
                    f = tf[d]
                    scores[d] += w * f * k1p / (f + norm_a + norm_b * lengths[d])
            for clause in prefixes:
                for d in evaluate(clause, p).intersection(docs):
                    scores[d] += PREFIX_SCORE
        out.append(scores)
    return out
