"""One page of the concepts of a project (`Index.concepts`, the MCP
`list_concepts` tool): every live document matching optional `type:` and
`tag:` filters, read exactly as the query language reads them
(ctindex/search/query.py), and a concept ID prefix, ordered by concept ID
then path.

The filters are postings lookups and the IDs come from the paths and the
plan, so choosing a page costs no document record; only the page's own
documents are read for their title, type and tags."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ctindex.search import matcher
from ctindex.search.query import And, Node, field_filter

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.store.snapshot import Snapshot


class Listed(NamedTuple):
    id: str
    scope: str
    path: str
    title: str
    type: str
    tags: tuple[str, ...]


class Listing(NamedTuple):
    concepts: list[Listed]  # the page
    total: int  # every match, not only the page
    generation: int | None  # None when read from the files
    notes: tuple[str, ...] = ()


def filters(type_: str | None, tag: str | None) -> Node | None:
    """The query node of the filters given (None: every document)."""
    nodes = [field_filter(name, value) for name, value in (("type", type_), ("tag", tag)) if value]
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else And(tuple(nodes))


def _matching(node: Node | None, part: matcher.Partition) -> set[int]:
    return part.universe() if node is None else matcher.evaluate(node, part)


def list_snapshot(
    snap: Snapshot, plan: Plan, node: Node | None, prefix: str, offset: int, limit: int
) -> Listing:
    from ctindex.providers import load
    from ctindex.search.index_partition import SegmentPartition

    parts = [SegmentPartition(view) for view in snap.views]
    found: list[tuple[str, str, int, int]] = []
    for i, part in enumerate(parts):
        keys = part.seg.keys()
        for d in _matching(node, part):
            key = keys[d]
            scope = plan.find_scope(key)
            if scope is None:  # not under the plan the index was proven fresh for
                continue
            cid = load(scope[0].provider).concept_id(key, scope[0].root)
            if cid.startswith(prefix):
                found.append((cid, key, i, d))
    found.sort()
    page = []
    for _cid, _key, i, d in found[offset : offset + limit]:
        doc = parts[i].seg.stored(d)
        page.append(Listed(doc.concept_id, doc.scope, doc.key, doc.title, doc.type, doc.tags))
    return Listing(page, len(found), snap.generation)


def list_direct(
    root: str, plan: Plan, node: Node | None, prefix: str, offset: int, limit: int
) -> Listing:
    """The same page read from the files (when the index cannot be brought
    up to date: ctindex/query/freshness.py's fallback)."""
    from ctindex.reconciler.report import Bucket
    from ctindex.search.direct import MemoryPartition, read_documents, unread_note

    unread = Bucket()
    docs, _errors = read_documents(root, plan, unread)
    part = MemoryPartition(docs, plan)
    found = sorted(
        (part.docs[d].concept_id, part.docs[d].key, d)
        for d in _matching(node, part)
        if part.docs[d].concept_id.startswith(prefix)
    )
    page = [part.docs[d] for _cid, _key, d in found[offset : offset + limit]]
    note = unread_note(unread)
    return Listing(
        [Listed(d.concept_id, d.scope, d.key, d.title, d.type, d.tags) for d in page],
        len(found),
        None,
        (note,) if note else (),
    )
