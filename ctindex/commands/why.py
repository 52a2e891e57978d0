"""`ctindex why PATH...`: the decision trace of each path (spec §5)."""

from __future__ import annotations

import argparse
from typing import Any

from ctindex.commands import Context
from ctindex.output import show_key
from ctindex.policy.decide import Decision
from ctindex.policy.plan import load_plan


def run(ctx: Context, args: argparse.Namespace) -> int:
    plan = load_plan(ctx.project)
    decisions = [(raw, plan.decide(raw, cwd=ctx.cwd)) for raw in args.paths]
    every = all(decision.included for _raw, decision in decisions)
    if ctx.json:
        ctx.emit_json(
            {
                "project": str(ctx.project.root),
                "all_included": every,
                "decisions": [_document(raw, d) for raw, d in decisions],
            }
        )
    elif not ctx.quiet:
        for _raw, decision in decisions:
            ctx.echo(describe(decision))
    return 0 if every else 1


def _document(raw: str, decision: Decision) -> dict[str, Any]:
    document: dict[str, Any] = {"input": raw}
    document.update(decision.as_dict())
    document["path"] = show_key(decision.path)
    if decision.scope is not None:
        document["scope"] = show_key(decision.scope)
    return document


def describe(decision: Decision) -> str:
    """Two lines: '<path>: <reason>' then what decided it."""
    parts = []
    if decision.scope is not None:
        parts.append(f"scope {show_key(decision.scope)}")
    if decision.pattern is not None:
        parts.append(f"pattern {decision.pattern}")
    if decision.origin is not None:
        parts.append(f"origin {decision.origin}")
    if decision.provider is not None:
        parts.append(f"provider {decision.provider}")
    trace = ", ".join(parts)
    if decision.detail:
        trace = f"{trace}: {decision.detail}" if trace else decision.detail
    head = f"{show_key(decision.path)}: {decision.reason}"
    return f"{head}\n  {trace}" if trace else head
