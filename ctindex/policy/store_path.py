"""Where the store lives, opened without following a link, and how readable it is.

The store path has three folders below the project root: ``.ct`` (the
project store: `index.jsonc`, `.gitignore`), ``.ct/okf`` (the index) and
``.ct/okf/runtime`` (the daemon's files). ``check_store`` is the one check
every entry point runs before it reads or writes any of them (the plan
loader, the query fast path, the indexer, the daemon's runtime folder): each
existing folder is opened relative to its parent's descriptor with
``O_NOFOLLOW | O_DIRECTORY``, so a symbolic link put in the place of any of
them is refused (``UnsafeStorePath``, exit 2) before anything is written,
and so is a folder of another user (docs/cli.md, "Refused store folders").
A walk before a write (``create``, ``write``) also refuses a project folder
of another user: nobody makes `.ct` in a project that is not theirs, writes
under it or starts a daemon there (``foreign_project``), unless the project
shares its index with a group on purpose (docs/format.md, "Store folders").
Without descriptor-relative opens (Windows; the ``no-dir-fd`` simulation)
each folder is ``lstat``-ed from the root down instead: the same refusals,
decided on the same facts.

Modes (docs/format.md, "Modes"): ``.ct/okf`` is ``0700`` and every file in
it ``0600`` unless the project shares its index with a group deliberately
(``"share_index_with_group": true``: ``2770`` and ``0660``). A file's mode
is derived from its folder's (``file_mode``), so the store's writers apply
it in one place (ctindex/base/durable.py) and a store made readable by an
older version is tightened by the next writing pass (``conform_files``).

Only the standard library and ctindex.errors are imported: the query fast
path runs ``check_store`` too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from ctindex.base.durable import file_mode as file_mode  # the store's file mode
from ctindex.errors import UnsafeStorePath
from ctindex.reconciler.platform_features import has_dir_fd, has_getuid

NAMES = (".ct", "okf", "runtime")
KEYS = (".ct", ".ct/okf", ".ct/okf/runtime")
INDEX_DEPTH = 2  # `create` depth that makes `.ct` and `.ct/okf`
PRIVATE_DIR = 0o700
SHARED_DIR = 0o2770  # setgid: files made by any member keep the folder's group
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _never() -> bool:
    return False


Guard = Callable[[], None]


def check_store(
    root: str | os.PathLike[str],
    shared: Callable[[], bool] = _never,
    *,
    create: int = 0,
    index_mode: int | None = None,
    write: bool = False,
) -> None:
    """Refuse (UnsafeStorePath) a store path whose folders are not real
    folders of this user. `shared` says whether the project shares its index
    with a group (asked only when a folder of another user is met: a folder
    of a group this process is in is then accepted). The first `create`
    folders (`.ct`, `.ct/okf`, `.ct/okf/runtime`) are made where missing;
    `index_mode` is then given to `.ct/okf` when it differs (made or not).
    `write` (implied by `create`): the caller writes under the store or
    starts a daemon next, which a project folder of another user refuses
    too, after the folders that exist were checked and before one is made."""
    if has_dir_fd():
        _walk_descriptors(os.fspath(root), shared, create, index_mode, write or create > 0)
    else:
        _walk_paths(os.fspath(root), shared, create, index_mode, write or create > 0)


def foreign_project(root: str | os.PathLike[str], st: os.stat_result | None = None) -> str | None:
    """The refusal when the project folder `root` (its stat `st`, taken here
    when not given) belongs to another user, else None (ours, gone, or a
    platform without uids). The owner is named, so the line says whom to
    run ctindex as (docs/cli.md, "Refused store folders")."""
    if st is None:
        try:
            st = os.stat(root)
        except OSError:
            return None
    if _owned(st):
        return None
    owner, name = _who(st.st_uid)
    me, _ = _who(os.geteuid())
    run_as = f"run it as {name}" if name else "run it as the folder's owner"
    return (
        f"{os.fspath(root)} is owned by {owner}, not by {me}: ctindex does not write "
        f"into another user's project ({run_as}, or search with --direct to read the "
        "files without an index: docs/format.md, Store folders)"
    )


def _who(uid: int) -> tuple[str, str | None]:
    """`alice (uid 1000)` and `alice`, or `uid 1000` and None for a uid
    without a name."""
    try:
        import pwd

        name: str | None = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        name = None
    return (f"{name} (uid {uid})" if name else f"uid {uid}"), name


def _writer_guard(root: str, st: os.stat_result, shared: Callable[[], bool]) -> Guard:
    """What a writing walk asks once, before it makes a folder and at its end:
    UnsafeStorePath in a project folder of another user unless the project
    shares its index with a group (whose folders the walk checks as ever)."""
    asked: list[bool] = []

    def guard() -> None:
        if asked:
            return
        asked.append(True)
        why = foreign_project(root, st)
        if why is not None and not shared():
            raise UnsafeStorePath(why)

    return guard


def _nothing() -> None:
    return None


def _walk_descriptors(
    root: str, shared: Callable[[], bool], create: int, mode: int | None, write: bool
) -> None:
    try:
        parent = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError:
        return  # no project folder to speak of: whatever runs next says so
    above: os.stat_result | None = None
    guard = _writer_guard(root, os.fstat(parent), shared) if write else _nothing
    try:
        for depth, name in enumerate(NAMES):
            child = _open_child(parent, name, depth, create, guard)
            if child is None:
                break
            os.close(parent)
            parent = child
            st = os.fstat(child)
            _check_owner(st, KEYS[depth], shared)
            if depth == 1 and mode is not None and above is not None and _owned(st):
                guard()
                chown = partial(os.fchown, child)
                _fix_mode(st, mode, above.st_gid, partial(os.fchmod, child), chown)
            above = st
    finally:
        os.close(parent)
    guard()


def _open_child(parent: int, name: str, depth: int, create: int, guard: Guard) -> int | None:
    """The folder `name` in `parent`, opened without following a link; None
    when it does not exist and is not to be made, or cannot be opened (a
    folder we may not search: what reads it next says so, as before)."""
    flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        if depth >= create:
            return None
    except OSError:  # ELOOP for a link, ENOTDIR for a file
        _refuse(_lstat_at(parent, name), KEYS[depth])
        return None
    guard()  # before the first folder is made
    with contextlib.suppress(FileExistsError):  # made meanwhile, or a link: the open decides
        os.mkdir(name, PRIVATE_DIR if depth else 0o777, dir_fd=parent)
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError:
        _refuse(_lstat_at(parent, name), KEYS[depth])
        return None


def _lstat_at(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None


def _walk_paths(
    root: str, shared: Callable[[], bool], create: int, mode: int | None, write: bool
) -> None:
    """The lstat walk for platforms without descriptor-relative opens."""
    try:
        guard = _writer_guard(root, os.stat(root), shared) if write else _nothing
    except OSError:
        return  # no project folder to speak of: whatever runs next says so
    current = root
    above: os.stat_result | None = None
    for depth, name in enumerate(NAMES):
        current = os.path.join(current, name)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if depth >= create:
                break
            guard()  # before the first folder is made
            with contextlib.suppress(FileExistsError):
                os.mkdir(current, PRIVATE_DIR if depth else 0o777)
            st = os.lstat(current)
        if not stat.S_ISDIR(st.st_mode):
            _refuse(st, KEYS[depth])
            break
        _check_owner(st, KEYS[depth], shared)
        if depth == 1 and mode is not None and above is not None and _owned(st):
            guard()
            chown = partial(os.chown, current, follow_symlinks=False)
            _fix_mode(st, mode, above.st_gid, partial(os.chmod, current), chown)
        above = st
    guard()


def _refuse(st: os.stat_result | None, key: str) -> None:
    """UnsafeStorePath for a symbolic link in the place of `key`. Anything
    else that cannot be opened as a folder (a file, a folder we may not
    search) ends the walk: what reads it next says so, as it always did (a
    runtime "folder" that is a file costs the daemon, never the answer)."""
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UnsafeStorePath(
            f"{key} is a symbolic link; refusing to follow it "
            "(the index is kept only in real folders of the project: remove the link)"
        )


def _owned(st: os.stat_result) -> bool:
    return not has_getuid() or st.st_uid == os.geteuid()


def _my_groups() -> set[int]:
    return {os.getegid(), *os.getgroups()}


def _check_owner(st: os.stat_result, key: str, shared: Callable[[], bool]) -> None:
    """A folder of another user is accepted only in a project that shares its
    index with a group, when it belongs to a group of ours and no one else
    can write in it."""
    if _owned(st):
        return
    if shared() and st.st_gid in _my_groups() and not st.st_mode & stat.S_IWOTH:
        return
    raise UnsafeStorePath(
        f"{key} is owned by another user (uid {st.st_uid}); refusing to use it "
        "(run ctindex as its owner, or share the index with a group: docs/format.md)"
    )


def _fix_mode(
    st: os.stat_result,
    mode: int,
    group: int,
    chmod: Callable[[int], None],
    chown: Callable[[int, int], None],
) -> None:
    """Give `.ct/okf` its mode; a group-shared one also the group of `.ct`
    (the team's), so its members can open it whoever made it."""
    if mode & stat.S_ISGID and st.st_gid != group and has_getuid():
        chown(-1, group)
    if stat.S_IMODE(st.st_mode) != mode:
        chmod(mode)


def prepare_index(root: str | os.PathLike[str], shared: bool) -> bool:
    """Before a writing pass: `.ct` and `.ct/okf` made where missing, without
    following a link, `.ct/okf` given the project's mode and its files theirs
    (a store an older version made readable is tightened by the next pass).
    True when no index has been published yet (the first build)."""
    index = Path(root, KEYS[1])
    first = not os.path.lexists(index / "MANIFEST")
    check_store(
        root, lambda: shared, create=INDEX_DEPTH, index_mode=SHARED_DIR if shared else PRIVATE_DIR
    )
    conform_files(index)
    return first


def conform_files(folder: Path) -> int:
    """Give every file of ours directly in `folder` the mode `file_mode`
    derives from it (a store made by an older version, or while the folder
    was wider, is tightened here), and in a group-shared folder its group.
    Returns how many were changed."""
    wanted = file_mode(folder)
    try:
        group = os.stat(folder).st_gid if wanted & stat.S_IRGRP else None
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    changed = 0
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or not _owned(st):
                continue
            if group is not None and st.st_gid != group:
                os.chown(entry.path, -1, group, follow_symlinks=False)
                changed += 1
            if stat.S_IMODE(st.st_mode) != wanted:
                os.chmod(entry.path, wanted, follow_symlinks=False)
                changed += 1
        except (OSError, NotImplementedError):
            continue  # gone meanwhile, or no lchmod: the next pass tries again
    return changed


def wider_than_files(
    root: str | os.PathLike[str], indexed: Callable[[], Iterable[str]], *, limit: int = 3
) -> str | None:
    """One line when `.ct/okf` lets a group or everyone read the index while
    some indexed file (the keys `indexed` gives: asked only then) is not
    readable by them, else None (status, verify). A reader needs search
    permission on every folder above a file, so the folders are checked too
    (once each)."""
    base = os.fspath(root)
    try:
        store = os.stat(os.path.join(base, KEYS[1]))
    except OSError:
        return None
    audiences = _audiences(store)
    if not audiences:
        return None
    folders: dict[str, bool] = {}
    narrower: list[str] = []
    count = 0
    for key in indexed():
        for who in audiences:
            if not _reaches(base, key, who, store.st_gid, folders):
                count += 1
                if len(narrower) < limit:
                    narrower.append(key)
                break
    if not count:
        return None
    names = ", ".join(f'"{k}"' for k in narrower) + (", ..." if count > limit else "")
    widest = "everyone" if "other" in audiences else f"group {store.st_gid}"
    return (
        f"{KEYS[1]} (mode {stat.S_IMODE(store.st_mode):04o}) lets {widest} read the index, "
        f"but {count} indexed file(s) are not readable to them ({names}); "
        "see docs/format.md, Modes"
    )


def _audiences(store: os.stat_result) -> list[str]:
    """Who besides the owner can open files of the store folder (search
    permission is enough: MANIFEST names every file)."""
    found = []
    if store.st_mode & stat.S_IXOTH:
        found.append("other")
    if store.st_mode & stat.S_IXGRP:
        found.append("group")
    return found


def _reaches(base: str, key: str, who: str, gid: int, folders: dict[str, bool]) -> bool:
    parts = key.split("/")
    for i in range(len(parts) - 1):
        folder = "/".join(parts[: i + 1])
        if folder not in folders:
            folders[folder] = _allows(os.path.join(base, folder), who, gid, stat.S_IXOTH)
        if not folders[folder]:
            return False
    return _allows(os.path.join(base, key), who, gid, stat.S_IROTH)


def _allows(path: str, who: str, gid: int, other_bit: int) -> bool:
    """`other_bit` (read or search, as the "others" bit) granted to `who`:
    everyone, or members of group `gid` (by the group bits when the file is
    that group's, else by the others' bits)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return True  # gone: nothing of it to expose
    if st.st_mode & other_bit:
        return True
    group_bit = other_bit << 3
    return who == "group" and st.st_gid == gid and bool(st.st_mode & group_bit)
