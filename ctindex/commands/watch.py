"""`ctindex watch status|start|stop`: control of the watcher daemon (spec §8)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from ctindex.commands import Context

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
        from ctindex.commands.watcher_report import watcher_json, watcher_lines

        if ctx.json:
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
