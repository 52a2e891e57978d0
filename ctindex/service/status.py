"""The status document: the index's metrics, read here, and the
watcher's (``ctindex.client.control.watcher_status``), as `ctindex status`, the
Python API's `Index.status` and the MCP `status` tool give them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctindex.base.jsontypes import JSONObject
from ctindex.base.output import path_messages
from ctindex.errors import IndexCorrupt
from ctindex.policy.project import Project
from ctindex.service.types import Status

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ctindex.store.generation import StoreManifest

# The status document: JSON values by field (docs/cli.md, "status").
StatusDocument = dict[str, Any]


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


def collect(project: Project, verbose: bool) -> StatusDocument:
    """The status document. A malformed configuration does not hide what
    does not depend on it: the index's counts and bytes, and the watcher,
    are still reported; `problem` says why the rest (`stale`) is missing."""
    from ctindex.errors import PolicyError
    from ctindex.indexing.transaction import provider_versions, rebuild_reason
    from ctindex.policy.plan import Plan, load_plan
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.gc import index_bytes
    from ctindex.store.generation import read_diag, read_manifest
    from ctindex.store.integrity import check_generation
    from ctindex.store.passlog import last_pass

    index_dir = Path(project.index_dir)
    doc: StatusDocument = {
        "index": str(index_dir),
        "exists": False,
        "problem": None,
        "config_error": None,
    }
    plan: Plan | None
    try:
        plan = load_plan(project)
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
            "runtime_bytes": _bytes_in(Path(project.runtime_dir), True),
            "provider": m.provider if m else provider_versions(),
            "stale": stale,
            "provider_errors": m.errors if m else 0,
            "frontmatter_warnings": m.warnings if m else 0,
            "last_reconcile": pass_json(last_pass(index_dir, m)),
            "last_full_reconcile": pass_json(last_pass(index_dir, m, full=True)),
            "store_mode_warning": _store_mode_warning(project, m),
        }
    )
    if doc["config_error"] and not doc["problem"]:
        doc["problem"] = f"{doc['config_error']} (policy metrics unavailable)"
    doc["exists"] = m is not None
    from ctindex.service.no_scopes import no_scopes

    missing = no_scopes(plan) if plan is not None else None
    if missing is not None:  # only then, as in search's document
        doc["no_scopes"] = missing.to_json()
    from ctindex.client.control import watcher_status

    doc["watcher"] = watcher_status(project, plan)  # queries only: never starts a daemon
    from ctindex.policy.netfs import project_share

    if project_share(project, plan) is not None:  # a client of a share: who serves it
        from ctindex.client.share import host_status

        doc["share_host"] = host_status(index_dir)
    if verbose and m is not None and m.diag:
        try:
            errors, warnings = read_diag(index_dir / m.diag)
        except (IndexCorrupt, OSError) as exc:
            doc["problem"] = str(exc)
        else:
            doc["errors"] = path_messages(errors)
            doc["warnings"] = path_messages(warnings)
    return doc


def _store_mode_warning(project: Project, m: StoreManifest | None) -> str | None:
    """The store is readable by more users than some indexed file (the table
    is read only when the store is readable by others at all)."""
    from ctindex.policy.store_path import wider_than_files
    from ctindex.store.filetable import load_file_table

    if m is None:
        return None
    index_dir = Path(project.index_dir)

    def indexed() -> Iterable[str]:
        try:
            return load_file_table(index_dir, m).raw()
        except (IndexCorrupt, OSError, ValueError):
            return ()  # `problem` already says the generation cannot be read

    return wider_than_files(project.root, indexed)


def pass_json(info: JSONObject) -> JSONObject | None:
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


def exit_code(doc: StatusDocument) -> int:
    """What `ctindex status` exits with: 2 when the configuration cannot be
    honoured, 1 when a problem with the index is reported, else 0
    (no index yet is not a problem)."""
    return 2 if doc["config_error"] else (1 if doc["problem"] else 0)


def status_json(doc: StatusDocument) -> StatusDocument:
    """`ctindex --json status`'s document: the watcher's part in the JSON
    convention, and the exit code."""
    from ctindex.service.watcher_report import watcher_json

    return {**doc, "watcher": watcher_json(doc["watcher"]), "exit_code": exit_code(doc)}


def status_of(doc: StatusDocument) -> Status:
    """The Python API's `Status`: the main figures, and the whole JSON document."""
    watcher = doc["watcher"]
    return Status(
        doc["generation"],
        doc["documents"],
        doc["segments"],
        doc["tombstones"],
        doc["source_bytes"],
        doc["index_bytes"],
        doc["stale"],
        doc["problem"],
        doc["config_error"],
        str(watcher.get("lane")),
        bool(watcher.get("running")),
        exit_code(doc),
        status_json(doc),
    )
