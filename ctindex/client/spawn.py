"""Starting the project's daemon, at most once per command and never in vain.

A spawn happens only after the runtime folder and the claim proved
writable, and never while a cached spawn failure is in its back-off window
(ctindex/ipc/spawn_failure.py; the caller asks only when no daemon answers
at all). The query never waits for the daemon it started. The daemon is
started by module name (`python -m ctindex.daemon`), detached from the
launching command (ctindex/client/detach.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

from ctindex.client.daemon_requests import token
from ctindex.ipc.peer import no_peer_check
from ctindex.ipc.runtime_dir import RuntimePaths, ensure_runtime_dir
from ctindex.ipc.spawn_failure import STOPPED_PREFIX, record_spawn_failure, spawn_failure

CLAIM_STALE_S = 10.0
SPAWN_CACHED = "spawn failure cached"
STARTING = "daemon starting"  # spawn() outcome: another launcher holds the claim
NOTHING_TO_INDEX = "no scopes: nothing to index, no daemon started"
# A member of a group sharing an index in someone else's project folder:
# searched without a daemon (docs/format.md, "Store folders").
FOREIGN_PROJECT = "project folder of another user: no daemon started"


def spawn(
    project_root: Path,
    paths: RuntimePaths,
    *,
    ignore_cache: bool = False,
    successor: bool = False,
) -> str | None:
    """Start a daemon unless that is known to fail or already under way.

    `successor`: a daemon of another build is leaving; the new one waits
    briefly for its lock instead of giving up at once (docs/daemon.md).

    Returns None when a daemon was launched, else why not (a freshness
    reason). Every failure to persist the runtime folder or the claim is
    cached so the next commands do not try again within the back-off window.
    """
    from ctindex.policy.store_path import foreign_project

    if foreign_project(project_root) is not None:
        return FOREIGN_PROJECT  # nothing written: not even a cached failure
    if _nothing_to_index(project_root):
        return NOTHING_TO_INDEX  # checked before the runtime folder is made: nothing written
    disabled = no_peer_check()
    if disabled is not None:
        return disabled
    failure = None if ignore_cache else spawn_failure(paths)
    if failure is not None:
        error = failure.get("error")
        if isinstance(error, str) and error.startswith(STOPPED_PREFIX):
            return error  # e.g. "daemon stopped: memory-limit", backed off like a failure
        return SPAWN_CACHED
    try:
        ensure_runtime_dir(paths)
    except OSError as exc:
        return _failed(paths, f"runtime folder {paths.dir}: {exc.strerror or exc}")
    claim = token()
    claimed = _claim(paths, claim)
    if claimed is not None:
        return claimed
    import subprocess  # only a launching client pays this import

    from ctindex.client.detach import detach_options

    detach = detach_options()  # a new session, or Windows' no-window process group
    try:
        subprocess.Popen(  # fixed argv, no shell
            [
                sys.executable,
                "-m",
                "ctindex.daemon",
                "--project",
                os.fspath(project_root),
                "--claim",
                claim,
                *(["--successor"] if successor else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=detach.start_new_session,
            creationflags=detach.creationflags,
            close_fds=True,
            cwd="/",
        )
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(paths.claim)
        return _failed(paths, f"spawn: {exc.strerror or exc}")
    return None


def _nothing_to_index(project_root: Path) -> bool:
    """True when the project's plan has no scope: a daemon would watch
    nothing for `idle_seconds` (docs/cli.md, "No scopes"). Loaded again
    here, on the rare spawn path only, so every caller gets the rule."""
    from ctindex.errors import PolicyError
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    try:
        return not load_plan(Project.at(project_root)).scopes
    except PolicyError:
        return False  # the caller already met (or will meet) the error itself


def _claim(paths: RuntimePaths, claim: str) -> str | None:
    """Create the startup claim atomically (O_EXCL); None when we hold it."""
    record = json.dumps({"token": claim, "time": time.time(), "pid": os.getpid()}).encode()
    for _attempt in range(2):
        try:
            fd = os.open(paths.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            if not _claim_stale(paths.claim):
                return STARTING
            with contextlib.suppress(FileNotFoundError):
                os.unlink(paths.claim)  # launcher died before its daemon took the lock
            continue
        except OSError as exc:
            return _failed(paths, f"claim {paths.claim}: {exc.strerror or exc}")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(record)
        except OSError as exc:  # ENOSPC, EIO: the claim is not persisted
            with contextlib.suppress(OSError):
                os.unlink(paths.claim)
            return _failed(paths, f"claim {paths.claim}: {exc.strerror or exc}")
        return None
    return STARTING


def starting(paths: RuntimePaths) -> bool:
    """A launcher's claim that is not stale: a daemon is on its way and has
    not taken the lock yet (it removes the claim when it has)."""
    return paths.claim.exists() and not _claim_stale(paths.claim)


def _claim_stale(path: Path) -> bool:
    try:
        age = time.time() - os.lstat(path).st_mtime
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return age > CLAIM_STALE_S or age < -CLAIM_STALE_S  # future mtime: clock moved back


def _failed(paths: RuntimePaths, error: str) -> str:
    record_spawn_failure(paths, error)
    return f"spawn failed: {error}"
