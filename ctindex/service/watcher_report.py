"""The watcher's state as `status` and `watch status` show it: one home for
both renderings of a client.control.watcher_status() document (human lines and the
JSON convention), so neither command imports the other."""

from __future__ import annotations

import time
from typing import Any

from ctindex.base.output import human_bytes, human_count, human_ms


def watcher_json(doc: dict[str, Any]) -> dict[str, Any]:
    """client.control.watcher_status() in the JSON convention: its float-second
    times become integer `*_unix_ms` (the daemon's records keep seconds)."""
    out = dict(doc)
    for old, new in (
        ("started", "started_unix_ms"),
        ("last_heartbeat", "last_heartbeat_unix_ms"),
        ("stopped", "stopped_unix_ms"),
    ):
        out[new] = _unix_ms(out.pop(old, None))
    failure = out.get("spawn_failure")
    if isinstance(failure, dict):
        out["spawn_failure"] = {
            "error": failure.get("error"),
            "count": failure.get("count"),
            "at_unix_ms": _unix_ms(failure.get("time")),
            "retry_after_unix_ms": _unix_ms(failure.get("retry_after")),
        }
    for key in ("last_reconcile", "last_batch"):  # the daemon's: "at" in float seconds
        rec = out.get(key)
        if isinstance(rec, dict):
            rec = dict(rec)
            rec["at_unix_ms"] = _unix_ms(rec.pop("at", None))
            out[key] = rec
    return out


def _unix_ms(seconds: object) -> int | None:
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        return int(seconds * 1000)
    return None


def watcher_lines(doc: dict[str, Any]) -> list[str]:
    """Human text for a client.control.watcher_status() document (also used by `status`)."""
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
        # The daemon's own view, which may trail `generation:` above (a
        # writer outside it published since): it catches up at the next query.
        lines.append(
            f"daemon's last generation: {doc.get('generation')} "
            "(the last it published or checked; the next query brings it up to date)"
        )
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
        if doc.get("build_in_progress"):
            lines.append(
                "index build: another writer holds the update lock; the daemon's work waits for it"
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
            unwatched = int(files.get("unwatched") or 0)
            line += (
                f", over budget: {human_count(unwatched, 'file')} unwatched (more than "
                f"{files.get('rechecked_cap')} to re-check per barrier): a write through a name "
                "made for one of them outside the project after the last full pass waits for "
                "the next one (the audit, every audit_seconds)"
            )
        elif files.get("over_budget"):
            line += f", over budget: {human_count(rest, 'file')} re-checked per barrier"
        elif rest:
            line += f"; {human_count(rest, 'file')} re-checked per barrier (racily clean)"
        lines.append(line)
    return lines
