"""The Python API: ``ctindex.Index`` (docs/api.md).

One ``Index`` is one project opened for the life of a process (an agent
host, the MCP server, a notebook). It answers with the same internals as
the CLI, so its answers equal ``ctindex --json``'s (tests/ctindex/test_api.py), and
it proves freshness on every query exactly as the CLI does (spec §7): the
daemon's barrier when watching is on, else (or when the barrier fails) a
synchronous reconciliation, then the published generation is read. What a
long-lived object saves is what a new process pays again each time:

* the plan is kept while everything it was computed from keeps its full
  stat fingerprint (ctindex.policy.plan_record.plan_current), and computed again
  otherwise;
* the open generation (its segment files and what was read of them) is
  kept while the published MANIFEST is byte-for-byte the one it was opened
  from; any publish (the daemon's, an `update`, a `rebuild` elsewhere)
  makes the next query open the new one.

Neither is ever a reason to skip the freshness step: a kept generation is
only reused after the barrier or reconciliation of *this* query said the
index is current, and only if it is still the published one.

An ``Index`` may be shared between threads: its calls are serialised.
"""

from __future__ import annotations

import os
import re
import stat as stat_mod
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ctindex.errors import (
    AmbiguousConcept,
    ConceptNotFound,
    ConceptUnreadable,
    UsageError,
)
from ctindex.policy.project import (
    Project,
    StrPath,
    find_root,
    is_normal_key,
    start_folder,
    unrepresentable,
)

if TYPE_CHECKING:
    from ctindex import indexer
    from ctindex.commands import Context
    from ctindex.policy.decide import Decision
    from ctindex.policy.plan import Plan
    from ctindex.query.freshness import Answered
    from ctindex.query.freshness import Freshness as _Freshness
    from ctindex.search.execute import Outcome
    from ctindex.search.query import Node
    from ctindex.store.snapshot import Snapshot

# Opening a concept file: no symlink, no blocking on a special file, not
# inherited (POSIX flags, 0 where absent), bytes as they are (Windows' O_BINARY).
_CONCEPT_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)

T = TypeVar("T")
MAX_PAGE = 1000  # the largest page `Index.concepts` returns at once

__all__ = [
    "Concept",
    "ConceptPage",
    "ConceptSummary",
    "Freshness",
    "Hit",
    "Index",
    "Link",
    "SearchResult",
    "Status",
    "Timings",
    "UpdateReport",
]


# -- results ---------------------------------------------------------------------


@dataclass(frozen=True)
class Freshness:
    """How fresh an answer is (spec §7; the JSON `freshness` object of docs/cli.md).

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

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["notes"] = list(self.notes)
        return doc

    @classmethod
    def _of(cls, fresh: _Freshness) -> Freshness:
        return cls(
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

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["tags"] = list(self.tags)
        doc["snippet_matches"] = [list(span) for span in self.snippet_matches]
        return doc


@dataclass(frozen=True)
class Timings:
    """Where the time of one call went, in milliseconds."""

    fresh_ms: float  # proving freshness: barrier, or reconciliation (and any update)
    query_ms: float  # opening (or reusing) the generation and running the query
    total_ms: float


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

    def to_json(self) -> dict[str, Any]:
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
    frontmatter: dict[str, Any]  # the whole YAML mapping, as JSON-compatible values
    body: str  # the text after the frontmatter
    text: str  # the whole file
    links: tuple[Link, ...]
    warning: str | None  # a frontmatter problem (the document is still a concept)
    freshness: Freshness

    def to_json(self) -> dict[str, Any]:
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
class ConceptSummary:
    """One concept of a `ConceptPage`: what the index holds of it."""

    id: str
    scope: str
    path: str  # project-relative
    title: str
    type: str
    tags: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
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
    document: dict[str, Any]


@dataclass(frozen=True)
class UpdateReport:
    """`Index.update()` / `Index.rebuild()`: the fields of `ctindex --json update`."""

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
    entries_visited: int = 0
    reconcile_ms: float = 0.0
    duration_ms: float = 0.0
    notes: tuple[str, ...] = ()
    # kind (errors, warnings, missing_roots) -> [{path, message}]
    problems: dict[str, list[dict[str, str]]] = field(default_factory=dict)


# -- the index ---------------------------------------------------------------------


class Index:
    """A project's index, opened once and queried many times.

    `path`: any folder of the project (default: the working directory); the
    project is found from it as the CLI finds it from ``-C`` (the nearest
    folder at or above with ``.ct/`` or ``.git``). ``UsageError`` when there
    is none: an index needs a project to live in."""

    def __init__(self, path: StrPath | None = None) -> None:
        here = start_folder(os.getcwd(), path)
        root = find_root(here)
        if root is None:
            raise UsageError(
                f"no ctindex project at or above {here} (no .ct/ or .git); "
                "run `ctindex init --write` there first"
            )
        self.project = Project.at(root)
        self._lock = threading.RLock()
        self._plan: Plan | None = None
        from ctindex.store.snapshot import OpenGeneration

        self._open = OpenGeneration(Path(self.project.index_dir))

    @property
    def root(self) -> Path:
        return self.project.root

    def __repr__(self) -> str:
        return f"ctindex.Index({str(self.root)!r})"

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the open generation's files (the object stays usable)."""
        with self._lock:
            self._open.close()

    # -- plan and generation ----------------------------------------------------------

    def plan(self) -> Plan:
        """The effective plan, computed again whenever what it depends on
        changed (PolicyError for a malformed `.ct/index.jsonc`)."""
        from ctindex.policy import plan_record
        from ctindex.policy.plan import load_plan

        with self._lock:
            if self._plan is None or not plan_record.plan_current(self.project, self._plan):
                self._plan = load_plan(self.project)
                plan_record.remember(self.project, self._plan)  # for the CLI's fast path
            return self._plan

    def _generation(self) -> Snapshot:
        """The published generation, reusing the open one while MANIFEST is
        unchanged (ctindex/store/snapshot.py OpenGeneration)."""
        return self._open.current()

    @property
    def opened(self) -> int:
        """Generations opened so far (reused between queries otherwise)."""
        return self._open.opened

    def _indexed(
        self,
        plan: Plan,
        work: Callable[[Snapshot], T],
        from_files: Callable[[Plan], T] | None = None,
    ) -> Answered[T]:
        """Prove freshness as the CLI's search does (ctindex/query/freshness.py:
        barrier or reconciliation, a damaged index repaired), then run
        `work` on the kept generation; `from_files` answers when the index
        cannot be brought up to date (else IndexBusy / IndexReadOnly)."""
        from ctindex.query import freshness

        return freshness.fresh_answer(
            self.project,
            lambda: plan,
            work,
            from_files=from_files,
            open_generation=lambda read: read(self._generation()),
        )

    # -- queries --------------------------------------------------------------------

    def search(self, query: str, limit: int = 10, direct: bool = False) -> SearchResult:
        """The indexed query (docs/search.md); with `direct`, the same query
        answered by reading the files (the built-in oracle). Raises
        QueryError for a malformed query."""
        from ctindex.query import freshness
        from ctindex.search.execute import search_direct, search_snapshot
        from ctindex.search.query import parse_query

        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise UsageError(f"limit must be a whole number of at least 1, not {limit!r}")
        t0 = time.perf_counter()
        node: Node = parse_query(query)
        with self._lock:
            plan = self.plan()
            marks: list[float] = []  # when the answer began to be read

            def run(snap: Snapshot) -> Outcome:
                marks.append(time.perf_counter())
                return search_snapshot(snap, node, limit)

            def from_files(plan: Plan) -> Outcome:
                marks.append(time.perf_counter())
                return search_direct(str(self.project.root), plan, node, limit)

            if direct:
                answered = freshness.fresh_answer(
                    self.project,
                    lambda: plan,
                    run,
                    from_files=from_files,
                    options=freshness.Options(direct=True),
                )
            else:
                answered = self._indexed(plan, run, from_files)
            fresh, outcome = answered.freshness, answered.value
            t1 = marks[0] if marks else time.perf_counter()
        t2 = time.perf_counter()
        # As the CLI: the generation reported is the one the answer was read from.
        fresh.generation = outcome.generation
        hits = tuple(
            Hit(
                r.id,
                r.scope,
                r.path,
                r.title,
                r.type,
                tuple(r.tags),
                r.score,
                r.snippet,
                r.match,
                r.snippet_text,
                r.snippet_matches,
            )
            for r in outcome.results
        )
        return SearchResult(
            query,
            hits,
            outcome.total,
            Freshness._of(fresh),
            tuple(outcome.notes),
            Timings(_ms(t1 - t0), _ms(t2 - t1), _ms(t2 - t0)),
        )

    def get(self, concept_id: str, scope: str | None = None) -> Concept:
        """The concept with this ID: its path relative to its scope root,
        without `.md` (OKF's concept ID). When several scopes hold it, name
        the one meant by `scope` (its root) or pass the project-relative
        path instead. Read from the file itself, so never stale.

        Raises ConceptNotFound (with close matches), AmbiguousConcept, or
        ConceptUnreadable."""
        with self._lock:
            plan = self.plan()
            found = resolve(plan, concept_id, scope)
            if not found:
                raise ConceptNotFound(concept_id, self._suggest(plan, concept_id, scope))
            if len(found) > 1:
                raise AmbiguousConcept(concept_id, tuple(key for _root, key in found))
            root, key = found[0]
            return read_concept(plan, root, key)

    def ids(self) -> list[str]:
        """Every concept ID of a fresh index, sorted (with duplicates when
        two scopes hold the same ID)."""
        with self._lock:
            plan = self.plan()
            return sorted(cid for cid, _key in self._fresh_ids(plan))

    def concepts(
        self,
        *,
        type: str | None = None,
        tag: str | None = None,
        prefix: str = "",
        offset: int = 0,
        limit: int = 100,
    ) -> ConceptPage:
        """A page of the concepts of a fresh index, ordered by ID then path:
        those of `type` and with `tag` (each as the query language's `type:`
        and `tag:` read it) whose ID starts with `prefix`, from the
        `offset`-th on, at most `limit` of them (1 to MAX_PAGE)."""
        from ctindex.search.listing import filters, list_direct, list_snapshot

        for name, value, low, high in (("offset", offset, 0, None), ("limit", limit, 1, MAX_PAGE)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise UsageError(f"{name} must be a whole number of at least {low}, not {value!r}")
            if high is not None and value > high:
                raise UsageError(f"{name} must be at most {high}, not {value}")
        node = filters(type, tag)
        with self._lock:
            plan = self.plan()
            answered = self._indexed(
                plan,
                lambda snap: list_snapshot(snap, plan, node, prefix, offset, limit),
                lambda plan: list_direct(str(self.project.root), plan, node, prefix, offset, limit),
            )
        fresh, listing = answered.freshness, answered.value
        fresh.generation = listing.generation
        end = offset + len(listing.concepts)
        return ConceptPage(
            tuple(ConceptSummary(*c) for c in listing.concepts),
            listing.total,
            offset,
            end if end < listing.total else None,
            Freshness._of(fresh),
            listing.notes,
        )

    def _fresh_ids(self, plan: Plan) -> list[tuple[str, str]]:
        from ctindex.providers import load
        from ctindex.store.lock import IndexBusy, IndexReadOnly

        def listing(snap: Snapshot) -> list[tuple[str, str]]:
            out = []
            for view in snap.views:
                for d, key in enumerate(view.segment.keys()):
                    if d in view.deleted:
                        continue
                    found = plan.find_scope(key)
                    if found is not None:
                        scope = found[0]
                        out.append((load(scope.provider).concept_id(key, scope.root), key))
            return out

        try:
            found: list[tuple[str, str]] = self._indexed(plan, listing).value
            return found
        except (IndexBusy, IndexReadOnly):
            return []  # only suggestions depend on it: none rather than a wait or a failure

    def _suggest(self, plan: Plan, wanted: str, scope: str | None) -> tuple[str, ...]:
        """Close matches among the existing IDs: the IDs ending in the asked
        one's last segment first (`orders` -> `tables/orders`), then
        difflib's closest (ctindex/base/suggest.py). Linear in the number of concepts."""
        from ctindex.base.suggest import close_matches

        want_root = None if scope is None else scope.strip("/")
        ids = sorted(
            {
                cid
                for cid, key in self._fresh_ids(plan)
                if want_root is None or _root_of(plan, key) == want_root
            }
        )
        wanted = wanted.strip().removesuffix(".md")
        last = wanted.rsplit("/", 1)[-1].casefold()
        same_end = [i for i in ids if i.rsplit("/", 1)[-1].casefold() == last]
        close = close_matches(wanted, ids, n=SUGGESTIONS)
        out: list[str] = []
        for cid in (*same_end, *close):
            if cid not in out:
                out.append(cid)
        return tuple(out[:SUGGESTIONS])

    def why(self, path: StrPath, cwd: StrPath | None = None) -> Decision:
        """The decision for one path (spec §5): a relative `path` is taken
        from `cwd`, by default the project root."""
        with self._lock:
            return self.plan().decide(path, cwd=cwd)

    def status(self, verbose: bool = False) -> Status:
        """The metrics of spec §10, as `ctindex status` reports them. Never
        starts a daemon."""
        from ctindex.commands.status import collect
        from ctindex.commands.watcher_report import watcher_json

        with self._lock:
            doc = collect(self._context(), verbose)
        code = 2 if doc["config_error"] else (1 if doc["problem"] else 0)
        document = {**doc, "watcher": watcher_json(doc["watcher"]), "exit_code": code}
        watcher = doc["watcher"]
        return Status(
            doc["generation"],
            doc["documents"],
            doc["segments"],
            doc["tombstones"],
            doc["source_bytes"],
            doc["index_bytes"],
            doc["stale"],
            doc["problem"],
            doc["config_error"],
            str(watcher.get("lane")),
            bool(watcher.get("running")),
            code,
            document,
        )

    def update(self) -> UpdateReport:
        """A full reconciliation (`ctindex update`); publishes a generation
        only if something changed."""
        from ctindex.indexer import update

        with self._lock:
            return self._report(update(self.project, self.plan()))

    def rebuild(self) -> UpdateReport:
        """A fresh index, published atomically (`ctindex rebuild`)."""
        from ctindex.indexer import rebuild

        with self._lock:
            return self._report(rebuild(self.project, self.plan()))

    def _report(self, report: indexer.UpdateReport) -> UpdateReport:
        from ctindex.commands.update import problems

        doc = report.as_dict()
        known = {f.name for f in fields(UpdateReport)}
        values = {k: v for k, v in doc.items() if k in known}
        values["missing_roots"] = tuple(values.get("missing_roots", ()))
        values["notes"] = tuple(values.get("notes", ()))
        values["problems"] = {
            k.replace("-", "_"): v for k, v in problems(self._context(), report).items()
        }
        return UpdateReport(**values)

    def _context(self) -> Context:
        import io

        from ctindex.commands import Context

        return Context(
            self.project,
            json=True,
            quiet=True,
            out=io.StringIO(),
            err=io.StringIO(),
            cwd=self.project.root,
        )


SUGGESTIONS = 5


def _root_of(plan: Plan, key: str) -> str | None:
    found = plan.find_scope(key)
    return None if found is None else found[0].root


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# -- concepts by ID ------------------------------------------------------------------


def resolve(plan: Plan, wanted: str, scope: str | None = None) -> list[tuple[str, str]]:
    """(scope root, key) of each included concept `wanted` names: as a
    concept ID in each scope (the first scope containing a path decides it,
    as for indexing), or as a project-relative path. Costs one decision per
    scope; never lists a folder."""
    text = wanted.strip().replace("\\", "/") if isinstance(wanted, str) else ""
    text = text.removesuffix(".md").strip("/")
    if not text or not is_normal_key(text) or unrepresentable(text) is not None:
        return []  # no file can have this name: no concept either
    want_root = scope.strip("/") if scope is not None else None
    keys = [f"{s.root}/{text}.md" if s.root else f"{text}.md" for s in plan.scopes]
    keys.append(f"{text}.md")  # a project-relative path
    out: list[tuple[str, str]] = []
    for key in keys:
        if any(key == k for _r, k in out):
            continue
        found = plan.find_scope(key)
        if found is None or (want_root is not None and found[0].root != want_root):
            continue
        try:  # a decision describes absent paths too: only an existing file is a concept
            st = os.lstat(plan.project.path(key))
        except OSError:
            continue
        if plan.project.symlinked_parent(key) is None and plan.decide_key(key, st).included:
            out.append((found[0].root, key))
    return out


MAX_LINK_TEXT = 500
MAX_LINK_TARGET = 2000
# Inline Markdown links. Both parts are bounded, so a text full of '[' costs
# linear time, not a scan to the end from every bracket.
_LINK_RE = re.compile(
    rf"\[([^\]\n]{{0,{MAX_LINK_TEXT}}})\]\(<?([^)\s<>]{{1,{MAX_LINK_TARGET}}})>?"
    r"(?:\s+\"[^\"\n]*\")?\)"
)
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def read_concept(plan: Plan, root: str, key: str) -> Concept:
    """Read and parse one included concept file, opening nothing a symlink
    points to (spec §11) and never blocking on a special file."""
    from ctindex.providers import INDEX_PROVIDER, load
    from ctindex.providers.base import ProviderError

    found = plan.find_scope(key)
    provider = load(found[0].provider if found else INDEX_PROVIDER)
    t0 = time.perf_counter()
    path = plan.project.path(key)
    limit = plan.settings.max_file_bytes
    try:
        before = os.lstat(path)
        fd = os.open(path, _CONCEPT_FLAGS)
    except FileNotFoundError:
        raise ConceptNotFound(provider.concept_id(key, root)) from None
    except OSError as exc:
        raise ConceptUnreadable(f"{key}: cannot open ({exc.strerror or exc})") from exc
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise ConceptUnreadable(f"{key}: changed while it was opened; ask again")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConceptUnreadable(f"{key}: larger than max_file_bytes ({limit}); not a concept")
    doc = provider.parse(key, data, root)
    if isinstance(doc, ProviderError):
        raise ConceptUnreadable(doc.message)
    text = data.decode("utf-8-sig")
    frontmatter, problem = _frontmatter(text)
    warning = doc.warning or (f"{key}: {problem}" if problem else None)
    from ctindex.query import freshness

    fresh = Freshness._of(freshness.read_when_asked(_ms(time.perf_counter() - t0)))
    return Concept(
        doc.concept_id,
        doc.scope,
        key,
        doc.title,
        doc.type,
        doc.description,
        tuple(doc.tags),
        frontmatter,
        doc.body,
        text,
        tuple(_links(plan, root, key, doc.body)),
        warning,
        fresh,
    )


def _frontmatter(text: str) -> tuple[dict[str, Any], str | None]:
    """The whole frontmatter mapping as JSON-compatible values, or ({}, why)
    (the provider has already warned about malformed frontmatter). Aliases
    are refused: one alias can stand for a structure exponentially larger
    than the text, which JSON output would have to spell out."""
    from ctindex.providers.frontmatter import MAX_FRONTMATTER_BYTES

    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return {}, None
    lines = text.split("\n")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r") in ("---", "...")), None)
    if end is None:
        return {}, None
    block = "\n".join(lines[1:end])
    if len(block.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        return {}, None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for event in yaml.parse(block, Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                return {}, "frontmatter uses a YAML alias; not shown"
        value = yaml.load(block, Loader=loader)
        plain = _plain(value, 0)
    except (yaml.YAMLError, RecursionError, ValueError):
        return {}, None
    return (plain, None) if isinstance(plain, dict) else ({}, None)


MAX_DEPTH = 32


def _plain(value: Any, depth: int) -> Any:
    """JSON-compatible values: dates as ISO text, keys as text."""
    if depth > MAX_DEPTH:
        raise ValueError("frontmatter nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _links(plan: Plan, root: str, key: str, body: str) -> Iterable[Link]:
    """Inline links in order; a relative `.md` target inside the same scope
    gets the concept ID it names (whether or not that file exists)."""
    import posixpath

    from ctindex.providers import load

    folder = posixpath.dirname(key)
    for m in _LINK_RE.finditer(body):
        text, target = m.group(1), m.group(2)
        cid = None
        path = target.split("#", 1)[0].split("?", 1)[0]
        if path.endswith(".md") and not _SCHEME_RE.match(path) and not path.startswith("/"):
            linked = posixpath.normpath(posixpath.join(folder, path))
            name = posixpath.basename(linked)
            found = plan.find_scope(linked) if is_normal_key(linked) else None
            if found is not None and found[0].root == root and name not in ("index.md", "log.md"):
                cid = load(found[0].provider).concept_id(linked, root)
        yield Link(text, target, cid)
