"""The Python API: ``ctindex.Index`` (docs/api.md).

One ``Index`` is one project opened for the life of a process (an agent
host, the MCP server, a notebook). It answers with the same internals as
the CLI, so its answers equal ``ctindex --json``'s (tests/ctindex/test_api.py), and
it proves freshness on every query exactly as the CLI does: the
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

Every public method checks the types of its arguments first and raises
``WrongType`` (a ``UsageError`` and a ``TypeError``) naming the argument,
before anything is read: a wrong type never gets as far as an
``AttributeError`` deep inside (docs/api.md, "Errors").
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ctindex.errors import UsageError, WrongType
from ctindex.policy.project import Project, StrPath, find_root, start_folder
from ctindex.service.types import (
    Concept,
    ConceptPage,
    ConceptSummary,
    Freshness,
    Hit,
    Link,
    ScopeList,
    ScopeSummary,
    SearchResult,
    Status,
    Timings,
    UpdateReport,
    freshness_of,
)

if TYPE_CHECKING:
    from ctindex.indexing import transaction
    from ctindex.policy.decide import Decision
    from ctindex.policy.plan import Plan
    from ctindex.query.freshness import Answered
    from ctindex.search.query import Node
    from ctindex.store.snapshot import Snapshot

T = TypeVar("T")
MAX_PAGE = 1000  # the largest page `Index.concepts` returns at once
EVERY = 1 << 62  # a listing's limit that takes every concept

__all__ = [
    "Concept",
    "ConceptPage",
    "ConceptSummary",
    "Freshness",
    "Hit",
    "Index",
    "Link",
    "ScopeList",
    "ScopeSummary",
    "SearchResult",
    "Status",
    "Timings",
    "UpdateReport",
]


# -- the index ---------------------------------------------------------------------


class Index:
    """A project's index, opened once and queried many times.

    `path`: any folder of the project (default: the working directory); the
    project is found from it as the CLI finds it from ``-C`` (the nearest
    folder at or above with ``.ct/`` or ``.git``). ``UsageError`` when there
    is none: an index needs a project to live in."""

    def __init__(self, path: StrPath | None = None) -> None:
        _takes_path("Index", "path", path, none=True)
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
        from ctindex.ipc.protocol import Keeper
        from ctindex.store.snapshot import OpenGeneration

        self._open = OpenGeneration(Path(self.project.index_dir))
        self._keeper = Keeper()  # the daemon connection its barriers reuse

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
        """Close the open generation's files and the daemon connection (the
        object stays usable)."""
        with self._lock:
            self._open.close()
            self._keeper.close()

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
            open_generation=self._kept,
            options=freshness.Options(overlap=True, keeper=self._keeper),
        )

    # -- queries --------------------------------------------------------------------

    def search(self, query: str, limit: int = 10, direct: bool = False) -> SearchResult:
        """The indexed query (docs/search.md); with `direct`, the same query
        answered by reading the files (the built-in oracle). Raises
        QueryError for a malformed query."""
        from ctindex.query import freshness
        from ctindex.search.query import parse_query
        from ctindex.service.search import search

        _takes("search", "query", query, str)
        _takes("search", "limit", limit, int)
        _takes("search", "direct", direct, bool)
        if limit < 1:
            raise UsageError(f"limit must be a whole number of at least 1, not {limit!r}")
        t0 = time.perf_counter()
        node: Node = parse_query(query)
        with self._lock:
            plan = self.plan()
            if direct:
                found = search(
                    self.project, lambda: plan, node, limit, freshness.Options(direct=True)
                )
            else:  # as _indexed: the kept generation and the kept connection
                found = search(
                    self.project,
                    lambda: plan,
                    node,
                    limit,
                    freshness.Options(overlap=True, keeper=self._keeper),
                    open_generation=self._kept,
                )
            fresh, outcome = found.freshness, found.outcome
        t2 = time.perf_counter()
        # The read may have run while the daemon answered the barrier
        # (ctindex/query/freshness.py _EarlyRead): the rest of the call is
        # counted as proving freshness.
        query_s = found.read_s
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
                r.ref,
            )
            for r in outcome.results
        )
        return SearchResult(
            query,
            hits,
            outcome.total,
            freshness_of(fresh),
            tuple(outcome.notes),
            Timings(_ms(t2 - t0 - query_s), _ms(query_s), _ms(t2 - t0)),
        )

    def get(self, concept_id: str, scope: str | None = None) -> Concept:
        """The concept with this ID: its path relative to its scope root,
        without `.md` (OKF's concept ID). When several scopes hold it, name
        the one meant by `scope` (its root) or pass the project-relative
        path instead. Read from the file itself, so never stale.

        Raises ConceptNotFound (with close matches), AmbiguousConcept, or
        ConceptUnreadable."""
        from ctindex.service.concepts import get_concept

        _takes("get", "concept_id", concept_id, str)
        _takes("get", "scope", scope, str, none=True)
        with self._lock:
            return get_concept(self.plan(), concept_id, scope, self._kept)

    def ids(self) -> list[str]:
        """Every concept ID of a fresh index, sorted (with duplicates when
        two scopes hold the same ID)."""
        from ctindex.service.concepts import fresh_ids

        with self._lock:
            return sorted(cid for cid, _key in fresh_ids(self.plan(), self._kept))

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

        _takes("concepts", "type", type, str, none=True)
        _takes("concepts", "tag", tag, str, none=True)
        _takes("concepts", "prefix", prefix, str)
        _takes("concepts", "offset", offset, int)
        _takes("concepts", "limit", limit, int)
        for name, value, low, high in (("offset", offset, 0, None), ("limit", limit, 1, MAX_PAGE)):
            if value < low:
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
            freshness_of(fresh),
            listing.notes,
        )

    def scopes(self) -> ScopeList:
        """Every scope of the plan with its provider and the number of its
        concepts in a fresh index (counted from the files when the index
        cannot be brought up to date)."""
        from ctindex.search.listing import list_direct, list_snapshot

        with self._lock:
            plan = self.plan()

            def counted(listed: list[tuple[str, str]]) -> dict[str, int]:
                counts: dict[str, int] = {}
                for _cid, key in listed:
                    found = plan.find_scope(key)
                    if found is not None:
                        counts[found[0].root] = counts.get(found[0].root, 0) + 1
                return counts

            def from_index(snap: Snapshot) -> dict[str, int]:
                listing = list_snapshot(snap, plan, None, "", 0, EVERY)
                return counted([(c.id, c.path) for c in listing.concepts])

            def from_files(plan: Plan) -> dict[str, int]:
                listing = list_direct(str(self.project.root), plan, None, "", 0, EVERY)
                return counted([(c.id, c.path) for c in listing.concepts])

            answered = self._indexed(plan, from_index, from_files)
        counts = answered.value
        return ScopeList(
            tuple(ScopeSummary(s.root, s.provider, counts.get(s.root, 0)) for s in plan.scopes),
            freshness_of(answered.freshness),
        )

    def _kept(self, read: Callable[[Snapshot], T]) -> T:
        """`read` the kept generation (the freshness step's opener)."""
        return read(self._generation())

    def why(self, path: StrPath, cwd: StrPath | None = None) -> Decision:
        """The decision for one path: a relative `path` is taken
        from `cwd`, by default the project root."""
        _takes_path("why", "path", path)
        _takes_path("why", "cwd", cwd, none=True)
        with self._lock:
            return self.plan().decide(path, cwd=cwd)

    def status(self, verbose: bool = False) -> Status:
        """The index's and the watcher's metrics, as `ctindex status` reports them. Never
        starts a daemon."""
        from ctindex.service.status import collect, status_of

        _takes("status", "verbose", verbose, bool)
        with self._lock:
            return status_of(collect(self.project, verbose))

    def update(self) -> UpdateReport:
        """A full reconciliation (`ctindex update`); publishes a generation
        only if something changed; by the share host's daemon on a share
        where one runs (docs/network-shares.md)."""
        from ctindex.service.update import run

        with self._lock:
            return self._report(run(self.project, self.plan(), "update").report)

    def rebuild(self) -> UpdateReport:
        """A fresh index, published atomically (`ctindex rebuild`); by the
        share host's daemon on a share where one runs."""
        from ctindex.service.update import run

        with self._lock:
            return self._report(run(self.project, self.plan(), "rebuild").report)

    def _report(self, report: transaction.UpdateReport) -> UpdateReport:
        from ctindex.service.types import update_report_of
        from ctindex.service.update_problems import problems

        return update_report_of(report, problems(self.project, report.missing_roots))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# -- argument types -------------------------------------------------------------------


def _takes(call: str, parameter: str, value: object, kind: type, *, none: bool = False) -> None:
    """WrongType unless `value` is a `kind` or, with `none`, None. A bool is
    no int here, though Python makes it one: `limit=True` is a mistake."""
    if (value is None and none) or (
        isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    ):
        return
    raise WrongType(call, parameter, kind.__name__ + (" or None" if none else ""), type(value))


def _takes_path(call: str, parameter: str, value: object, *, none: bool = False) -> None:
    """WrongType unless `value` is a text path (`StrPath`): a str, or an
    os.PathLike whose path is a str; or, with `none`, None. A bytes path is
    refused: the API's paths are text (os.fsdecode turns bytes into it)."""
    if (value is None and none) or isinstance(value, str):
        return
    if isinstance(value, os.PathLike):
        with contextlib.suppress(TypeError):  # __fspath__ gave neither str nor bytes
            if isinstance(os.fspath(value), str):
                return
    expected = "str, os.PathLike or None" if none else "str or os.PathLike"
    raise WrongType(call, parameter, expected, type(value))
