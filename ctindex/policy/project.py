"""Where a project is, and how filesystem paths become keys.

A key is the project-relative, '/'-separated path of a file as a ``str``
decoded with ``os.fsdecode`` (surrogateescape), so undecodable names survive:
``os.fsencode(key)`` returns the original bytes. The project root itself is
the key ``""``.

``Project.root`` is ``os.path.abspath`` of the folder as it was named (the
user's spelling, symlinks in it are not resolved), so reported paths look like
what the user typed. ``key`` also accepts paths spelled through the root's
real path, which is what ``os.getcwd()`` returns inside a symlinked checkout.
"""

from __future__ import annotations

import os
import posixpath
import stat as stat_mod
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ctindex.errors import UsageError, shown
from ctindex.policy.root import CT_DIR, find_root

StrPath = str | bytes | os.PathLike[str] | os.PathLike[bytes]

CONFIG_NAME = "index.jsonc"
INDEX_KEY = ".ct/okf"
RUNTIME_KEY = ".ct/okf/runtime"
_INDEX_PREFIX = INDEX_KEY + "/"


def _text(path: StrPath) -> str:
    return os.fsdecode(os.fspath(path))


def unrepresentable(text: str) -> str | None:
    """Why `text` can name no file on this system, or None when it can.

    The one check between text a user gave (an API argument, an MCP tool's
    JSON) and a system call: the OS refuses a NUL byte with a ValueError,
    and a surrogate that stands for no byte (one not made by
    surrogateescape) with a UnicodeEncodeError, neither an OSError the
    callers expect. Over-long names need no check: the OS answers them with
    ENAMETOOLONG, an OSError every caller already handles."""
    if "\0" in text:
        return "a NUL byte"
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return "a character no file name can hold"
    return None


def _relative(path: str, base: str) -> str | None:
    """`path` relative to `base` as a key, or None when it is not beneath it.

    Both are absolute and normalised; this is string work on purpose (no
    syscalls), the caller decides which spelling of the root to try.
    """
    if path == base:
        return ""
    prefix = base if base.endswith(os.sep) else base + os.sep
    if not path.startswith(prefix):
        return None
    rel = path[len(prefix) :]
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


class Located(NamedTuple):
    """A filesystem path placed in the project (see ``Project.locate``)."""

    display: str  # the absolute, normalised path (for paths outside the project)
    key: str | None  # lexical key, None when outside the project
    symlinked: str | None  # key of the first symlinked parent folder, if any
    escapes: bool  # lexically inside, but the OS would resolve it elsewhere


class Project:
    """A project folder (immutable; equal when the roots are). Not a
    dataclass: every command imports this, and dataclasses cost ~8 ms."""

    __slots__ = ("_below", "_real_root", "root")
    root: Path
    _real_root: str
    _below: dict[str, Path]  # the store's paths, made once: every query asks for them

    def __init__(self, root: Path, _real_root: str = "") -> None:
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "_real_root", _real_root)
        object.__setattr__(self, "_below", {})

    def _under_root(self, key: str) -> Path:
        got = self._below.get(key)
        if got is None:
            got = self._below[key] = self.root / key
        return got

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Project is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Project) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"Project(root={self.root!r})"

    @classmethod
    def at(cls, root: StrPath) -> Project:
        text = os.path.abspath(_text(root))
        return cls(Path(text), os.path.realpath(text))

    @classmethod
    def discover(cls, start: StrPath | None = None, explicit: StrPath | None = None) -> Project:
        """The nearest folder at or above the starting folder holding `.ct/`
        or `.git`, else the starting folder itself (see `start_folder` and
        `find_root` for telling the two apart). The starting folder is
        `explicit` (the -C folder, taken from `start`) when given, else
        `start` (default: cwd): -C DIR resolves exactly like starting in DIR,
        as with `git -C`, so -C into a bundle of a project is that project,
        never a nested one."""
        here = start_folder(start, explicit)
        return cls.at(find_root(here) or here)

    @property
    def ct_dir(self) -> Path:
        return self._under_root(CT_DIR)

    @property
    def config_path(self) -> Path:
        return self._under_root(f"{CT_DIR}/{CONFIG_NAME}")

    @property
    def index_dir(self) -> Path:
        return self._under_root(INDEX_KEY)

    @property
    def runtime_dir(self) -> Path:
        return self._under_root(RUNTIME_KEY)

    @property
    def real_root(self) -> str:
        return self._real_root or os.path.realpath(self.root)

    def path(self, key: str) -> Path:
        """The filesystem path of a key (no checks)."""
        return self.root / key if key else self.root

    def key(self, path: StrPath) -> str | None:
        """Lexical key of `path` (relative paths are taken from the project
        root); None when it lies outside the project."""
        text = _text(path)
        absolute = os.path.normpath(os.path.join(str(self.root), text))
        found = _relative(absolute, str(self.root))
        if found is None:
            found = _relative(absolute, self.real_root)
        return found

    def locate(self, path: StrPath, cwd: StrPath | None = None) -> Located:
        """Place a user-given path (relative to `cwd`) in the project and tell
        whether the OS would reach it through a symlinked folder.

        The key is lexical, as the user sees it; the OS resolves parent folders
        (never the last component, which is classified, not followed). When the
        two disagree the path cannot be represented beneath its root.
        """
        raw = os.path.join(_text(cwd or os.getcwd()), _text(path))
        absolute = os.path.normpath(raw)
        key = self.key(absolute)
        if key is None:
            return Located(absolute, None, None, False)
        symlinked = self.symlinked_parent(key)
        # '..' after a symlinked folder goes where the link points, not back up
        # lexically: compare the OS view of the parent with the lexical one.
        stripped = raw.rstrip(os.sep) or os.sep
        if os.path.basename(stripped) in (".", ".."):  # names a folder: resolve it all
            real, lexical = os.path.realpath(stripped), os.path.realpath(absolute)
        else:
            real = os.path.realpath(os.path.dirname(stripped))
            lexical = os.path.realpath(os.path.dirname(absolute))
        escapes = symlinked is None and real != lexical
        return Located(absolute, key, symlinked, escapes)

    def symlinked_parent(self, key: str) -> str | None:
        """Key of the first folder between the root and `key` (exclusive) that
        is a symlink, else None. One lstat per existing parent."""
        parts = key.split("/")[:-1]
        current = str(self.root)
        for i, part in enumerate(parts):
            current = os.path.join(current, part)
            try:
                st = os.lstat(current)
            except OSError:
                return None  # the rest does not exist: nothing to follow
            if stat_mod.S_ISLNK(st.st_mode):
                return "/".join(parts[: i + 1])
        return None


def start_folder(start: StrPath | None = None, explicit: StrPath | None = None) -> str:
    """The absolute folder a command starts in: `explicit` (-C) taken from
    `start` (default: cwd), or `start`. UsageError when -C is not a folder."""
    base = os.path.abspath(_text(start or os.getcwd()))
    if explicit is None:
        return base
    here = os.path.abspath(os.path.join(base, _text(explicit)))
    if not os.path.isdir(here):
        raise UsageError(
            f"{shown(_text(explicit))}: project folder does not exist or is not a folder"
        )
    return here


def is_index_key(key: str) -> bool:
    """True for the index storage folder and everything beneath it (always
    hard-excluded: the index must never index or watch itself)."""
    return key == INDEX_KEY or key.startswith(_INDEX_PREFIX)


def key_under(key: str, folder: str) -> bool:
    """`key` is the folder key `folder` or below it ("" is the project root,
    above every key). The one spelling of this test: a bare prefix check
    would put `a/bc` under `a/b`."""
    return not folder or key == folder or key.startswith(folder + "/")


def key_under_any(key: str, folders: Iterable[str]) -> bool:
    """`key_under` for some folder of `folders` (a short list: linear)."""
    return any(key_under(key, f) for f in folders)


def key_within(key: str, folders: set[str] | frozenset[str]) -> bool:
    """`key` is one of the folder keys `folders` or below one ("" is the
    project root). Walks up the key, O(depth), so filtering thousands of keys
    by a narrowed pass's folders stays linear in the keys."""
    if "" in folders:
        return True
    probe = key
    while probe:
        if probe in folders:
            return True
        probe = probe.rpartition("/")[0]
    return False


def is_normal_key(key: str) -> bool:
    """True for a key in canonical form: relative, '/'-separated, no '.', '..'
    or empty components (the project root is "")."""
    if key == "":
        return True
    if key.startswith("/") or key in (".", "..") or key.startswith("../"):
        return False
    return posixpath.normpath(key) == key
