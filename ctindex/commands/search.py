"""`ctindex search QUERY`: the indexed query (docs/search.md)."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from ctindex.base.output import emit
from ctindex.commands import Context

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.query.freshness import Freshness
    from ctindex.search.execute import Outcome, Result
    from ctindex.service.no_scopes import NoScopes


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
    if ctx.answer is not None and not args.direct:  # the daemon's query path
        fresh, outcome = ctx.answer(ctx.project, node, args.limit)
        return _emit(ctx, text, fresh, outcome, listing, markers=args.markers)
    from ctindex.query import freshness
    from ctindex.search.execute import search_direct, search_snapshot

    missing: NoScopes | None = None

    def load_plan() -> Plan:
        """The slow path's plan (the fast path answers without it)."""
        nonlocal missing
        import gc

        gc.enable()  # the slow path may reconcile or index: collect as usual
        from ctindex.policy.plan import load_plan

        plan = load_plan(ctx.project)
        # Nothing can be indexed: ctindex/query/freshness.py then answers from the
        # empty plan, writing no `.ct/okf/` and starting no daemon
        # (docs/cli.md, "No scopes").
        missing = ctx.no_scopes_note(plan)
        if missing is None and not args.direct:
            _first_build(ctx, plan)
        return plan

    answered = freshness.fresh_answer(
        ctx.project,
        load_plan,
        lambda snap: search_snapshot(snap, node, args.limit),
        from_files=lambda plan: search_direct(str(ctx.project.root), plan, node, args.limit),
        options=freshness.Options(direct=args.direct, plan_hint=True),
    )
    return _emit(ctx, text, answered.freshness, answered.value, listing, missing, args.markers)


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
    from ctindex.indexing.transaction import update

    # A failure here is met again by the freshness call, which handles it as always.
    with contextlib.suppress(CtindexError):
        update(ctx.project, plan, progress=ctx.err)


DEFAULT_LIMIT = 10
ALL = 1 << 62  # --paths/--ids without --limit


def _emit(
    ctx: Context,
    text: str,
    fresh: Freshness,
    outcome: Outcome,
    listing: str | None = None,
    missing: NoScopes | None = None,
    markers: tuple[str, str] | None = None,
) -> int:
    # The generation reported is the one the answer was read from (None for
    # answers from the files), never the one a barrier or an update named: an
    # outside `rebuild` can publish a newer one the daemon has not seen.
    fresh.generation = outcome.generation
    if markers is not None:  # --markers: the snippets wrapped as asked
        from ctindex.search.snippet import mark

        outcome = outcome._replace(
            results=[
                r._replace(snippet=mark(r.snippet_text, r.snippet_matches, *markers))
                for r in outcome.results
            ]
        )
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
        _text(ctx, outcome, fresh, markers)
    return 0 if outcome.total else 1


def _lines(ctx: Context, outcome: Outcome, fresh: Freshness, listing: str) -> None:
    """--paths / --ids: one per line on stdout, best first; the freshness
    statement (every answer carries one) on stderr, silenced by -q."""
    emit(ctx.out, "".join(f"{r.path if listing == 'paths' else r.id}\n" for r in outcome.results))
    where = f"generation {fresh.generation}" if fresh.generation is not None else "no index"
    how = fresh.mode + (f" ({fresh.reason})" if fresh.reason else "")
    ctx.note(f"{len(outcome.results)} of {outcome.total} matches · {where} · {how}")
    for note in (*fresh.notes, *outcome.notes):
        ctx.note(note)


def _text(
    ctx: Context, outcome: Outcome, fresh: Freshness, markers: tuple[str, str] | None
) -> None:
    paint = ctx.paint
    for r in outcome.results:
        tags = f"  [{', '.join(r.tags)}]" if r.tags else ""
        kind = f"  ({r.type})" if r.type else ""
        match = f"  · {r.match} match" if r.match else ""
        score = paint(f"{r.score:7.3f}", None, "dark")
        ctx.echo(f"{score}  {paint(r.id, None, 'bold')}  —  {r.title}{kind}{tags}{match}")
        ctx.echo(f"         {paint(r.path, 'magenta')}")
        if r.snippet:
            ctx.echo(f"         {_snippet(ctx, r, markers) if ctx.colour else r.snippet}")
    shown = len(outcome.results)
    where = f"generation {fresh.generation}" if fresh.generation is not None else "no index"
    how = fresh.mode + (f" ({fresh.reason})" if fresh.reason else "")
    timing = (
        f", reconciled in {fresh.reconcile_ms:.1f} ms" if fresh.reconcile_ms is not None else ""
    )
    if fresh.mode == "watcher-clean" and fresh.barrier_ms is not None:
        # What the freshness cost: the daemon's proof, as JSON's barrier_ms.
        timing = f", barrier {fresh.barrier_ms:.1f} ms{timing}"
    ctx.echo(f"{shown} of {outcome.total} matches · {where} · {how}{timing}")
    if fresh.rebuilt:
        ctx.note(f"index rebuilt before answering: {fresh.rebuilt}")
    for note in (*fresh.notes, *outcome.notes):
        ctx.note(note)


def _snippet(ctx: Context, r: Result, markers: tuple[str, str] | None) -> str:
    """The snippet with its matches highlighted (rg's bold red), wrapped in
    markers only when --markers asked for them: colour shows them already."""
    open_, close = markers or ("", "")
    text, pos = r.snippet_text, 0
    out: list[str] = []
    for start, end in r.snippet_matches:
        out += (text[pos:start], ctx.paint(open_ + text[start:end] + close, "red", "bold"))
        pos = end
    out.append(text[pos:])
    return "".join(out)
