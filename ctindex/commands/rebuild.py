"""`ctindex rebuild`: a fresh index published in one manifest swap
(`--strict` as for `update`, see ctindex/commands/update.py)."""

from __future__ import annotations

import argparse

from ctindex.commands import Context


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.commands.update import finish, strict_kinds
    from ctindex.policy.plan import load_plan
    from ctindex.service.update import run as run_routed

    kinds = strict_kinds(getattr(args, "strict", None))
    plan = load_plan(ctx.project)
    missing = ctx.no_scopes_note(plan)
    # On a share with a host daemon, the host runs it (docs/network-shares.md).
    routed = run_routed(
        ctx.project, plan, "rebuild", progress=None if ctx.quiet or ctx.json else ctx.err
    )
    return finish(ctx, args, routed.report, "rebuild", kinds, missing, routed.share_host)
