"""`ctindex rebuild`: a fresh index published in one manifest swap."""

from __future__ import annotations

import argparse

from ctindex.commands import Context


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.commands.update import emit
    from ctindex.indexer import rebuild
    from ctindex.plan import load_plan

    plan = load_plan(ctx.project)
    report = rebuild(ctx.project, plan, progress=None if ctx.quiet else ctx.err)
    emit(ctx, report, "rebuild")
    return 0
