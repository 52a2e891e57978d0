"""The public types of the Python API (docs/api.md; exported by ``ctindex``
and ``ctindex.api``): what `Index` answers with, each with `to_json()`
giving the JSON document of the matching `ctindex --json` command."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ctindex.service.update_problems import Problems, json_problems

if TYPE_CHECKING:
    from ctindex.base.jsontypes import JSONObject
    from ctindex.indexing import transaction
    from ctindex.query.statement import Freshness as _Freshness

# A JSON document (an object), as `to_json()` returns it.
JsonObject = dict[str, Any]


# -- results ---------------------------------------------------------------------


@dataclass(frozen=True)
class Freshness:
    """How fresh an answer is (the JSON `freshness` object of docs/cli.md).

    `mode`: ``watcher-clean`` (a daemon barrier), ``fallback`` (with the
    `reason`), ``reconcile-on-query`` (watching disabled) or ``direct``
    (answered from the files). `generation` is the index generation the
    answer was read from (None for answers from the files)."""

    mode: str
    reason: str | None
    generation: int | None
    barrier_ms: float | None = None
    reconcile_ms: float | None = None
    rebuilt: str | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        doc = asdict(self)
        doc["notes"] = list(self.notes)
        return doc


def freshness_of(fresh: _Freshness) -> Freshness:
    """The public statement of the freshness step's record (ctindex/query/freshness.py)."""
    return Freshness(
        fresh.mode,
        fresh.reason,
        fresh.generation,
        fresh.barrier_ms,
        fresh.reconcile_ms,
        fresh.rebuilt,
        tuple(fresh.notes),
    )


@dataclass(frozen=True)
class Hit:
    """One search result: the fields of a JSON `results` item."""

    id: str
    scope: str
    path: str  # project-relative, '/'-separated
    title: str
    type: str
    tags: tuple[str, ...]
    score: float
    snippet: str  # snippet_text with each match wrapped in « and »
    match: str = ""  # "exact" / "near-exact" when a tier above the score decided
    snippet_text: str = ""  # the snippet without markers
    # [start, end) of every matched word in snippet_text, in code points
    snippet_matches: tuple[tuple[int, int], ...] = ()
    # The ID unique across scopes: `SCOPE:ID` where another scope holds the
    # same ID, else the ID (ctindex/search/refs.py); `Index.get` takes it.
    ref: str = ""

    def to_json(self) -> JsonObject:
        doc = asdict(self)
        doc["tags"] = list(self.tags)
        doc["snippet_matches"] = [list(span) for span in self.snippet_matches]
        return doc


@dataclass(frozen=True)
class Timings:
    """Where the time of one call went, in milliseconds."""

    # proving freshness (barrier, or reconciliation and any update), less
    # the query's read when that ran while the daemon answered the barrier
    fresh_ms: float
    query_ms: float  # opening (or reusing) the generation and running the query that answered
    total_ms: float  # fresh_ms + query_ms


@dataclass(frozen=True)
class SearchResult:
    """The answer to `Index.search`; `to_json()` is `ctindex --json search`'s document."""

    query: str
    hits: tuple[Hit, ...]
    total: int  # all matches, not only the `hits` shown
    freshness: Freshness
    notes: tuple[str, ...]  # about the ranking (e.g. a prefix's expansion cap)
    timings: Timings

    @property
    def generation(self) -> int | None:
        return self.freshness.generation

    def to_json(self) -> JsonObject:
        return {
            "query": self.query,
            "results": [h.to_json() for h in self.hits],
            "total": self.total,
            "freshness": self.freshness.to_json(),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Link:
    """A Markdown link of a concept: `concept_id` is the linked concept's ID
    when the target is a relative `.md` path inside the same scope."""

    text: str
    target: str
    concept_id: str | None


@dataclass(frozen=True)
class Concept:
    """One concept document, read from its file when asked for (never stale)."""

    id: str
    scope: str
    path: str  # project-relative
    title: str
    type: str
    description: str
    tags: tuple[str, ...]
    frontmatter: JSONObject  # the whole YAML mapping, as JSON values
    body: str  # the text after the frontmatter
    text: str  # the whole file
    links: tuple[Link, ...]
    warning: str | None  # a frontmatter problem (the document is still a concept)
    freshness: Freshness

    def to_json(self) -> JsonObject:
        return {
            "id": self.id,
            "scope": self.scope,
            "path": self.path,
            "title": self.title,
            "type": self.type,
            "description": self.description,
            "tags": list(self.tags),
            "frontmatter": self.frontmatter,
            "body": self.body,
            "links": [asdict(link) for link in self.links],
            "warning": self.warning,
            "freshness": self.freshness.to_json(),
        }


@dataclass(frozen=True)
class ScopeSummary:
    """One scope of the plan: its root, its provider, and how many concepts
    of it a fresh index holds."""

    root: str
    provider: str
    documents: int


@dataclass(frozen=True)
class ScopeList:
    """Every scope (`Index.scopes`), in the plan's order."""

    scopes: tuple[ScopeSummary, ...]
    freshness: Freshness

    def to_json(self) -> JsonObject:
        return {
            "scopes": [asdict(s) for s in self.scopes],
            "freshness": self.freshness.to_json(),
        }


@dataclass(frozen=True)
class ConceptSummary:
    """One concept of a `ConceptPage`: what the index holds of it."""

    id: str
    scope: str
    path: str  # project-relative
    title: str
    type: str
    tags: tuple[str, ...]

    def to_json(self) -> JsonObject:
        doc = asdict(self)
        doc["tags"] = list(self.tags)
        return doc


@dataclass(frozen=True)
class ConceptPage:
    """One page of `Index.concepts`; `to_json()` is the MCP `list_concepts`
    tool's document (ctindex/schemas/concepts.json)."""

    concepts: tuple[ConceptSummary, ...]  # ordered by ID, then path
    total: int  # every concept matching the filters, not only this page
    offset: int
    next_offset: int | None  # the `offset` of the next page, None after the last
    freshness: Freshness
    notes: tuple[str, ...]

    def to_json(self) -> JsonObject:
        return {
            "concepts": [c.to_json() for c in self.concepts],
            "total": self.total,
            "offset": self.offset,
            "next_offset": self.next_offset,
            "freshness": self.freshness.to_json(),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Status:
    """`ctindex status`: the main figures, and `document`, the whole JSON
    document of `ctindex --json status` (docs/cli.md)."""

    generation: int | None
    documents: int
    segments: int
    tombstones: int
    source_bytes: int
    index_bytes: int
    stale: str | None  # why the next query rebuilds, if it must
    problem: str | None
    config_error: str | None
    watcher_lane: str
    watcher_running: bool
    exit_code: int  # what `ctindex status` exits with
    document: JsonObject


@dataclass(frozen=True)
class UpdateReport:
    """One update or rebuild as `Index.update()` / `Index.rebuild()` and
    `ctindex --json update` report it: the public view of the indexer's
    report (`update_report_of`)."""

    generation: int = 0
    published: bool = False
    refreshed: bool = False
    rebuilt: bool = False
    reason: str | None = None
    added: int = 0
    changed: int = 0
    removed: int = 0
    renamed: int = 0
    metadata_only: int = 0
    dirty: int = 0
    documents: int = 0
    errors: int = 0
    warnings: int = 0
    merged_segments: int = 0
    missing_roots: tuple[str, ...] = ()
    reserved: tuple[str, ...] = ()  # files a full pass skipped for a reserved name
    entries_visited: int = 0
    reconcile_ms: float = 0.0
    duration_ms: float = 0.0
    notes: tuple[str, ...] = ()
    # kind (errors, warnings, missing_roots) -> [{path, message}]
    problems: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        """`ctindex --json update`'s fields, in its order (the command adds
        `strict`, `exit_code` and, without scopes, `no_scopes`)."""
        doc = asdict(self)
        doc["missing_roots"] = list(self.missing_roots)
        doc["reserved"] = list(self.reserved)
        doc["notes"] = list(self.notes)
        return doc


def update_report_of(report: transaction.UpdateReport, problems: Problems) -> UpdateReport:
    """The public view of the indexer's report of one update or rebuild
    (ctindex/indexing/transaction.py), with what it could not take in
    (ctindex/service/update_problems.py)."""
    # The view's fields are the report's (tests/ctindex/service/test_types.py
    # holds them to it), so they are copied by name, not listed twice.
    shared = {f.name: getattr(report, f.name) for f in fields(UpdateReport) if f.name != "problems"}
    shared["missing_roots"] = tuple(report.missing_roots)
    shared["notes"] = tuple(report.notes)
    return UpdateReport(**shared, problems=json_problems(problems))
