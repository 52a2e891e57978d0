"""Query semantics, once: evaluation and BM25 over any ``Partition``.

The index (one partition per segment) and the ``--direct`` oracle (one
partition built in memory from freshly parsed files) implement the same small
``Partition`` interface; everything that decides *which* documents match and
how they score lives here, so the two paths can not drift apart.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctindex.search.query import And, Facet, Node, Not, Or, PathPrefix, Phrase, Prefix, Term

K1 = 1.2
B = 0.75


class Partition(Protocol):
    """A set of documents with local integer ids (live documents only)."""

    def universe(self) -> set[int]: ...
    def size(self) -> int: ...  # number of live documents
    def tf(self, term: str) -> dict[int, int]: ...  # live doc id -> weighted tf
    def expand(self, prefix: str) -> list[str]: ...  # word terms starting with prefix
    def rank(self, term: str) -> int | None: ...  # id of a term in token streams
    def sequence(self, doc: int) -> array[Any]: ...  # token stream as term ranks
    def sep_rank(self) -> int: ...
    def path_prefix(self, prefix: str) -> set[int]: ...  # docs whose key starts with prefix
    def length(self, doc: int) -> int: ...  # weighted length
    def length_sum(self) -> int: ...  # over live docs


def path_matches(key: str, prefix: str) -> bool:
    return key.startswith(prefix)


def has_run(seq: array[Any], ranks: Sequence[int]) -> bool:
    """True when `ranks` occur consecutively in `seq` (a phrase match).

    Works on the raw bytes with ``bytes.find`` (C speed); a hit must start on
    an item boundary, else the search continues past it.
    """
    pattern = array(seq.typecode, ranks).tobytes()
    hay = seq.tobytes()
    size = seq.itemsize
    at = hay.find(pattern)
    while at >= 0:
        if at % size == 0:
            return True
        at = hay.find(pattern, at + 1)
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
        return {d for d in cands if has_run(part.sequence(d), want)}
    if isinstance(node, Prefix):
        out: set[int] = set()
        for t in expand(node, part):
            out |= part.tf(t).keys()
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


def expand(node: Prefix, part: Partition) -> list[str]:
    seen: dict[str, None] = {}
    for form in node.forms:
        seen.update(dict.fromkeys(part.expand(form)))
    return list(seen)


def scoring_terms(node: Node, parts: Iterable[Partition]) -> list[str]:
    """Terms that contribute to the score: every word of the query outside a
    negation (prefixes expanded over all partitions); filters do not score."""
    parts = list(parts)
    out: dict[str, None] = {}

    def walk(n: Node) -> None:
        if isinstance(n, Term):
            out[n.term] = None
        elif isinstance(n, Phrase):
            out.update(dict.fromkeys(n.terms))
        elif isinstance(n, Prefix):
            for p in parts:
                out.update(dict.fromkeys(expand(n, p)))
        elif isinstance(n, (Or, And)):
            for c in n.children:
                walk(c)

    walk(node)
    return list(out)


@dataclass(frozen=True)
class Hit:
    part: int  # index of the partition
    doc: int
    score: float


def idf(n_docs: int, df: int) -> float:
    """Tantivy's BM25 idf: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def search(node: Node, parts: Sequence[Partition]) -> list[Hit]:
    """Every match with its BM25 score, statistics summed over all partitions."""
    matched = [evaluate(node, p) for p in parts]
    if not any(matched):
        return []
    n_docs = sum(p.size() for p in parts)
    avgdl = max(sum(p.length_sum() for p in parts) / max(n_docs, 1), 1e-9)
    terms = scoring_terms(node, parts)
    tfs = [[p.tf(t) for t in terms] for p in parts]
    weights = [idf(n_docs, sum(len(tfs[i][j]) for i in range(len(parts))))
               for j in range(len(terms))]
    hits: list[Hit] = []
    for i, (p, docs) in enumerate(zip(parts, matched, strict=True)):
        for d in docs:
            norm = K1 * (1 - B + B * p.length(d) / avgdl)
            score = 0.0
            for j, w in enumerate(weights):
                f = tfs[i][j].get(d)
                if f:
                    score += w * f * (K1 + 1) / (f + norm)
            hits.append(Hit(i, d, score))
    return hits
