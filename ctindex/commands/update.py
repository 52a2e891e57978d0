"""`ctindex update`: explicit full reconciliation (docs/cli.md).

`--strict[=KINDS]` (also on `rebuild`) makes CI fail on what the index
could not take in: `errors` (provider errors: not UTF-8, NUL bytes, ...),
`warnings` (malformed frontmatter, indexed as text) and `missing-roots`
(a configured scope root that is not there). Every such file is named on
stderr, one line each, and the exit code is 2. The index is still updated
and published: strictness judges the result, it does not veto it. Without
`--strict` the text names the first few files of each kind and the count.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctindex.base import printable
from ctindex.base.output import human_ms
from ctindex.commands import Context
from ctindex.errors import UsageError
from ctindex.service.update_problems import PROBLEM_KINDS, problems

if TYPE_CHECKING:
    from ctindex.indexing.transaction import UpdateReport
    from ctindex.service.no_scopes import NoScopes

STRICT_KINDS = PROBLEM_KINDS
SHOWN = 5  # files named per kind in the text output without --strict


def strict_kinds(value: str | None) -> frozenset[str]:
    """The kinds `--strict[=KINDS]` names (empty: not strict)."""
    if value is None:
        return frozenset()
    if value == "all":
        return frozenset(STRICT_KINDS)
    kinds = frozenset(k.strip() for k in value.split(",") if k.strip())
    unknown = sorted(kinds - set(STRICT_KINDS))
    if unknown or not kinds:
        raise UsageError(
            f"--strict: unknown kind {', '.join(map(repr, unknown)) or '(none)'} "
            f"(known: {', '.join(STRICT_KINDS)})"
        )
    return kinds


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.policy.plan import load_plan
    from ctindex.service.update import run as run_routed

    kinds = strict_kinds(getattr(args, "strict", None))
    plan = load_plan(ctx.project)
    missing = ctx.no_scopes_note(plan)
    # On a share with a host daemon, the host runs it (docs/network-shares.md).
    routed = run_routed(
        ctx.project, plan, "update", progress=None if ctx.quiet or ctx.json else ctx.err
    )
    return finish(ctx, args, routed.report, "update", kinds, missing, routed.share_host)


_LABEL = {
    "errors": "provider error",
    "warnings": "frontmatter warning",
    "missing-roots": "missing scope root",
}


def finish(
    ctx: Context,
    args: argparse.Namespace,
    report: UpdateReport,
    verb: str,
    kinds: frozenset[str],
    missing: NoScopes | None = None,
    share_host: str | None = None,
) -> int:
    found = problems(ctx.project, report.missing_roots)
    failing = {k: v for k, v in found.items() if k in kinds and v}
    code = 2 if failing else 0
    metrics = getattr(args, "metrics_file", None)
    if metrics:
        from ctindex.audit.metrics import update_metrics, write_textfile

        write_textfile(
            metrics, update_metrics(ctx.project, verb, report, len(report.missing_roots), code == 0)
        )
    if ctx.json:
        from ctindex.service.types import update_report_of

        doc = update_report_of(report, found).to_json()
        doc["strict"] = sorted(kinds)
        doc["exit_code"] = code
        if missing is not None:  # only then, as in search's document
            doc["no_scopes"] = missing.to_json()
        if share_host is not None:  # run by the share host's daemon
            doc["share_host"] = share_host
        ctx.emit_json(doc)
    elif not ctx.quiet:  # -q: nothing on success, only the --strict failures below
        emit(ctx, report, verb, share_host)
        reserved_lines(ctx, len(report.reserved), report.reserved, getattr(args, "verbose", False))
        for kind in STRICT_KINDS:
            items = found[kind]
            if kind in failing or not items:
                continue
            for item in items[:SHOWN]:
                ctx.echo(f"  {_LABEL[kind]}: {_item(item)}")
            if len(items) > SHOWN:
                ctx.echo(
                    f"  ... {len(items) - SHOWN} more {_LABEL[kind]}s "
                    f"({len(items)} in all; `ctindex status --verbose` lists them)"
                )
    for kind, items in failing.items():
        for item in items:
            ctx.err.write(f"ctindex: strict: {_LABEL[kind]}: {_item(item)}\n")
    if failing:
        counts = ", ".join(
            f"{len(v)} {_LABEL[k]}{'s' if len(v) != 1 else ''}" for k, v in failing.items()
        )
        ctx.err.write(f"ctindex: --strict: {counts} (the index was still published)\n")
    return code


def reserved_lines(ctx: Context, count: int, paths: Sequence[str] | None, verbose: bool) -> None:
    """`reserved: N (...)`: files a full pass skipped for their reserved
    name are counted, never silently left out; with --verbose, `paths` (all
    of them, or the first of `count`: `status` reads a capped record)."""
    if not count:
        return
    ctx.echo(
        f"reserved: {count:,} (index.md and log.md are never indexed"
        + ("" if verbose else "; paths with --verbose")
        + ")"
    )
    if verbose and paths is not None:
        for path in paths:
            ctx.echo(f"  reserved  {printable.field(path)}")
        if len(paths) < count:
            ctx.echo(f"  ... {count - len(paths):,} more")


def _item(item: dict[str, str]) -> str:
    """'<path>: <message>', one line: the path a name, escaped as such
    (ctindex/base/printable.py)."""
    return f"{printable.field(item['path'])}: {printable.line(item['message'])}"


def emit(ctx: Context, report: UpdateReport, verb: str, share_host: str | None = None) -> None:
    r = report
    if r.rebuilt:
        head = f"rebuilt ({r.reason})" if verb == "update" else "rebuilt"
    elif r.published:
        head = "updated"
    else:
        head = "up to date"
    ctx.echo(
        f"{head}: generation {r.generation}, {r.documents:,} documents; "
        f"+{r.added} added, ~{r.changed} changed, -{r.removed} removed, "
        f"{r.renamed} renamed, {r.metadata_only} metadata-only; "
        f"{r.errors} provider errors, {r.warnings} frontmatter warnings; "
        f"reconciled {r.entries_visited:,} entries in {human_ms(r.reconcile_ms)}, "
        f"total {human_ms(r.duration_ms)}"
        + (f"; by share host {share_host}" if share_host is not None else "")
    )
    for note in r.notes:
        ctx.note(note)
