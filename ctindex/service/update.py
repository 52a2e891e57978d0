"""Where `update` and `rebuild` run (docs/network-shares.md, "Writers on
other hosts").

On a network share whose host runs the daemon (a fresh heartbeat in
`.ct/okf/barrier/`), the host runs them: one writer, under its local lock,
with none of the share's limits (ctindex/client/share.py `ask_write`,
ctindex/daemon/share_updates.py). The answer is taken only after the
generation it names is found through this mount: the published manifest
is that one, or one published on top of it, under this client's plan.
A host that serves (its heartbeat fresh) is the index's one writer even
when it does not answer: no answer within the bound, a refusal (another
build, another plan), its generation not yet readable through this mount —
then this process writes nothing and raises ShareHostWrites (exit 2, one
line). Only where no host serves — no heartbeat, a stale one (a host
killed mid-run stops beating) — does this process write over the share
itself, and the report's first note says why.

`CTINDEX_SHARE_WRITE_HERE` set (to anything but "") skips the host.
"""

from __future__ import annotations

import os
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from ctindex.base.jsontypes import JSONObject
from ctindex.errors import ShareHostWrites
from ctindex.ipc.share_channel import LOCAL_WRITES_ENV, UPDATE, WRITE_OPS

if TYPE_CHECKING:
    from ctindex.client.share import WriteAnswered
    from ctindex.indexing.transaction import UpdateReport
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project

# Pauses before the generation the host named is looked for again through
# this mount (its attribute cache may cut the new MANIFEST to the old size).
MOUNT_PAUSES_S = (0.05, 0.1, 0.2, 0.4)
# What only the daemon reads of a report: an answer is not asked for them.
DAEMON_ONLY = ("linked", "linked_full", "seen", "identity")


class Routed(NamedTuple):
    report: UpdateReport
    share_host: str | None  # the host whose daemon ran it; None: run here
    elapsed_ms: float | None  # the whole exchange, as this client waited


def run(project: Project, plan: Plan, op: str, progress: TextIO | None = None) -> Routed:
    """`op` ("update" or "rebuild") by the share host, or here; raises what
    the indexer raises when it runs here."""
    from ctindex.indexing import transaction as indexer

    assert op in WRITE_OPS
    note = None
    if not os.environ.get(LOCAL_WRITES_ENV):
        from ctindex.policy.netfs import project_share

        if project_share(project, plan) is not None:
            routed, why = _by_host(project, plan, op)
            if routed is not None:
                return routed
            note = f"{why}; {op} written over the share by this host"  # no host serves
    write = indexer.update if op == UPDATE else indexer.rebuild
    report = write(project, plan, progress=progress)
    if note is not None:
        report = replace(report, notes=(note, *report.notes))
    return Routed(report, None, None)


def _by_host(project: Project, plan: Plan, op: str) -> tuple[Routed | None, str]:
    from ctindex.client import share

    digest = plan.digest()
    outcome = share.ask_write(project.index_dir, op, digest)
    if isinstance(outcome, share.NotAnswered):
        if outcome.serving is not None:
            raise ShareHostWrites(outcome.serving, outcome.reason)
        return None, outcome.reason
    report = report_of(outcome.report)
    if report is None:
        raise ShareHostWrites(outcome.host, f"share host: malformed report ({outcome.host})")
    why = _not_found(Path(project.index_dir), digest, outcome)
    for pause in MOUNT_PAUSES_S:  # a MANIFEST read torn, or an older one, through the mount
        if why is None:
            break
        time.sleep(pause)
        why = _not_found(Path(project.index_dir), digest, outcome)
    if why is not None:
        raise ShareHostWrites(outcome.host, why)
    return Routed(report, outcome.host, outcome.elapsed_ms), ""


def _not_found(index_dir: Path, digest: str, answer: WriteAnswered) -> str | None:
    """None when the generation the host names is what this mount shows (or
    one published on top of it), under this client's plan; else why not."""
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.generation import read_manifest

    named = f"share host {answer.host}: generation {answer.report.get('generation')}"
    try:
        m = read_manifest(index_dir)
    except (IndexCorrupt, OSError) as exc:
        return f"{named} unreadable through this mount ({exc})"
    if m is None or not m.descends_from(answer.identity):
        return f"{named} not found through this mount"
    if answer.plan != digest or m.plan_digest != digest:
        return f"{named} was built under another plan"
    return None


def report_of(doc: JSONObject) -> UpdateReport | None:
    """The report an answer carries, each field of its type; None when a
    field is missing or of another type (the answer is not taken)."""
    from ctindex.indexing.transaction import UpdateReport

    empty = UpdateReport()
    # Each value checked against its field's type just below (`_typed`).
    values: dict[str, Any] = {}
    for f in fields(UpdateReport):
        if f.name in DAEMON_ONLY:
            continue
        value = doc.get(f.name)
        if f.name not in doc or not _typed(getattr(empty, f.name), value):
            return None
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return replace(empty, **values)


def _typed(default: object, value: object) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, tuple):  # a list of strings in JSON
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value is None or isinstance(value, str)  # `reason`
