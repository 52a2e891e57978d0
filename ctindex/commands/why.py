"""`ctindex why PATH...`: the decision trace of each path, computed
by ctindex/service/why.py."""

from __future__ import annotations

import argparse

from ctindex.base import printable
from ctindex.base.output import show_key
from ctindex.commands import Context
from ctindex.policy.decide import Decision
from ctindex.policy.plan import load_plan
from ctindex.service.why import explained, why_document


def run(ctx: Context, args: argparse.Namespace) -> int:
    plan = load_plan(ctx.project)
    decisions = [plan.decide(raw, cwd=ctx.cwd) for raw in args.paths]
    if ctx.json:
        document = why_document(plan, args.paths, decisions)
        ctx.emit_json(document)
        return 0 if document["all_included"] else 1
    found = explained(plan, decisions)
    if not ctx.quiet:
        for decision, hint in found:
            hinted = f"\n  hint: {printable.line(hint)}" if hint else ""
            ctx.echo(describe(decision) + hinted)
    return 0 if all(decision.included for decision, _hint in found) else 1


def describe(decision: Decision) -> str:
    """Two lines: '<path>: <reason>' then what decided it. The path, scope
    and pattern are names (ctindex/base/printable.py `field`: a newline in
    one cannot make a third line), the detail a message quoting them."""
    shown = printable.field
    parts = []
    if decision.scope is not None:
        parts.append(f"scope {shown(show_key(decision.scope))}")
    if decision.pattern is not None:
        parts.append(f"pattern {shown(decision.pattern)}")
    if decision.origin is not None:
        parts.append(f"origin {shown(decision.origin)}")
    if decision.provider is not None:
        parts.append(f"provider {shown(decision.provider)}")
    trace = ", ".join(parts)
    if decision.detail:
        detail = printable.line(decision.detail)
        trace = f"{trace}: {detail}" if trace else detail
    head = f"{shown(show_key(decision.path))}: {decision.reason}"
    return f"{head}\n  {trace}" if trace else head
