"""`ctindex watch status|start|stop`: control of the watcher daemon.

Exit codes of `watch status` follow systemctl's (LSB init scripts): 0 a
daemon is running and answers, 1 a process holds the daemon's lock but does
not answer, 3 no daemon runs. With a malformed configuration `watch status`
carries on as `status` does: it shows the daemon's state (which the policy
does not change), names the configuration error on stderr and exits 2.
`watch stop` never reads the configuration: stopping needs no policy.
`watch start` refuses under CI (exit 2) unless `--force` (docs/cli.md).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from ctindex.base import printable
from ctindex.commands import Context

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan

START_WAIT_S = 10.0  # `watch start` waits this long for the daemon to answer
RUNNING, NOT_ANSWERING, NOT_RUNNING = 0, 1, 3  # `watch status`, as systemctl's


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.client import control

    action = args.action
    if getattr(args, "foreground", False):
        if action != "start":
            from ctindex.errors import UsageError

            raise UsageError("watch: --foreground goes with `watch start`")
        from ctindex.policy.plan import load_plan

        # Not refused under CI: a daemon in the foreground ends with its job.
        return _foreground(ctx, load_plan(ctx.project))
    if action == "status":
        return _status(ctx)
    if action == "stop":
        doc = control.stop(ctx.project)
    else:
        from ctindex.policy.plan import load_plan

        _refuse_in_ci(getattr(args, "force", False))
        doc = _start(ctx, load_plan(ctx.project))
    if ctx.json:
        ctx.emit_json(doc)
    else:
        ctx.echo(_summary(action, doc))
    return 0 if doc.get("ok", doc.get("stopped", True)) else 1


def _status(ctx: Context) -> int:
    from ctindex.client.control import watcher_status
    from ctindex.errors import PolicyError
    from ctindex.policy.plan import load_plan
    from ctindex.service.watcher_report import watcher_json, watcher_lines

    plan: Plan | None = None
    problem: PolicyError | None = None
    try:
        plan = load_plan(ctx.project)
    except PolicyError as exc:  # shown after what can be shown without it
        problem = exc
    doc = watcher_status(ctx.project, plan)
    doc["holds_busy"] = busy_filesystem(doc) if doc.get("running") else None
    if ctx.json:
        ctx.emit_json(watcher_json(doc))
    else:
        for line in watcher_lines(doc):
            ctx.echo(line)
    if problem is not None:
        ctx.err.write(f"ctindex: {problem} (the daemon's state above does not depend on it)\n")
        return 2
    if not doc.get("running"):
        return NOT_RUNNING
    return RUNNING if doc.get("responsive") else NOT_ANSWERING


def _refuse_in_ci(force: bool) -> None:
    """Under CI a daemon outlives the job by `idle_seconds` (ctindex/query/cimode.py):
    starting one takes --force (or CTINDEX_WATCH=1, as for searches)."""
    from ctindex.query.cimode import spawn_blocked

    if not force and spawn_blocked() is not None:
        from ctindex.errors import UsageError

        raise UsageError(
            "watch start: CI is set and a daemon would outlive the job; "
            "pass --force (or set CTINDEX_WATCH=1) to start one anyway"
        )


def _on_a_share(ctx: Context, plan: Plan) -> str | None:
    """Why no daemon runs here: the project is on a network filesystem, whose
    changes on the server or another client reach no watcher on this host
    (docs/network-shares.md). Decided at once, before anything is started."""
    from ctindex.policy.netfs import project_share

    share = project_share(ctx.project, plan)
    if share is None:
        return None
    where = printable.line(str(ctx.project.root))
    return (
        f"{where} is on a network filesystem ({share.fstype} at "
        f"{printable.line(share.mount_point)}): a daemon on this host would see no change "
        "made on the server or another client; run `ctindex watch start` on the host "
        "where the folder is local (docs/network-shares.md)"
    )


def _start(ctx: Context, plan: Plan) -> dict[str, object]:
    from ctindex.client.daemon_requests import ping
    from ctindex.client.spawn import STARTING, spawn
    from ctindex.ipc.runtime_dir import RuntimePaths
    from ctindex.ipc.spawn_failure import clear_spawn_failure

    paths = RuntimePaths.for_project(ctx.project)
    doc: dict[str, object] = {"ok": False, "already_running": False, "watch": plan.settings.watch}
    if not plan.settings.watch:
        doc["error"] = (
            f"{ctx.project.config_path}: watch: false, so searches reconcile "
            "on query and would not use a daemon"
        )
        return doc
    on_share = _on_a_share(ctx, plan)
    if on_share is not None:
        doc["error"] = on_share
        return doc
    if ping(paths):
        doc.update(ok=True, already_running=True)
    else:
        why_not = spawn(ctx.project.root, paths, ignore_cache=True)
        if why_not is not None and why_not != STARTING:
            doc["error"] = why_not
            return doc
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline and not ping(paths):
            time.sleep(0.05)
        doc["ok"] = ping(paths)
        if doc["ok"]:
            clear_spawn_failure(paths)
        else:
            doc["error"] = f"the daemon did not answer within {START_WAIT_S:g} s"
    return doc


def _foreground(ctx: Context, plan: Plan) -> int:
    """The daemon in this process, for a service manager (a systemd unit, a
    launchd agent): it serves until stopped (`watch stop`, SIGTERM) and does
    not leave after `idle_seconds`; 1 when another daemon already serves the
    project or this one stopped on an error."""
    from ctindex.daemon.layers import RealEngine
    from ctindex.daemon.lifecycle import Daemon
    from ctindex.ipc.peer import no_peer_check
    from ctindex.ipc.runtime_dir import RuntimePaths

    if not plan.settings.watch:
        # An error, not a note: -q keeps it. The project path is a name.
        where = printable.line(str(ctx.project.config_path))
        ctx.err.write(f"ctindex: {where}: watch: false, no daemon to run\n")
        return 1
    disabled = no_peer_check() or _on_a_share(ctx, plan)
    if disabled is not None:
        ctx.err.write(f"ctindex: {disabled}\n")
        return 1
    paths = RuntimePaths.for_project(ctx.project)
    search = ctx.daemon_search() if ctx.daemon_search is not None else None
    daemon = Daemon(ctx.project, paths, RealEngine(ctx.project), stay=True, search=search)
    reason = daemon.run()
    if reason is None:
        ctx.err.write("ctindex: a daemon already serves this project\n")
        return 1
    ctx.echo(f"daemon stopped ({reason})")
    return 0 if reason in FOREGROUND_CLEAN_STOPS else 1


# Stops of a foreground daemon that are not failures (a service manager
# restarts on a non-zero exit): asked to stop, or watching turned off.
FOREGROUND_CLEAN_STOPS = ("stop-request", "signal SIGTERM", "signal SIGINT", "watch-disabled")


def busy_filesystem(doc: dict[str, object]) -> dict[str, str] | None:
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


def _summary(action: str, doc: dict[str, object]) -> str:
    if action == "start":
        if not doc.get("ok"):
            return f"watch start failed: {doc.get('error')}"
        return "daemon already running" if doc.get("already_running") else "daemon started"
    if doc.get("how") == "not running":
        return "daemon not running"
    if doc.get("stopped"):
        return f"daemon stopped ({doc.get('how')})"
    return f"daemon did not stop ({doc.get('how')})"
