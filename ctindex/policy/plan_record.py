"""The query fast path's record: what a healthy-daemon search needs from the
plan, without compiling the plan (docs/decisions/perf.md).

Compiling the plan (json5, pathspec, root detection) cost a search about as
much as the query itself. Whoever loads the plan with watching on (the
daemon, a search on the slow path) records, in the runtime folder, the plan
digest and the two settings a client needs before it talks to the daemon,
together with everything the plan was computed from: the full stat
fingerprints (ctindex/reconciler/fingerprint.py) of the config file, of the folders
root detection listed and of the modules that compute digests. A later
search re-checks those with a few stat calls; any difference (or a missing,
damaged or racily clean record) means the slow path. The record is a hint:
the daemon must still answer with the same digest and the generation opened
must name it, so a stale record can only make a query slower, never wrong.

Standard library only (and the stdlib-only reconciler.fingerprint): this
module is imported by every indexed search.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from ctindex.errors import IndexWriteError
from ctindex.ipc.records import read_record, write_record
from ctindex.policy.config import config_stamp as config_stamp  # re-exported: callers ask here
from ctindex.reconciler.fingerprint import fingerprint_of, from_json, racily_clean

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.reconciler.fingerprint import Fingerprint

RECORD_NAME = "query-plan.json"
VERSION = 2  # 1 held partial stamps (mtime, size, inode; folder mtimes)
# Modules whose code decides the plan digest and the provider versions.
# The whole policy package and every provider module: root detection, the
# config's reading and the digest depend on more than plan.py (a provider's
# root marker, the key helpers), and one stat per module is cheap.
_CODE = (
    "policy/__init__.py",
    "policy/config.py",
    "policy/config_edit.py",
    "policy/decide.py",
    "policy/gitignore.py",
    "policy/glob.py",
    "policy/netfs.py",
    "policy/plan.py",
    "policy/plan_record.py",
    "policy/project.py",
    "policy/root.py",
    "policy/store_path.py",
    "providers/__init__.py",
    "providers/base.py",
    "providers/fields.py",
    "providers/folding.py",
    "providers/frontmatter.py",
    "providers/okf_markdown.py",
)
# The package folder (ctindex/), which the paths above are relative to.
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Hint(NamedTuple):
    digest: str
    barrier_timeout_ms: int
    config: list[int] | str  # the config file's stat as sent to the daemon


def _code_stamp() -> list[list[int]] | None:
    out = []
    for name in _CODE:
        try:
            st = os.stat(os.path.join(_HERE, name))
        except OSError:
            return None
        out.append(list(fingerprint_of(st)))
    return out


def remember(project: Project, plan: Plan) -> None:
    """Record `plan` for later fast-path searches (best effort, never raises
    for I/O; only into a runtime folder that already exists)."""
    folders = plan.detected_from
    if not plan.settings.watch or folders is None or not project.runtime_dir.is_dir():
        return
    from ctindex.policy.netfs import project_share

    if project_share(project, plan) is not None:
        return  # no daemon to ask there (ctindex/policy/netfs.py): a record only costs stats
    # The stamp the plan was read under, and only while it is still current:
    # a config changed since would otherwise be recorded with the old digest.
    stamp = plan.config_stamp
    code = _code_stamp()
    if stamp is None or code is None or config_stamp(project.config_path) != stamp:
        return
    if isinstance(stamp, list) and racily_clean(stamp, plan.stamped_ns):
        return  # a rewrite within the same tick could keep this fingerprint
    record = {
        "version": VERSION,
        "config": stamp,
        "code": code,
        "folders": {k: list(fp) for k, fp in folders.items()},
        "digest": plan.digest(),
        "watch": True,
        "barrier_timeout_ms": int(plan.settings.barrier_timeout_ms),
    }
    with contextlib.suppress(OSError, IndexWriteError):
        write_record(project.runtime_dir / RECORD_NAME, record)


def recall(project: Project) -> Hint | None:
    """The recorded plan facts if everything they were computed from is
    unchanged, else None (take the slow path)."""
    from ctindex.policy.store_path import check_store

    # Before the record is read through `.ct/okf/runtime` (the configuration
    # is read only for a folder of another user).
    check_store(project.root, lambda: _shares_index(project))
    record = read_record(project.runtime_dir / RECORD_NAME)
    if record is None or record.get("version") != VERSION or record.get("watch") is not True:
        return None
    stamp = config_stamp(project.config_path)
    if stamp is None or record.get("config") != stamp or record.get("code") != _code_stamp():
        return None
    digest, budget, folders = (
        record.get("digest"),
        record.get("barrier_timeout_ms"),
        record.get("folders"),
    )
    if not isinstance(digest, str) or not isinstance(budget, int) or not isinstance(folders, dict):
        return None
    if not _folders_unchanged(project, {k: from_json(v) for k, v in folders.items()}):
        return None
    return Hint(digest, budget, stamp)


def _shares_index(project: Project) -> bool:
    from ctindex.policy.config import shares_index

    return shares_index(project)


def _folders_unchanged(project: Project, folders: Mapping[str, Fingerprint | None]) -> bool:
    """True when every folder still has its recorded full fingerprint and is
    a real folder (not a symlink put in its place)."""
    root = os.fspath(project.root)
    for key, recorded in folders.items():
        try:
            st = os.lstat(os.path.join(root, key) if key else root)
        except OSError:
            return False
        if (
            recorded is None
            or fingerprint_of(st) != recorded
            or (st.st_mode & 0o170000) != 0o040000
        ):  # a real folder
            return False
    return True


def plan_current(project: Project, plan: Plan) -> bool:
    """True while everything `plan` was computed from is unchanged: the
    config file's and the detection folders' full fingerprints, the config
    not racily clean against the moment it was stamped. A long-lived process
    (ctindex/api.py) keeps its plan while this holds and plans again
    otherwise, exactly where a new process would compute another plan.
    The store folders are checked on every call (UnsafeStorePath), as a new
    process would check them when it plans: a kept plan keeps no link."""
    from ctindex.policy.store_path import check_store

    check_store(project.root, lambda: plan.settings.share_index_with_group)
    stamp = plan.config_stamp
    if stamp is None or plan.detected_from is None:
        return False
    if config_stamp(project.config_path) != stamp:
        return False
    if isinstance(stamp, list) and racily_clean(stamp, plan.stamped_ns):
        return False
    return _folders_unchanged(project, plan.detected_from)
