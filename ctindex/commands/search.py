"""`ctindex search QUERY`: the indexed query (docs/search.md)."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from ctindex.commands import Context

if TYPE_CHECKING:
    from ctindex.client import BarrierFailed, BarrierResult
    from ctindex.commands.no_scopes import NoScopes
    from ctindex.policy.plan import Plan
    from ctindex.search.execute import Outcome
    from ctindex.search.freshness import Freshness
    from ctindex.search.query import Node


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.search.query import parse_query

    text = " ".join(args.query)
    node = parse_query(text)  # a malformed query is a usage error (exit 2)
    listing = (
        "paths" if getattr(args, "paths", False) else "ids" if getattr(args, "ids", False) else None
    )
    if listing and ctx.json:
        from ctindex.errors import UsageError

        raise UsageError("--paths and --ids print lines, not JSON: drop --json or them")
    if args.limit is None:  # like `rg -l`, a listing names every match
        args.limit = ALL if listing else DEFAULT_LIMIT
    prior = None
    if ctx.answer is not None and not args.direct:  # the daemon's query path
        return _emit(ctx, text, *ctx.answer(ctx, node, args.limit), listing=listing)
    if not args.direct:
        answer, prior = _fast(ctx, node, args.limit)
        if answer is not None:
            return _emit(ctx, text, *answer, listing=listing)
    import gc

    gc.enable()  # the slow path may reconcile or index: collect as usual
    from ctindex.policy.plan import load_plan

    plan = load_plan(ctx.project)
    from ctindex.commands.no_scopes import report

    missing = report(ctx, plan)
    if missing is not None and not args.direct:
        # Nothing can be indexed: answer from the empty plan, writing no
        # `.ct/okf/` and starting no daemon that would watch nothing for
        # `idle_seconds` (docs/cli.md, "No scopes").
        from ctindex.search.execute import Outcome
        from ctindex.search.freshness import Freshness

        nothing = Freshness("direct", "no scopes: nothing to index", None)
        return _emit(ctx, text, nothing, Outcome([], 0, None, frozenset()), listing, missing)
    if args.direct:
        from ctindex.search.execute import search_direct
        from ctindex.search.freshness import Freshness

        fresh = Freshness("direct", "answered from the files, without the index", None)
        outcome = search_direct(str(ctx.project.root), plan, node, args.limit)
    else:
        from ctindex.client import ensure_fresh
        from ctindex.search.execute import search_index
        from ctindex.search.freshness import answer_from_files, answer_repairing
        from ctindex.store.lock import IndexBusy, IndexReadOnly

        _first_build(ctx, plan)
        try:
            fresh = ensure_fresh(ctx.project, plan, prior)
            outcome = answer_repairing(
                ctx.project,
                plan,
                fresh,
                lambda: search_index(ctx.project.index_dir, node, args.limit),
            )
        except IndexBusy as busy:  # a stopped or slow writer holds the update lock
            fresh, outcome = answer_from_files(ctx.project, plan, node, args.limit, busy)
        except IndexReadOnly as denied:  # behind the files and cannot be written
            fresh, outcome = answer_from_files(
                ctx.project, plan, node, args.limit, denied, why="read-only index"
            )
        from ctindex import fastpath

        fastpath.remember(ctx.project, plan)
    return _emit(ctx, text, fresh, outcome, listing, missing)


def _first_build(ctx: Context, plan: Plan) -> None:
    """The project's first index, built with a progress bar when someone
    watches stderr on a terminal: on a big tree the build inside the
    freshness call below takes seconds with nothing on screen. Never under
    --json or -q, never when stderr is piped (Progress checks isatty). The
    freshness call then finds the index current (one more stat walk)."""
    if ctx.json or ctx.quiet or (ctx.project.index_dir / "MANIFEST").exists():
        return
    try:
        terminal = ctx.err.isatty()
    except (AttributeError, ValueError):  # a closed or bare stream
        terminal = False
    if not terminal:
        return
    from ctindex.errors import CtindexError
    from ctindex.indexer import update

    # A failure here is met again by the freshness call, which handles it as always.
    with contextlib.suppress(CtindexError):
        update(ctx.project, plan, progress=ctx.err)


DEFAULT_LIMIT = 10
ALL = 1 << 62  # --paths/--ids without --limit

Answer = tuple["Freshness", "Outcome"]
Prior = tuple[str, "BarrierResult | BarrierFailed"]  # (plan digest, the barrier's outcome)


def _fast(ctx: Context, node: Node, limit: int) -> tuple[Answer | None, Prior | None]:
    """A healthy daemon's answer without loading the plan (ctindex.fastpath).
    Returns ((freshness, outcome), None), or (None, what the slow path may
    reuse: (plan digest, the barrier's result or failure) or None)."""
    from ctindex import fastpath

    hint = fastpath.recall(ctx.project)
    if hint is None:
        return None, None
    from ctindex.client import fast_barrier

    got = fast_barrier(ctx.project, hint)
    if got is None:
        return None, None
    if isinstance(got, Exception) or not got.trusted_events or got.reconciled:
        return None, (hint.digest, got)  # the slow path words (or handles) these
    from ctindex.search.execute import PlanMismatch, search_index
    from ctindex.search.freshness import Freshness
    from ctindex.store.durable import IndexCorrupt

    try:
        outcome = search_index(
            ctx.project.index_dir, node, limit, expect=(hint.digest, got.generation)
        )
    except PlanMismatch:
        return None, None  # not the index the daemon vouched for: start over
    except (IndexCorrupt, OSError):
        return None, (hint.digest, got)  # the slow path repairs the index
    fresh = Freshness("watcher-clean", None, got.generation, barrier_ms=got.barrier_ms)
    return (fresh, outcome), None


def _emit(
    ctx: Context,
    text: str,
    fresh: Freshness,
    outcome: Outcome,
    listing: str | None = None,
    missing: NoScopes | None = None,
) -> int:
    # The generation reported is the one the answer was read from (None for
    # answers from the files), never the one a barrier or an update named: an
    # outside `rebuild` can publish a newer one the daemon has not seen.
    fresh.generation = outcome.generation
    if ctx.json:
        document = {
            "query": text,
            "results": [r.to_json() for r in outcome.results],
            "total": outcome.total,
            "freshness": fresh.to_json(),
            "notes": list(outcome.notes),
        }
        if missing is not None:  # only then: every other answer stays as it was
            document["no_scopes"] = missing.to_json()
        ctx.emit_json(document)
    elif listing is not None:
        _lines(ctx, outcome, fresh, listing)
    else:
        _text(ctx, outcome, fresh)
    return 0 if outcome.total else 1


def _lines(ctx: Context, outcome: Outcome, fresh: Freshness, listing: str) -> None:
    """--paths / --ids: one per line on stdout, best first; the freshness
    statement (every answer carries one) on stderr, silenced by -q."""
    ctx.out.write("".join(f"{r.path if listing == 'paths' else r.id}\n" for r in outcome.results))
    where = f"generation {fresh.generation}" if fresh.generation is not None else "no index"
    how = fresh.mode + (f" ({fresh.reason})" if fresh.reason else "")
    ctx.note(f"{len(outcome.results)} of {outcome.total} matches · {where} · {how}")
    for note in (*fresh.notes, *outcome.notes):
        ctx.note(note)


def _text(ctx: Context, outcome: Outcome, fresh: Freshness) -> None:
    for r in outcome.results:
        tags = f"  [{', '.join(r.tags)}]" if r.tags else ""
        kind = f"  ({r.type})" if r.type else ""
        match = f"  · {r.match} match" if r.match else ""
        ctx.echo(f"{r.score:7.3f}  {r.id}  —  {r.title}{kind}{tags}{match}")
        ctx.echo(f"         {r.path}")
        if r.snippet:
            ctx.echo(f"         {r.snippet}")
    shown = len(outcome.results)
    where = f"generation {fresh.generation}" if fresh.generation is not None else "no index"
    how = fresh.mode + (f" ({fresh.reason})" if fresh.reason else "")
    timing = (
        f", reconciled in {fresh.reconcile_ms:.1f} ms" if fresh.reconcile_ms is not None else ""
    )
    if fresh.mode == "watcher-clean" and fresh.barrier_ms is not None:
        # What the freshness cost: the daemon's proof (spec §7), as JSON's barrier_ms.
        timing = f", barrier {fresh.barrier_ms:.1f} ms{timing}"
    ctx.echo(f"{shown} of {outcome.total} matches · {where} · {how}{timing}")
    if fresh.rebuilt:
        ctx.note(f"index rebuilt before answering: {fresh.rebuilt}")
    for note in (*fresh.notes, *outcome.notes):
        ctx.note(note)
