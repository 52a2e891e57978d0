"""`ctindex search QUERY`: the indexed query (docs/search.md)."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from ctindex.base import printable
from ctindex.base.output import emit
from ctindex.commands import Context

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.query.statement import Freshness
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
        from ctindex.service.search import finish

        fresh, outcome = finish(ctx.project.root, *ctx.answer(ctx.project, node, args.limit))
        return _emit(ctx, text, fresh, outcome, listing, markers=args.markers)
    from ctindex.query import freshness
    from ctindex.service.search import search

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

    found = search(
        ctx.project,
        load_plan,
        node,
        args.limit,
        freshness.Options(direct=args.direct, plan_hint=True),
    )
    return _emit(ctx, text, found.freshness, found.outcome, listing, missing, args.markers)


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
    # (The answer is finished: ctindex/service/search.py `finish`.)
    if markers is not None:  # --markers: the snippets wrapped as asked
        from ctindex.search.snippet import mark

        outcome = outcome._replace(
            results=[
                r._replace(snippet=mark(r.snippet_text, r.snippet_matches, *markers))
                for r in outcome.results
            ]
        )
    if ctx.json:
        from ctindex.service.search import as_data

        document: dict[str, object] = {"query": text, **as_data(fresh, outcome)}
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
    statement (every answer carries one) on stderr, silenced by -q.

    A line is the name escaped (ctindex/base/printable.py `field`: a newline
    or an ESC in a folder name cannot split or hide an entry, and distinct
    names stay distinct); with -0 an entry is the name as it is, ended by a
    NUL, as `find -print0` and `rg -0` write them for `xargs -0`: stdout is
    written with surrogateescape (ctindex/cli.py main, ctindex/fast_entry.py
    _print), so a name that is not UTF-8 is its own bytes."""
    names = (r.path if listing == "paths" else r.ref for r in outcome.results)
    if ctx.null:
        emit(ctx.out, "".join(f"{name}\0" for name in names))
    else:
        emit(ctx.out, "".join(f"{printable.field(name)}\n" for name in names))
    where = f"generation {fresh.generation}" if fresh.generation is not None else "no index"
    how = fresh.mode + (f" ({fresh.reason})" if fresh.reason else "")
    ctx.note(f"{len(outcome.results)} of {outcome.total} matches · {where} · {how}")
    for note in (*fresh.notes, *outcome.notes):
        ctx.note(note)


def _text(
    ctx: Context, outcome: Outcome, fresh: Freshness, markers: tuple[str, str] | None
) -> None:
    # Every string of a result is data from a file or a name: escaped before
    # it is painted (ctindex/base/printable.py), so that none of its own
    # control sequences reaches the terminal, whatever --color says, and each
    # painted piece ends in termcolor's reset: the freshness line below
    # starts with no attribute of the lines above, and no document can hide
    # or forge it (docs/cli.md, "Control characters in output").
    paint, shown = ctx.paint, printable.field
    for r in outcome.results:
        tags = f"  [{', '.join(map(shown, r.tags))}]" if r.tags else ""
        kind = f"  ({shown(r.type)})" if r.type else ""
        match = f"  · {r.match} match" if r.match else ""
        score = paint(f"{r.score:7.3f}", None, "dark")
        ctx.echo(
            f"{score}  {paint(shown(r.ref), None, 'bold')}  —  {shown(r.title)}{kind}{tags}{match}",
            painted=True,
        )
        ctx.echo(f"         {paint(shown(r.path), 'magenta')}", painted=True)
        if r.snippet:
            ctx.echo(f"         {_snippet(ctx, r, markers)}", painted=True)
    count = len(outcome.results)
    where = f"generation {fresh.generation}" if fresh.generation is not None else "no index"
    how = fresh.mode + (f" ({fresh.reason})" if fresh.reason else "")
    timing = (
        f", reconciled in {fresh.reconcile_ms:.1f} ms" if fresh.reconcile_ms is not None else ""
    )
    if fresh.mode == "watcher-clean" and fresh.barrier_ms is not None:
        # What the freshness cost: the daemon's proof, as JSON's barrier_ms.
        timing = f", barrier {fresh.barrier_ms:.1f} ms{timing}"
    # One line even when a reason quotes a name (ctindex/base/printable.py).
    ctx.echo(printable.line(f"{count} of {outcome.total} matches · {where} · {how}{timing}"))
    if fresh.rebuilt:
        ctx.note(f"index rebuilt before answering: {fresh.rebuilt}")
    for note in (*fresh.notes, *outcome.notes):
        ctx.note(note)


def _snippet(ctx: Context, r: Result, markers: tuple[str, str] | None) -> str:
    """The snippet, its text escaped piece by piece (ctindex/base/printable.py),
    its matches wrapped in the --markers (default « and ») and, with colour,
    highlighted (rg's bold red) and wrapped in markers only when --markers
    asked for them: colour shows them already."""
    if markers is None and not ctx.colour:
        from ctindex.search.snippet import CLOSE, OPEN

        markers = (OPEN, CLOSE)
    open_, close = markers or ("", "")
    text, pos = r.snippet_text, 0
    out: list[str] = []
    for start, end in r.snippet_matches:
        word = open_ + printable.field(text[start:end]) + close
        out += (printable.field(text[pos:start]), ctx.paint(word, "red", "bold"))
        pos = end
    out.append(printable.field(text[pos:]))
    return "".join(out)
