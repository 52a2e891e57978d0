"""What the MCP tools answer (ctindex/mcp_server.py, docs/mcp.md): documents
made for a model's context window, and their output schemas.

The CLI's JSON documents are complete and repeat themselves on purpose (a
snippet marked, unmarked and as offsets); a model pays for every byte it
reads, and for every byte of the tool list. So here:

* a search hit is compact: `id` (the ID unique across scopes, the one
  `get_concept` takes: ctindex/search/refs.py), scope, path, title, type,
  tags, score, the snippet as plain text and its matches as offsets; `full`
  adds the marked snippet and the exact-match tier;
* a search and a concept body page (`offset`, `next_offset`), and a body
  is capped (`max_chars`, `truncated`);
* each output schema says what the document holds and nothing more: the
  whole tool list stays under 8 KB (tests/ctindex/test_mcp_server.py).

Every document keeps its `freshness` statement: how the answer was proven
current.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctindex.errors import CtindexError

if TYPE_CHECKING:
    from ctindex.api import Index
    from ctindex.service.types import Concept, Freshness, Hit

Doc = dict[str, object]  # a JSON document or schema, as the tools return them

MAX_RANK = 1000  # offset + limit of a search: how deep a model may page
BODY_CHARS = 8000  # a concept body's default page, in characters

# -- schemas: types only, the descriptions are the tools' own ------------------

_STR = {"type": "string"}
_INT = {"type": "integer"}
_STRS = {"type": "array", "items": _STR}
_NEXT = {"type": ["integer", "null"]}


def _object(required: Doc, optional: Doc | None = None, *, closed: bool = False) -> Doc:
    """An object schema naming its fields; `closed` (a tool's whole
    document) admits no other. Nothing more: bytes in the tool list are
    bytes in every model's context (what is always there: docs/mcp.md)."""
    doc: Doc = {"type": "object", "properties": {**required, **(optional or {})}}
    if closed:
        doc["additionalProperties"] = False
    return doc


_FRESH = {"type": "object"}  # the statement (FRESHNESS), named once, in `search`
FRESHNESS = _object(
    {
        "mode": {"enum": ["watcher-clean", "fallback", "reconcile-on-query", "direct"]},
        "reason": {"type": ["string", "null"]},
        "generation": {"type": ["integer", "null"]},
    }
)


_SUMMARY: Doc = {
    "id": _STR,
    "scope": _STR,
    "path": _STR,
    "title": _STR,
    "type": _STR,
    "tags": _STRS,
}
HIT = _object(
    {
        **_SUMMARY,
        "score": {"type": "number"},
        "snippet": _STR,
        "matches": {"type": "array", "items": {"type": "array", "items": _INT}},
    },
    {"marked": _STR, "match": _STR},
)
SEARCH = _object(
    {
        "results": {"type": "array", "items": HIT},
        "total": _INT,
        "offset": _INT,
        "next_offset": _NEXT,
        "freshness": FRESHNESS,
    },
    {"notes": _STRS},
    closed=True,
)
LISTING = _object(
    {
        "concepts": {"type": "array", "items": _object(_SUMMARY)},
        "total": _INT,
        "offset": _INT,
        "next_offset": _NEXT,
        "freshness": _FRESH,
        "notes": _STRS,
    },
    closed=True,
)
WHY = _object(
    {
        "project": _STR,
        "all_included": {"type": "boolean"},
        "decisions": {"type": "array", "items": {"type": "object"}},
    },
    closed=True,
)
LINK = _object({"text": _STR, "target": _STR, "id": {"type": ["string", "null"]}})
CONCEPT = _object(
    {
        **_SUMMARY,
        "description": _STR,
        "frontmatter": {"type": "object"},
        "body": _STR,
        "body_chars": _INT,
        "offset": _INT,
        "next_offset": _NEXT,
        "truncated": {"type": "boolean"},
        "links": {"type": "array", "items": LINK},
        "freshness": _FRESH,
    },
    {"warning": _STR},
    closed=True,
)
SCOPES = _object(
    {
        "scopes": {
            "type": "array",
            "items": _object({"root": _STR, "provider": _STR, "documents": _INT}),
        },
        "documents": _INT,
        "freshness": _FRESH,
    },
    closed=True,
)
RELATED_ITEM = _object({"id": _STR, "path": _STR, "title": _STR, "why": _STRS})
RELATED = _object(
    {"id": _STR, "related": {"type": "array", "items": RELATED_ITEM}, "freshness": _FRESH},
    closed=True,
)
STATUS = _object(
    {
        "generation": {"type": ["integer", "null"]},
        "documents": _INT,
        "stale": {"type": ["string", "null"]},
        "problem": {"type": ["string", "null"]},
        "watcher": {"type": "object"},
    },
    {"last_reconcile": {"type": ["object", "null"]}},
    closed=True,
)


# -- documents --------------------------------------------------------------------


def freshness(fresh: Freshness) -> Doc:
    """The statement, without what only a benchmark reads."""
    return {"mode": fresh.mode, "reason": fresh.reason, "generation": fresh.generation}


def hit(h: Hit, full: bool) -> Doc:
    doc: Doc = {
        "id": h.ref or h.id,
        "scope": h.scope,
        "path": h.path,
        "title": h.title,
        "type": h.type,
        "tags": list(h.tags),
        "score": h.score,
        "snippet": h.snippet_text,
        "matches": [list(span) for span in h.snippet_matches],
    }
    if full:
        doc["marked"] = h.snippet
        doc["match"] = h.match
    return doc


def search(
    index: Index, query: str, limit: int, offset: int, full: bool, direct: bool = False
) -> Doc:
    """Ranked hits `offset` to `offset + limit` (the ranking is deterministic,
    so pages do not overlap while the index does not change)."""
    from ctindex.errors import UsageError

    if offset + limit > MAX_RANK:
        raise UsageError(f"offset + limit must be at most {MAX_RANK}, not {offset + limit}")
    got = index.search(query, limit=offset + limit, direct=direct)
    page = got.hits[offset:]
    end = offset + len(page)
    doc: Doc = {
        "results": [hit(h, full) for h in page],
        "total": got.total,
        "offset": offset,
        "next_offset": end if end < got.total and end < MAX_RANK else None,
        "freshness": freshness(got.freshness),
    }
    if got.notes:
        doc["notes"] = list(got.notes)
    return doc


def concept(c: Concept, offset: int, max_chars: int) -> Doc:
    """One concept, its body from `offset` on, at most `max_chars` of it."""
    body = c.body[offset : offset + max_chars]
    end = offset + len(body)
    doc: Doc = {
        "id": c.id,
        "scope": c.scope,
        "path": c.path,
        "title": c.title,
        "type": c.type,
        "tags": list(c.tags),
        "description": c.description,
        "frontmatter": c.frontmatter,
        "body": body,
        "body_chars": len(c.body),
        "offset": offset,
        "next_offset": end if end < len(c.body) else None,
        "truncated": end < len(c.body) or offset > 0,
        "links": [{"text": k.text, "target": k.target, "id": k.concept_id} for k in c.links],
        "freshness": freshness(c.freshness),
    }
    if c.warning:
        doc["warning"] = c.warning
    return doc


def scopes(index: Index) -> Doc:
    listed = index.scopes()
    return {
        "scopes": [
            {"root": s.root, "provider": s.provider, "documents": s.documents}
            for s in listed.scopes
        ],
        "documents": sum(s.documents for s in listed.scopes),
        "freshness": freshness(listed.freshness),
    }


def related(index: Index, wanted: str, scope: str | None, limit: int) -> Doc:
    """Concepts near one: those it links to, then those sharing its tags
    (most shared first, then by score)."""
    c = index.get(wanted, scope=scope)
    out: list[Doc] = []
    seen = {c.path}
    for link in c.links:
        if link.concept_id is None:
            continue
        try:
            target = index.get(link.concept_id, scope=c.scope)
        except CtindexError:  # a dangling link, an unreadable file: nothing to relate
            continue
        if target.path not in seen:
            seen.add(target.path)
            out.append(_near(target.id, target.path, target.title, [f"linked: {link.text}"]))
    shared: dict[str, tuple[list[str], float, Hit]] = {}
    fresh = c.freshness
    for tag in c.tags:
        if '"' in tag:
            continue  # no quoted value of the query language holds a quote
        got = index.search(f'tag:"{tag}"', limit=MAX_RANK)
        fresh = got.freshness
        for h in got.hits:
            if h.path in seen:
                continue
            tags, best, first = shared.get(h.path, ([], 0.0, h))
            shared[h.path] = ([*tags, tag], max(best, h.score), first)
    ranked = sorted(shared.values(), key=lambda t: (-len(t[0]), -t[1], t[2].path))
    for tags, _score, h in ranked:
        out.append(_near(h.ref or h.id, h.path, h.title, [f"tag: {t}" for t in tags]))
    return {"id": wanted, "related": out[:limit], "freshness": freshness(fresh)}


def _near(cid: str, path: str, title: str, why: list[str]) -> Doc:
    return {"id": cid, "path": path, "title": title, "why": why}


def status(index: Index) -> Doc:
    doc = index.status().document
    watcher = doc.get("watcher")
    return {
        "generation": doc.get("generation"),
        "documents": doc.get("documents", 0),
        "stale": doc.get("stale"),
        "problem": doc.get("problem"),
        "watcher": {
            k: watcher.get(k) for k in ("lane", "backend", "running", "generation") if k in watcher
        }
        if isinstance(watcher, dict)
        else {},
        "last_reconcile": doc.get("last_reconcile"),
    }
