"""`ctindex update`: explicit full reconciliation (PRODUCT.md §2)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ctindex.commands import Context
from ctindex.output import human_ms

if TYPE_CHECKING:
    from ctindex.indexer import UpdateReport


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.indexer import update
    from ctindex.plan import load_plan

    plan = load_plan(ctx.project)
    report = update(ctx.project, plan, progress=None if ctx.quiet else ctx.err)
    emit(ctx, report, "update")
    return 0


def emit(ctx: Context, report: UpdateReport, verb: str) -> None:
    if ctx.json:
        ctx.emit_json(report.as_dict())
        return
    r = report
    if r.rebuilt:
        head = f"rebuilt ({r.reason})" if verb == "update" else "rebuilt"
    elif r.published:
        head = "updated"
    else:
        head = "up to date"
    ctx.echo(f"{head}: generation {r.generation}, {r.documents:,} documents; "
             f"+{r.added} added, ~{r.changed} changed, -{r.removed} removed, "
             f"{r.renamed} renamed, {r.metadata_only} metadata-only; "
             f"{r.errors} provider errors, {r.warnings} frontmatter warnings; "
             f"reconciled {r.entries_visited:,} entries in {human_ms(r.reconcile_ms)}, "
             f"total {human_ms(r.duration_ms)}")
    for note in r.notes:
        ctx.note(note)
