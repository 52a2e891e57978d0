"""`ctindex status`: the metrics of spec §10 — the index's (here) and the
watcher's (``ctindex.client.watcher_status``), text or JSON."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctindex.base.output import human_bytes, human_count, human_ms, path_messages
from ctindex.commands import Context
from ctindex.errors import IndexCorrupt

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ctindex.store.generation import StoreManifest


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
    """The status document. A malformed configuration does not hide what
    does not depend on it: the index's counts and bytes, and the watcher,
    are still reported; `problem` says why the rest (`stale`) is missing."""
    from ctindex.errors import PolicyError
    from ctindex.indexer import provider_versions, rebuild_reason
    from ctindex.policy.plan import Plan, load_plan
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.gc import index_bytes
    from ctindex.store.generation import read_diag, read_manifest
    from ctindex.store.integrity import check_generation
    from ctindex.store.passlog import last_pass

    index_dir = Path(ctx.project.index_dir)
    doc: dict[str, Any] = {
        "index": str(index_dir),
        "exists": False,
        "problem": None,
        "config_error": None,
    }
    plan: Plan | None
    try:
        plan = load_plan(ctx.project)
    except PolicyError as exc:
        plan = None
        doc["config_error"] = str(exc)
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
    live, retired = index_bytes(index_dir, m)
    if m is None:
        stale = "no index yet"
    elif plan is None:
        stale = None  # unknown without a plan: config_error says why
    else:
        stale = rebuild_reason(m, plan)
    doc.update(
        {
            "generation": m.generation if m else None,
            "documents": m.documents if m else 0,
            "segments": len(m.segments) if m else 0,
            "tombstones": m.tombstones if m else 0,
            "source_bytes": m.source_bytes if m else 0,
            "index_bytes": live + retired,
            "index_live_bytes": live,
            "index_retired_bytes": retired,
            "runtime_bytes": _bytes_in(Path(ctx.project.runtime_dir), True),
            "provider": m.provider if m else provider_versions(),
            "stale": stale,
            "provider_errors": m.errors if m else 0,
            "frontmatter_warnings": m.warnings if m else 0,
            "last_reconcile": pass_json(last_pass(index_dir, m)),
            "last_full_reconcile": pass_json(last_pass(index_dir, m, full=True)),
            "store_mode_warning": _store_mode_warning(ctx, m),
        }
    )
    if doc["config_error"] and not doc["problem"]:
        doc["problem"] = f"{doc['config_error']} (policy metrics unavailable)"
    doc["exists"] = m is not None
    from ctindex.commands.no_scopes import no_scopes

    missing = no_scopes(plan) if plan is not None else None
    if missing is not None:  # only then, as in search's document
        doc["no_scopes"] = missing.to_json()
    from ctindex.client import watcher_status

    doc["watcher"] = watcher_status(ctx.project, plan)  # queries only: never starts a daemon
    if verbose and m is not None and m.diag:
        try:
            errors, warnings = read_diag(index_dir / m.diag)
        except (IndexCorrupt, OSError) as exc:
            doc["problem"] = str(exc)
        else:
            doc["errors"] = path_messages(errors)
            doc["warnings"] = path_messages(warnings)
    return doc


def _store_mode_warning(ctx: Context, m: StoreManifest | None) -> str | None:
    """The store is readable by more users than some indexed file (the table
    is read only when the store is readable by others at all)."""
    from ctindex.policy.store_path import wider_than_files
    from ctindex.store.filetable import load_file_table

    if m is None:
        return None
    index_dir = Path(ctx.project.index_dir)

    def indexed() -> Iterable[str]:
        try:
            return load_file_table(index_dir, m).raw()
        except (IndexCorrupt, OSError, ValueError):
            return ()  # `problem` already says the generation cannot be read

    return wider_than_files(ctx.project.root, indexed)


def pass_json(info: dict[str, Any]) -> dict[str, Any] | None:
    """A recorded pass in the JSON convention (docs/cli.md): durations
    `*_ms`, points in time `*_unix_ms`; None when no pass is recorded."""
    if not info:
        return None
    out = {k: v for k, v in info.items() if k != "at_ns"}
    at = info.get("at_ns")
    out["at_unix_ms"] = at // 1_000_000 if isinstance(at, int) else None
    out.setdefault("reason", None)
    out.setdefault("problems", [])
    return out


def run(ctx: Context, args: argparse.Namespace) -> int:
    verbose = getattr(args, "verbose", False)
    doc = collect(ctx, verbose)
    # 2: the configuration cannot be honoured (spec §11); 1: a problem with
    # the index is reported; 0: nothing wrong (no index yet is not a problem).
    code = 2 if doc["config_error"] else (1 if doc["problem"] else 0)
    metrics = getattr(args, "metrics_file", None)
    if metrics:
        from ctindex.audit.metrics import status_metrics, write_textfile

        write_textfile(metrics, status_metrics(ctx.project, doc, code == 0))
    if ctx.json:
        from ctindex.commands.watcher_report import watcher_json

        ctx.emit_json({**doc, "watcher": watcher_json(doc["watcher"]), "exit_code": code})
        return code
    if doc.get("no_scopes"):  # the reason the rest is empty, and the way out (docs/cli.md)
        from ctindex.commands.no_scopes import NoScopes

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
            ctx.echo(f"  not seen  {line}")
    ctx.echo(
        f"provider errors: {doc['provider_errors']:,}; "
        f"frontmatter warnings: {doc['frontmatter_warnings']:,}"
        + (
            ""
            if verbose or not (doc["provider_errors"] or doc["frontmatter_warnings"])
            else " (paths with --verbose)"
        )
    )
    from ctindex.commands.watcher_report import watcher_lines

    for line in watcher_lines(doc["watcher"]):
        ctx.echo(line)
    for item in doc.get("errors", []):
        ctx.echo(f"  error    {item['path']}: {item['message']}")
    for item in doc.get("warnings", []):
        ctx.echo(f"  warning  {item['path']}: {item['message']}")
    return code
