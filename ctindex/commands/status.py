"""`ctindex status`: the metrics of spec §10 — the index's (here) and the
watcher's (``ctindex.client.watcher_status``), text or JSON."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ctindex.commands import Context
from ctindex.output import human_bytes, human_count, human_ms


def _bytes_in(folder: Path, recursive: bool) -> int:
    total = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for e in entries:
        try:
            if e.is_file(follow_symlinks=False):
                total += e.stat(follow_symlinks=False).st_size
            elif recursive and e.is_dir(follow_symlinks=False):
                total += _bytes_in(Path(e.path), True)
        except OSError:
            continue
    return total


def collect(ctx: Context, verbose: bool) -> dict[str, Any]:
    from ctindex.indexer import check_generation, last_pass, provider_versions, rebuild_reason
    from ctindex.plan import load_plan
    from ctindex.store.files import IndexCorrupt
    from ctindex.store.manifest import read_diag, read_manifest

    index_dir = Path(ctx.project.index_dir)
    plan = load_plan(ctx.project)
    doc: dict[str, Any] = {"index": str(index_dir), "exists": False, "problem": None}
    try:
        m = read_manifest(index_dir)
    except IndexCorrupt as exc:
        m = None
        doc["problem"] = str(exc)
    if m is not None:
        try:  # the same cheap check a full update makes before building on it
            check_generation(index_dir, m)
        except IndexCorrupt as exc:
            doc["problem"] = f"{exc}; the next update or search rebuilds the index"
    doc.update({
        "generation": m.generation if m else None,
        "documents": m.documents if m else 0,
        "segments": len(m.segments) if m else 0,
        "tombstones": m.tombstones if m else 0,
        "source_bytes": m.source_bytes if m else 0,
        "index_bytes": _bytes_in(index_dir, False),
        "runtime_bytes": _bytes_in(Path(ctx.project.runtime_dir), True),
        "provider": m.provider if m else provider_versions(),
        "stale": rebuild_reason(m, plan) if m else "no index yet",
        "provider_errors": m.errors if m else 0,
        "frontmatter_warnings": m.warnings if m else 0,
        "last_reconcile": last_pass(index_dir, m),
    })
    doc["exists"] = m is not None
    from ctindex.client import watcher_status

    doc["watcher"] = watcher_status(ctx.project, plan)  # queries only: never starts a daemon
    if verbose and m is not None and m.diag:
        try:
            errors, warnings = read_diag(index_dir / m.diag)
        except (IndexCorrupt, OSError) as exc:
            doc["problem"] = str(exc)
        else:
            doc["errors"] = [{"path": k, "message": v} for k, v in sorted(errors.items())]
            doc["warnings"] = [{"path": k, "message": v} for k, v in sorted(warnings.items())]
    return doc


def run(ctx: Context, args: argparse.Namespace) -> int:
    verbose = getattr(args, "verbose", False)
    doc = collect(ctx, verbose)
    if ctx.json:
        ctx.emit_json(doc)
        return 0
    if doc["problem"]:
        ctx.echo(f"problem: {doc['problem']}")
    gen = doc["generation"] if doc["generation"] is not None else "none (no index yet)"
    ctx.echo(f"generation: {gen}")
    ctx.echo(f"documents: {human_count(doc['documents'], 'document')} in "
             f"{human_count(doc['segments'], 'segment')}, "
             f"{human_count(doc['tombstones'], 'tombstone')}")
    ctx.echo(f"source: {human_bytes(doc['source_bytes'])} ({doc['source_bytes']:,} bytes); "
             f"index: {human_bytes(doc['index_bytes'])}; "
             f"runtime: {human_bytes(doc['runtime_bytes'])}")
    p = doc["provider"]
    ctx.echo(f"provider: {p.get('id')} v{p.get('version')}, tokenizer v{p.get('tokenizer_version')}"
             + (f" (stale: {doc['stale']})" if doc["stale"] else ""))
    last = doc["last_reconcile"]
    if last:
        why = f" ({last['reason']})" if last.get("reason") else ""
        ctx.echo(f"last reconciliation: {last.get('kind')}{why}, "
                 f"{human_count(int(last.get('entries_visited', 0)), 'entry', 'entries')} visited "
                 f"in {human_ms(last.get('duration_ms'))}")
        for line in last.get("problems", []):
            ctx.echo(f"  not seen  {line}")
    else:
        ctx.echo("last reconciliation: none")
    ctx.echo(f"provider errors: {doc['provider_errors']:,}; "
             f"frontmatter warnings: {doc['frontmatter_warnings']:,}"
             + ("" if verbose or not
                (doc["provider_errors"] or doc["frontmatter_warnings"])
                else " (paths with --verbose)"))
    from ctindex.commands.watch import watcher_lines

    for line in watcher_lines(doc["watcher"]):
        ctx.echo(line)
    for item in doc.get("errors", []):
        ctx.echo(f"  error    {item['message']}")
    for item in doc.get("warnings", []):
        ctx.echo(f"  warning  {item['message']}")
    return 0
