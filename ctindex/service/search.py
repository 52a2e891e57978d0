"""The indexed search, written once: prove freshness, read the answer from
the generation proven (or from the files where the index cannot be
brought up to date, or with `direct`), then finish it as every caller
shows it. The CLI's `search` (ctindex/commands/search.py), the Python API
(ctindex/api.py `Index.search`, which the MCP server answers with) and the
daemon (which runs the CLI's command on a generation it vouched for:
ctindex/daemon/query.py) all come through here; each keeps only how it
renders the answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ctindex.ipc.protocol import SearchHit, SearchResult
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.query.freshness import Options
    from ctindex.query.statement import Freshness, Opener
    from ctindex.search.execute import Outcome, Result
    from ctindex.search.query import Node
    from ctindex.store.snapshot import Snapshot


class Searched(NamedTuple):
    freshness: Freshness
    outcome: Outcome
    # Seconds the read itself took (the last read made: a repaired index is
    # read again); the rest of the call proved freshness.
    read_s: float


def search(
    project: Project,
    load_plan: Callable[[], Plan],
    node: Node,
    limit: int,
    options: Options,
    *,
    open_generation: Opener[Outcome] | None = None,
) -> Searched:
    """The fresh answer to `node` (its first `limit` results), finished."""
    from ctindex.query import freshness as fresh_step
    from ctindex.search.execute import search_direct, search_snapshot

    reads: list[float] = []

    def from_index(snap: Snapshot) -> Outcome:
        started = time.perf_counter()
        try:
            return search_snapshot(snap, node, limit)
        finally:
            reads.append(time.perf_counter() - started)

    def from_files(plan: Plan) -> Outcome:
        started = time.perf_counter()
        try:
            return search_direct(str(project.root), plan, node, limit)
        finally:
            reads.append(time.perf_counter() - started)

    answered = fresh_step.fresh_answer(
        project,
        load_plan,
        from_index,
        from_files=from_files,
        open_generation=open_generation,
        options=options,
    )
    fresh, outcome = finish(project.root, answered.freshness, answered.value)
    return Searched(fresh, outcome, reads[-1] if reads else 0.0)


def finish(root: Path, fresh: Freshness, outcome: Outcome) -> tuple[Freshness, Outcome]:
    """What every caller shows: the generation the answer was read from
    (None for answers from the files), never the one a barrier or an update
    named (an outside `rebuild` can publish a newer one the daemon has not
    seen); and each result's ID unique across scopes, as `show` takes it
    (ctindex/search/refs.py)."""
    fresh.generation = outcome.generation
    return fresh, outcome.with_refs(root)


def as_data(fresh: Freshness, outcome: Outcome) -> SearchResult:
    """A finished answer as data: the `search --json` document without its
    query (docs/cli.md); what the daemon sends beside its text
    (ctindex/daemon/query.py)."""
    return {
        "results": [_hit(r) for r in outcome.results],
        "total": outcome.total,
        "freshness": fresh.to_json(),
        "notes": list(outcome.notes),
    }


def _hit(r: Result) -> SearchHit:
    return {
        "id": r.id,
        "scope": r.scope,
        "path": r.path,
        "title": r.title,
        "type": r.type,
        "tags": list(r.tags),
        "score": r.score,
        "snippet": r.snippet,
        "match": r.match,
        "snippet_text": r.snippet_text,
        "snippet_matches": [list(span) for span in r.snippet_matches],
        "ref": r.ref,
    }
