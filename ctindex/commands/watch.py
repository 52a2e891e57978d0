"""`ctindex watch status|start|stop`: control of the watcher daemon (spec §8)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from ctindex.commands import Context
from ctindex.output import human_bytes, human_count, human_ms

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan

START_WAIT_S = 10.0  # `watch start` waits this long for the daemon to answer


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex import client
    from ctindex.policy.plan import load_plan

    plan = load_plan(ctx.project)
    action = args.action
    if action == "status":
        doc = client.watcher_status(ctx.project, plan)
        doc["holds_busy"] = busy_filesystem(doc) if doc.get("running") else None
        if ctx.json:
            from ctindex.commands.status import watcher_json

            ctx.emit_json(watcher_json(doc))
        else:
            for line in watcher_lines(doc):
                ctx.echo(line)
        return 0
    doc = _start(ctx, plan) if action == "start" else client.stop(ctx.project)
    if ctx.json:
        ctx.emit_json(doc)
    else:
        ctx.echo(_summary(action, doc))
    return 0 if doc.get("ok", doc.get("stopped", True)) else 1


def _start(ctx: Context, plan: Plan) -> dict[str, Any]:
    from ctindex import client
    from ctindex import runtime as rt

    paths = rt.RuntimePaths.for_project(ctx.project)
    doc: dict[str, Any] = {"ok": False, "already_running": False, "watch": plan.settings.watch}
    if not plan.settings.watch:
        doc["error"] = (
            f"{ctx.project.config_path}: watch: false, so searches reconcile "
            "on query and would not use a daemon"
        )
        return doc
    if client.ping(paths):
        doc.update(ok=True, already_running=True)
    else:
        why_not = client.spawn(ctx.project.root, paths, ignore_cache=True)
        if why_not is not None and why_not != client.STARTING:
            doc["error"] = why_not
            return doc
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline and not client.ping(paths):
            time.sleep(0.05)
        doc["ok"] = client.ping(paths)
        if doc["ok"]:
            rt.clear_spawn_failure(paths)
        else:
            doc["error"] = f"the daemon did not answer within {START_WAIT_S:g} s"
    return doc


def busy_filesystem(doc: dict[str, Any]) -> dict[str, str] | None:
    """The filesystem a running daemon keeps busy: it holds its lock and log
    open in the runtime folder for its whole life, so that filesystem cannot
    be unmounted until the daemon stops (it would otherwise only idle out
    after `idle_seconds`). None when the mount table cannot say."""
    import os

    from ctindex.backends.mounts import mount_of, read_mounts

    folder = doc.get("runtime_dir")
    if not isinstance(folder, str):
        return None
    try:
        found = mount_of(os.path.realpath(folder), read_mounts())
    except OSError:
        return None
    if found is None:
        return None
    return {"mount_point": found.mount_point, "fstype": found.fstype}


def _summary(action: str, doc: dict[str, Any]) -> str:
    if action == "start":
        if not doc.get("ok"):
            return f"watch start failed: {doc.get('error')}"
        return "daemon already running" if doc.get("already_running") else "daemon started"
    if doc.get("how") == "not running":
        return "daemon not running"
    if doc.get("stopped"):
        return f"daemon stopped ({doc.get('how')})"
    return f"daemon did not stop ({doc.get('how')})"


def _unannounced_lines(doc: object) -> list[str]:
    """The cost of the checks for changes no event announces (docs/daemon.md)."""
    if not isinstance(doc, dict):
        return []
    links = doc.get("hard_links") or {}
    last = links.get("last_check") or {}
    if links.get("over_cap"):
        linked = (
            f"more than {links.get('cap')} files with several names: each barrier reconciles fully"
        )
    else:
        linked = (
            f"{human_count(int(links.get('tracked') or 0), 'file')} with several names "
            f"re-checked per barrier (last: {human_ms(last.get('duration_ms'))})"
        )
    lines = [
        f"unannounced changes: {linked}; mount table checked "
        f"{human_count(int(doc.get('mount_checks') or 0), 'time')}, "
        f"{human_count(int(doc.get('mount_changes') or 0), 'change')} in scope"
    ]
    files = doc.get("file_watches")
    if isinstance(files, dict) and files.get("available"):
        line = f"file_watches: {files.get('watched')} of {files.get('budget')}"
        rest = int(files.get("rechecked") or 0)
        if files.get("rechecked_over_cap"):
            line += (
                f", over budget: more than {files.get('rechecked_cap')} unwatched files, "
                "each barrier reconciles fully"
            )
        elif files.get("over_budget"):
            line += f", over budget: {human_count(rest, 'file')} re-checked per barrier"
        elif rest:
            line += f"; {human_count(rest, 'file')} re-checked per barrier (racily clean)"
        lines.append(line)
    return lines


def watcher_lines(doc: dict[str, Any]) -> list[str]:
    """Human text for a client.watcher_status() document (also used by `status`)."""
    backend = doc.get("backend") or "-"
    if doc.get("backend_reason"):
        backend += f": {doc['backend_reason']}"
    if doc.get("degraded"):
        backend += f" (degraded: {doc['degraded']})"
    lines = [f"watcher: {doc['lane']}" + (f" ({backend})" if doc.get("running") else "")]
    if doc.get("running"):
        since = time.time() - doc["started"] if isinstance(doc.get("started"), float) else None
        beat = doc.get("last_heartbeat")
        beat_text = human_ms((time.time() - beat) * 1000) + " ago" if beat else "-"
        lines.append(
            f"daemon: pid {doc.get('pid')}, instance {doc.get('instance')}, "
            f"up {human_ms(since * 1000 if since is not None else None)}, "
            f"last heartbeat {beat_text}" + ("" if doc.get("responsive") else ", NOT RESPONDING")
        )
        lines.append(f"watched generation: {doc.get('generation')}")
        pending = doc.get("pending") or {}
        lines.append(
            f"dirty: {human_count(int(doc.get('dirty_paths') or 0), 'path')} "
            f"(pending add {pending.get('add', 0)}, change {pending.get('change', 0)}, "
            f"remove {pending.get('remove', 0)})"
            + (
                f", full reconcile pending: {doc['rescan_reason']}"
                if doc.get("rescan_reason")
                else ""
            )
        )
        batch = doc.get("last_batch")
        if batch:
            lines.append(
                f"last event batch: {human_count(int(batch['paths']), 'path')} in "
                f"{human_ms(batch.get('duration_ms'))}, event-to-index "
                f"{human_ms(batch.get('latency_ms'))}"
            )
        else:
            lines.append("last event batch: none")
        rec = doc.get("last_reconcile")
        if rec:
            lines.append(
                f"last daemon reconciliation: "
                f"{human_count(int(rec['entries_visited']), 'entry', 'entries')} "
                f"visited in {human_ms(rec.get('duration_ms'))} ({rec.get('reason')}); "
                + human_count(int(doc.get("reconciles") or 0), "full pass", "full passes")
            )
        if doc.get("last_error"):
            lines.append(f"last error: {doc['last_error']}")
        lines.extend(_unannounced_lines(doc.get("unannounced")))
        busy = doc.get("holds_busy")
        if isinstance(busy, dict):
            lines.append(
                f"holds {busy.get('mount_point')} ({busy.get('fstype')}) busy; "
                "`ctindex watch stop` releases it"
            )
    elif doc.get("stop_reason"):
        lines.append(f"daemon: not running (last stop: {doc['stop_reason']})")
    else:
        lines.append("daemon: not running")
    rss = doc.get("rss_bytes")
    ceiling = doc.get("memory_ceiling_bytes")
    physical = doc.get("physical_memory_bytes")
    lines.append(
        f"memory: rss {human_bytes(rss) if rss is not None else '-'}, ceiling "
        f"{human_bytes(ceiling) if ceiling is not None else '-'}, physical "
        f"{human_bytes(physical) if physical is not None else '-'}"
    )
    failure = doc.get("spawn_failure")
    if failure:
        lines.append(
            f"spawn failure cached: {failure.get('error')} (no retry for "
            f"{human_ms((failure['retry_after'] - time.time()) * 1000)})"
        )
    else:
        lines.append("spawn failure cached: none")
    return lines
