"""Run a parsed query against the index or directly against the files."""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctindex.search import matcher
from ctindex.search.query import Node
from ctindex.search.snippet import Span, mark, snippets
from ctindex.store.segment import StoredDoc

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.store.snapshot import Snapshot


class Result(NamedTuple):
    id: str
    scope: str
    path: str
    title: str
    type: str
    tags: list[str]
    score: float
    snippet: str  # snippet_text with its matches wrapped in « and »
    match: str = ""  # "exact" or "near-exact" when a tier above score decided (docs/search.md)
    snippet_text: str = ""  # the snippet without markers
    snippet_matches: tuple[Span, ...] = ()  # [start, end) of each matched word in it
    # The ID unique across scopes (`SCOPE:ID` where another scope holds the
    # ID: ctindex/search/refs.py); set by `with_refs`, which knows the project.
    ref: str = ""


class Outcome(NamedTuple):
    results: list[Result]
    total: int
    generation: int | None  # None for --direct
    keys: frozenset[str]  # every matching path (not only the shown ones)
    notes: tuple[str, ...] = ()  # about the ranking (a prefix's expansion cap was hit,
    #                               a filter-only query past TITLE_ORDER_CAP)
    scopes: tuple[str, ...] = ()  # the scope roots of what was searched (refs)

    def with_refs(self, project_root: str | os.PathLike[str]) -> Outcome:
        """The results with their `ref` set (ctindex/search/refs.py)."""
        from ctindex.search.refs import ref

        return self._replace(
            results=[
                r._replace(ref=ref(project_root, self.scopes, r.id, r.scope, r.path))
                for r in self.results
            ]
        )


_MATCH = {matcher.TIER_EXACT: "exact", matcher.TIER_NEAR: "near-exact"}
# A query of filters and negations only (nothing scores) is ordered by title
# (casefolded), then path, when it has at most this many matches; beyond, by
# path, with a note. Titles live in the compressed per-document records
# (ctindex/store/segment_read.py), so ordering by them reads one record per match.
# Measured on bench/bench_index.py's 40,000 documents (docs/decisions/ranking.md):
# ~0.14 ms per match when the matches are scattered (one record block
# decompressed each: `tag:menttion`, 464 matches, 70 ms against 4 ms by path)
# and ~0.04 ms when they are contiguous (`path:`: 1,000 matches, 45 ms);
# unbounded, `type:Metric` (6,586 matches) took 481 ms against 9 ms. The bound
# keeps the extra cost under ~70 ms, about one search process with a clean
# daemon (docs/search.md, "Filter-only queries").
TITLE_ORDER_CAP = 500


def _finish(
    ranking: matcher.Ranking,
    node: Node,
    limit: int,
    fetch: Callable[[int, int], StoredDoc],
    key: Callable[[int, int], str],
    want_keys: bool,
) -> tuple[list[Result], frozenset[str], int, tuple[str, ...]]:
    """The first `limit` matches of `ranking`, with their snippets: `fetch`
    (partition, document) reads one's stored record, `key(partition,
    document)` its path (a segment decodes only the paths asked for)."""
    scores, tiers = ranking.scores, ranking.tiers
    terms = set(matcher.scoring_terms(node))
    prefixes = tuple(f for c in matcher.prefix_clauses(node) for f in c.forms)
    total = sum(map(len, scores))
    keys = (
        frozenset(key(i, d) for i, sc in enumerate(scores) for d in sc)
        if want_keys
        else frozenset()
    )
    notes = ranking.notes
    # Tier, then the score as shown, then (filter-only queries) the title,
    # then the path. The key is total over all partitions, so the index (one
    # partition per segment) picks the same `limit` matches as --direct (one
    # partition) even when the cut falls between equal scores.
    titles: dict[tuple[int, int], str] = {}
    if total and matcher.is_filter_only(node):
        if total <= TITLE_ORDER_CAP:
            # Partition and doc id order: each record block is read once.
            for i, sc in enumerate(scores):
                for d in sorted(sc):
                    titles[i, d] = fetch(i, d).title.casefold()
        else:
            notes = (
                *notes,
                f"{total} matches: ordered by path (by title up to {TITLE_ORDER_CAP} matches)",
            )
    # Only the matches that can make the cut get their path read.
    best = heapq.nsmallest(
        limit,
        (
            (
                -tier.get(d, 0),
                -round(sc[d], 4),
                titles.get((i, d), ""),
                key(i, d),
                i,
                d,
            )
            for i, (docs, sc, tier) in enumerate(
                zip(matcher.leaders(scores, tiers, limit, margin=1e-4), scores, tiers, strict=True)
            )
            for d in docs
        ),
    )
    docs = [fetch(i, d) for *_, i, d in best]
    results = []
    for (neg_tier, neg, *_), doc, (text, spans) in zip(
        best, docs, snippets([(d.body, d.description) for d in docs], terms, prefixes), strict=True
    ):
        results.append(
            Result(
                doc.concept_id,
                doc.scope,
                doc.key,
                doc.title,
                doc.type,
                list(doc.tags),
                -neg,
                mark(text, spans),
                _MATCH.get(-neg_tier, ""),
                text,
                spans,
            )
        )
    return results, keys, total, notes


class PlanMismatch(Exception):
    """The published generation is not the one the caller was promised."""


class Vouched(NamedTuple):
    """What a daemon's barrier vouched for: the plan the index must be built
    under, and the generation by its number and its manifest's identity
    (store/generation.py manifest_identity). A generation writers published
    on top of it since is fine (an outside `update` or `rebuild`); one of the
    same or a higher number that does not descend from it (a restored copy,
    another project's index) is not."""

    plan_digest: str
    generation: int
    identity: str

    def matches(self, snap: Snapshot) -> bool:
        """`snap` is such a generation: the last check before a barrier's
        answer is read (ctindex/query/freshness.py, ctindex/daemon/query.py)."""
        m = snap.manifest
        return m.plan_digest == self.plan_digest and m.descends_from(self.identity)

    def check(self, snap: Snapshot) -> None:
        if not self.matches(snap):
            raise PlanMismatch(f"generation {snap.generation} does not match")


def search_index(
    index_dir: str | os.PathLike[str],
    node: Node,
    limit: int,
    want_keys: bool = False,
    expect: Vouched | None = None,
) -> Outcome:
    """`expect`: raise PlanMismatch unless the published generation is the
    one a daemon vouched for (`Vouched.check`)."""
    from ctindex.store.snapshot import with_snapshot

    def work(snap: Snapshot) -> Outcome:
        if expect is not None:
            expect.check(snap)
        return search_snapshot(snap, node, limit, want_keys)

    return with_snapshot(Path(index_dir), work)


def search_snapshot(snap: Snapshot, node: Node, limit: int, want_keys: bool = False) -> Outcome:
    """The query on one open generation. The partitions (and their per-term
    caches) live for this query only; the segments' own caches of what they
    read live as long as `snap`, which the long-lived API keeps open between
    queries while the published manifest stays the same (ctindex/api.py)."""
    from ctindex.search.index_partition import SegmentPartition

    parts = [SegmentPartition(v) for v in snap.views]
    ranking = matcher.search(node, parts)
    results, keys, total, notes = _finish(
        ranking,
        node,
        limit,
        fetch=lambda i, d: parts[i].seg.stored(d),
        key=lambda i, d: parts[i].key(d),
        want_keys=want_keys,
    )
    return Outcome(results, total, snap.generation, keys, notes, tuple(snap.manifest.scopes))


def search_direct(
    root: str, plan: Plan, node: Node, limit: int, want_keys: bool = False
) -> Outcome:
    from ctindex.reconciler.report import Bucket
    from ctindex.search.direct import MemoryPartition, read_documents, unread_note

    unread = Bucket()
    docs, _ = read_documents(root, plan, unread)
    part = MemoryPartition(docs, plan)
    ranking = matcher.search(node, [part])

    def fetch(_part: int, doc: int) -> StoredDoc:
        d = part.docs[doc]
        return StoredDoc(
            d.key, d.concept_id, d.scope, d.title, d.type, d.description, d.tags, d.body, d.size
        )

    results, keys, total, notes = _finish(
        ranking,
        node,
        limit,
        fetch=fetch,
        key=lambda _part, d: part.key(d),
        want_keys=want_keys,
    )
    note = unread_note(unread)
    scopes = tuple(s.root for s in plan.scopes)
    return Outcome(results, total, None, keys, (note, *notes) if note else notes, scopes)
