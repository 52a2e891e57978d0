"""`ctindex verify [--repair]`: the cron-style audit (ctindex/audit/verify.py).

Exit 0: the published generation is intact and matches the files; 1: damage
or drift found (each listed); 2: the audit cannot run (no index, malformed
configuration, the update lock held by another writer). With `--repair`,
damage (or an index built for another plan) is fixed by a rebuild and drift
by an update; the index is then audited again and the exit code is that of
the second audit, the first one's findings still listed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ctindex.audit.verify import Audit
from ctindex.base import printable
from ctindex.base.output import human_bytes, human_count, human_ms
from ctindex.commands import Context
from ctindex.errors import CtindexError

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan


class CannotVerify(CtindexError):
    """The audit could not run (exit 2)."""


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.audit.verify import audit
    from ctindex.policy.plan import load_plan
    from ctindex.store.lock import IndexBusy

    plan = load_plan(ctx.project)
    try:
        found = audit(ctx.project, plan)
    except IndexBusy as exc:
        raise CannotVerify(f"cannot verify: {exc}") from exc
    repaired: dict[str, Any] | None = None
    after = found
    if args.repair and not found.clean:
        repaired = _repair(ctx, plan, found)
        try:
            after = audit(ctx.project, plan)
        except IndexBusy as exc:
            raise CannotVerify(f"repaired, but cannot verify again: {exc}") from exc
    elif not found.exists:
        raise CannotVerify(
            f"cannot verify: no index at {found.index_dir} "
            "(run `ctindex update`, or `verify --repair`)"
        )
    code = 0 if after.clean else 1
    metrics = getattr(args, "metrics_file", None)
    if metrics:
        from ctindex.audit.metrics import verify_metrics, write_textfile

        write_textfile(metrics, verify_metrics(ctx.project, found, after, repaired))
    if ctx.json:
        doc = found.as_dict()
        doc["repaired"] = repaired
        doc["after"] = after.as_dict() if repaired is not None else None
        doc["exit_code"] = code
        ctx.emit_json(doc)
        return code
    if code == 0 and ctx.quiet and repaired is None:
        return 0  # cron: silent when there is nothing to say
    _text(ctx, found)
    if repaired is not None:
        ctx.echo(f"repaired: {repaired['action']} -> generation {repaired['generation']}")
        if not after.clean:
            ctx.echo("after repair:")
            _text(ctx, after)
    ctx.echo("result: " + _verdict(after if repaired is not None else found, args.repair))
    return code


def _repair(ctx: Context, plan: Plan, found: Audit) -> dict[str, Any]:
    from ctindex.indexing.transaction import rebuild, update

    progress = None if ctx.quiet else ctx.err
    if found.damage or found.stale or not found.exists:
        why = (
            "damage: " + found.damage[0]["file"] if found.damage else found.stale or "no index yet"
        )
        report = rebuild(ctx.project, plan, progress=progress, reason=f"verify: {why}")
        action = "rebuild"
    else:
        report = update(ctx.project, plan, progress=progress)
        action = "update"
    return {"action": action, "generation": report.generation, "duration_ms": report.duration_ms}


def _text(ctx: Context, a: Audit) -> None:
    gen = a.generation if a.generation is not None else "none"
    ctx.echo(
        f"generation {gen}: {human_count(a.documents, 'document')} in "
        f"{human_count(a.segments, 'segment')}; read {human_count(a.files_checked, 'file')}"
        f" ({human_bytes(a.bytes_read)}), every checksum checked; reconciled "
        f"{human_count(a.entries_visited, 'entry', 'entries')} in {human_ms(a.reconcile_ms)}"
    )
    # Paths are names, escaped one a line (ctindex/base/printable.py).
    shown = printable.field
    for d in a.damage:
        where = f"{shown(d['file'])}: " if d["file"] else ""
        ctx.echo(f"damaged  {where}{printable.line(d['problem'])}")
    if a.stale:
        ctx.echo(f"stale    the index was built for another policy: {a.stale}")
    for item in a.drift:
        to = f" -> {shown(str(item['to']))}" if item.get("to") else ""
        ctx.echo(f"drift    {item['change']:<10} {shown(str(item['path']))}{to}")
    for line in a.unseen:
        ctx.echo(f"not seen {printable.line(line)}")
    if a.store_mode_warning:
        ctx.echo(f"warning  {a.store_mode_warning}")
    if a.metadata_only:
        ctx.echo(
            f"metadata only (content unchanged, not drift): {human_count(a.metadata_only, 'file')}"
        )


def _verdict(a: Audit, repair: bool) -> str:
    if a.clean:
        return "clean"
    parts = []
    if a.damage:
        parts.append(human_count(len(a.damage), "damaged file"))
    if a.stale:
        parts.append("built for another policy")
    if a.drift:
        parts.append(human_count(len(a.drift), "drifted path"))
    hint = "" if repair else "; `ctindex verify --repair` fixes them"
    return ", ".join(parts) + hint
