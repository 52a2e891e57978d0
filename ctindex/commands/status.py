"""`ctindex status`: the metrics of the index and of the watcher
(collected by ctindex/service/status.py), text or JSON."""

from __future__ import annotations

import argparse
import time

from ctindex.base import printable
from ctindex.base.output import human_bytes, human_count, human_ms
from ctindex.commands import Context
from ctindex.service.status import collect, exit_code, status_json


def run(ctx: Context, args: argparse.Namespace) -> int:
    verbose = getattr(args, "verbose", False)
    doc = collect(ctx.project, verbose)
    code = exit_code(doc)
    metrics = getattr(args, "metrics_file", None)
    if metrics:
        from ctindex.audit.metrics import status_metrics, write_textfile

        write_textfile(metrics, status_metrics(ctx.project, doc, code == 0))
    if ctx.json:
        ctx.emit_json(status_json(doc))
        return code
    if doc.get("no_scopes"):  # the reason the rest is empty, and the way out (docs/cli.md)
        from ctindex.service.no_scopes import NoScopes

        ctx.note(NoScopes(**doc["no_scopes"]).line())
    if doc["problem"]:
        ctx.echo(f"problem: {doc['problem']}")
    if doc["store_mode_warning"]:
        ctx.echo(f"warning: {doc['store_mode_warning']}")
    gen = doc["generation"] if doc["generation"] is not None else "none (no index yet)"
    ctx.echo(f"generation: {gen}")
    ctx.echo(
        f"documents: {human_count(doc['documents'], 'document')} in "
        f"{human_count(doc['segments'], 'segment')}, "
        f"{human_count(doc['tombstones'], 'tombstone')}"
    )
    ctx.echo(
        f"source: {human_bytes(doc['source_bytes'])} ({doc['source_bytes']:,} bytes); "
        f"index: {human_bytes(doc['index_bytes'])} (live "
        f"{human_bytes(doc['index_live_bytes'])}, retired "
        f"{human_bytes(doc['index_retired_bytes'])} awaiting collection); "
        f"runtime: {human_bytes(doc['runtime_bytes'])}"
    )
    p = doc["provider"]
    ctx.echo(
        f"provider: {p.get('id')} v{p.get('version')}, tokenizer v{p.get('tokenizer_version')}"
        + (f" (stale: {doc['stale']})" if doc["stale"] else "")
    )
    for label, key in (
        ("last reconciliation", "last_reconcile"),
        ("last full reconciliation", "last_full_reconcile"),
    ):
        last = doc[key]
        if not last:
            ctx.echo(f"{label}: none")
            continue
        why = f" ({last['reason']})" if last.get("reason") else ""
        ago = ""
        if isinstance(last.get("at_unix_ms"), int):
            ago = f", {human_ms(time.time() * 1000 - last['at_unix_ms'])} ago"
        ctx.echo(
            f"{label}: {last.get('kind')}{why}, "
            f"{human_count(int(last.get('entries_visited', 0)), 'entry', 'entries')} visited "
            f"in {human_ms(last.get('duration_ms'))}{ago}"
        )
        for line in last.get("problems", []):
            ctx.echo(f"  not seen  {printable.line(line)}")
    _reserved(ctx, doc["last_full_reconcile"], verbose)
    ctx.echo(
        f"provider errors: {doc['provider_errors']:,}; "
        f"frontmatter warnings: {doc['frontmatter_warnings']:,}"
        + (
            ""
            if verbose or not (doc["provider_errors"] or doc["frontmatter_warnings"])
            else " (paths with --verbose)"
        )
    )
    if "share_host" in doc:
        ctx.echo(_share_host_line(doc["share_host"]))
    from ctindex.service.watcher_report import watcher_lines

    for line in watcher_lines(doc["watcher"]):
        ctx.echo(line)
    # Paths are names, escaped one a line (ctindex/base/printable.py).
    for label, key in (("error  ", "errors"), ("warning", "warnings")):
        for item in doc.get(key, []):
            path, message = printable.field(item["path"]), printable.line(item["message"])
            ctx.echo(f"  {label}  {path}: {message}")
    return code


def _share_host_line(host: dict[str, object]) -> str:
    """`share host: …`, for a project on a network share (docs/network-shares.md)."""
    if not host.get("serving"):
        return f"share host: none ({printable.line(str(host.get('reason')))})"
    build = host.get("build")
    who = f"{printable.field(str(host.get('host')))} (pid {host.get('pid')}" + (
        f", build {printable.field(build[:12])})" if isinstance(build, str) else ")"
    )
    age = host.get("heartbeat_age_s")
    beat = f"last beat {human_ms(age * 1000)} ago" if isinstance(age, (int, float)) else "beating"
    p50 = host.get("barrier_p50_ms")
    line = f"share host: {who}, {beat}"
    line += f", barrier p50 {human_ms(p50)}" if isinstance(p50, (int, float)) else ""
    clock = host.get("clock")
    return line + (f"; {printable.line(clock)}" if isinstance(clock, str) else "")


def _reserved(ctx: Context, last: dict[str, object] | None, verbose: bool) -> None:
    """The last full pass's reserved files (ctindex/commands/update.py)."""
    from ctindex.commands.update import reserved_lines

    count = last.get("reserved") if last else None
    paths = last.get("reserved_paths") if last else None
    if isinstance(count, int):
        names = [str(p) for p in paths] if isinstance(paths, list) else None
        reserved_lines(ctx, count, names, verbose)
