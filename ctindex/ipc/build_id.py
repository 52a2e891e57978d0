"""The build id: which code a daemon and its clients run (docs/daemon.md
"Build identity").

A daemon must serve only clients running the same code: an older build's
daemon would vouch for an index under its own plan and provider, and an
unacknowledged cache is never treated as clean. The id is a digest of the
*content* of every module of the package, so two installs of
identical code (two venvs) are one build, and an editable install whose
code changed is another. Hashing ~450 KB costs a few ms (hashlib's import
alone ~5 ms), too much for every search, so the digest is cached in the
per-user folder against each module's full stat fingerprint (size,
mtime_ns, ctime_ns, inode, device: never mtime alone) and computed at most
once per process.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ctindex.ipc.peer import owned_by_me, user_tag
from ctindex.ipc.records import read_record, write_record
from ctindex.ipc.runtime_dir import FALLBACK_BASE, ensure_private_dir

# The code below package_base(): ctindex/ holds all of it, in a wheel and in
# a checkout alike (docs/decisions/packaging.md).
PACKAGE = "ctindex"
_CODE_SUFFIXES = (".py", ".so", ".pyd")  # sources and native extension modules
BUILD_CACHE_NAME = "build-ids.json"
BUILD_CACHE_KEEP = 8  # package folders remembered (venvs, checkouts)
BUILD_RACY_NS = 2_000_000_000  # a module changed this recently may change again unseen
_build_id: str | None = None


def package_base() -> Path:
    """The folder holding the package folder: the repository for an editable
    install, site-packages for a wheel."""
    here = os.path.abspath(__file__)  # <base>/ctindex/ipc/build_id.py
    return Path(os.path.dirname(os.path.dirname(os.path.dirname(here))))


def _code_files(base: Path) -> list[tuple[str, os.stat_result]]:
    """(relative name, lstat) of every code file of the package, sorted."""
    found: list[tuple[str, os.stat_result]] = []
    stack = [PACKAGE]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(base / rel) as it:
                entries = list(it)
        except OSError:
            continue  # a folder that is not there is part of the identity too
        for entry in entries:
            name = f"{rel}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__" and not entry.name.startswith("."):
                    stack.append(name)
            elif entry.name.endswith(_CODE_SUFFIXES):
                with contextlib.suppress(OSError):
                    found.append((name, entry.stat(follow_symlinks=False)))
    found.sort(key=lambda item: item[0])
    return found


def compute_build_id(base: Path) -> str:
    """Digest of the names and contents of the package's code below `base`
    (uncached: reads every file)."""
    import hashlib  # only on a cache miss

    digest = hashlib.sha256()
    for name, _st in _code_files(base):
        try:
            with open(base / name, "rb") as fh:
                data = fh.read()
        except OSError:
            data = b"\0unreadable"
        digest.update(
            b"%d:%s\0%d:" % (len(name), name.encode("utf-8", "surrogateescape"), len(data))
        )
        digest.update(data)
    return digest.hexdigest()[:32]


def _is_private(folder: Path) -> bool:
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and owned_by_me(st) and not st.st_mode & 0o077


def _fingerprints(files: list[tuple[str, os.stat_result]]) -> list[list[str | int]]:
    return [
        [name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        for name, st in files
    ]


def build_id() -> str:
    """This process's build id (computed once; see compute_build_id)."""
    global _build_id
    if _build_id is None:
        _build_id = _cached_build_id(package_base())
    return _build_id


def _cached_build_id(base: Path) -> str:
    import time

    files = _code_files(base)
    prints = _fingerprints(files)
    cache = FALLBACK_BASE / f"ctindex-{user_tag()}" / BUILD_CACHE_NAME
    # Shared /tmp: trust the record only in a private folder of ours.
    records = (read_record(cache) if _is_private(cache.parent) else None) or {}
    entries = records.get("bases")
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    where = os.fspath(base)
    for entry in entries:
        if (
            entry.get("base") == where
            and entry.get("files") == prints
            and isinstance(entry.get("id"), str)
        ):
            return str(entry["id"])
    found = compute_build_id(base)
    newest = max((max(st.st_mtime_ns, st.st_ctime_ns) for _name, st in files), default=0)
    if newest > time.time_ns() - BUILD_RACY_NS:
        return found  # racily clean: an edit now could keep these fingerprints
    kept = [e for e in entries if e.get("base") != where][: BUILD_CACHE_KEEP - 1]
    from ctindex.errors import IndexWriteError  # a cache miss only

    with contextlib.suppress(OSError, IndexWriteError):
        ensure_private_dir(cache.parent)
        write_record(cache, {"bases": [{"base": where, "files": prints, "id": found}, *kept]})
    return found
