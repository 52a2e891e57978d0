"""The effective plan: scopes, exclusions, limits and provider versions
after combining detected defaults with `.ct/index.jsonc`.

``load_plan(project)`` is cheap enough for every query: the config is one
small file and the derived roots (the index provider's) are cached against the full stat
fingerprints of the folders detection listed (ctindex/reconciler/fingerprint.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat as stat_mod
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ctindex.base.durable import WriteFailed, atomic_write
from ctindex.base.statefile import read_text_bounded
from ctindex.policy.config import (
    BOOL_SETTINGS,
    DEFAULT_EXCLUDE,
    INT_SETTINGS,
    SETTING_KEYS,
    Config,
    config_stamp,
    load_config,
    refuse_unsafe_store,
)
from ctindex.policy.decide import Decision, PlanPathFilter, decide_key, decide_path
from ctindex.policy.project import INDEX_KEY, Project, StrPath, key_under
from ctindex.providers import INDEX_PROVIDER, PROVIDERS, ProviderInfo
from ctindex.reconciler.fingerprint import Fingerprint, fingerprint_of, from_json, racily_clean

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

DERIVED, PROJECT, HARD = "derived", "project", "hard"
# Bump when the decision rules themselves change: every plan digest changes,
# so every scope is invalidated.
POLICY_VERSION = 1
ROOTS_CACHE = "roots.json"
# Bumped when the roots cache's layout changes: version 1 held folder mtimes
# alone, which reproducible archives and rsync -a keep while adding a root.
_ROOTS_CACHE_FORMAT = 2
ROOTS_CACHE_LIMIT = 16 << 20  # a fingerprint per visited folder: far below this


@dataclass(frozen=True)
class Scope:
    root: str  # key; "" is the project root
    provider: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    origin: str  # derived | project

    def contains(self, key: str) -> bool:
        return key_under(key, self.root)

    def relative(self, key: str) -> str:
        return key[len(self.root) + 1 :] if self.root else key

    def as_dict(self) -> dict[str, object]:
        return {
            "root": self.root or ".",
            "provider": self.provider,
            "include": list(self.include),
            "exclude": list(self.exclude),
        }


class PatternSet:
    """Gitignore-style patterns compiled once: ctindex/policy/glob.py translates
    them (the same matches as pathspec's translation, but without
    super-linear backtracking), and their regexes are joined into one
    alternation so the hot path (the reconciler's accept/descend on every
    entry) costs one regex match instead of one per pattern. ``first`` names
    the deciding pattern for `why`."""

    def __init__(self, patterns: Iterable[str]) -> None:
        from ctindex.policy.glob import translate

        self.patterns = tuple(patterns)
        # Every accepted pattern is positive (config.pattern_problem refuses `!`).
        sources = [(text, translate(text)) for text in self.patterns]
        self._regexes: list[tuple[str, re.Pattern[str]]] = [
            (text, re.compile(source)) for text, source in sources
        ]
        self._any = (
            re.compile("|".join(f"(?:{source})" for _text, source in sources)) if sources else None
        )

    def matches(self, path: str) -> bool:
        return self._any is not None and self._any.match(path) is not None

    def bound_match(self) -> Callable[[str], object]:
        """A `match(path)` returning None when nothing matches (hot loops)."""
        return self._any.match if self._any is not None else _never

    def first(self, path: str) -> str | None:
        for text, regex in self._regexes:
            if regex.match(path):
                return text
        return None


def _never(_path: str) -> None:
    return None


@lru_cache(maxsize=64)
def compile_patterns(patterns: tuple[str, ...]) -> PatternSet:
    """Shared compiled sets: plans reloaded per query reuse them."""
    return PatternSet(patterns)


_memory_default: int | None = None


def default_daemon_memory() -> int:
    """min(2 GiB, physical RAM / 20), recomputed on each machine."""
    global _memory_default
    if _memory_default is None:
        import psutil

        _memory_default = min(2 << 30, psutil.virtual_memory().total // 20)
    return _memory_default


@dataclass(frozen=True)
class Settings:
    watch: bool
    debounce_ms: int
    audit_seconds: int
    idle_seconds: int
    max_file_bytes: int
    max_build_memory_bytes: int
    barrier_timeout_ms: int
    share_barrier_ms: int
    configured_max_daemon_memory_bytes: int | None
    gitignore_index: bool = True
    share_index_with_group: bool = False
    explicit: frozenset[str] = frozenset()  # keys the project store sets

    @classmethod
    def from_config(cls, config: Config) -> Settings:
        values: dict[str, Any] = dict(BOOL_SETTINGS)
        values.update(
            {k: d for k, (d, _lo, _hi) in INT_SETTINGS.items() if k != "max_daemon_memory_bytes"}
        )
        values.update({k: v for k, v in config.settings.items() if k != "max_daemon_memory_bytes"})
        memory = config.settings.get("max_daemon_memory_bytes")
        return cls(
            configured_max_daemon_memory_bytes=None if memory is None else int(memory),
            explicit=frozenset(config.settings),
            **values,
        )

    @property
    def max_daemon_memory_bytes(self) -> int:
        """The effective ceiling: configured, else computed (psutil, lazily)."""
        if self.configured_max_daemon_memory_bytes is not None:
            return self.configured_max_daemon_memory_bytes
        return default_daemon_memory()

    def origin(self, key: str) -> str:
        if key in self.explicit:
            return PROJECT
        return "computed" if key == "max_daemon_memory_bytes" else "default"

    def effective(self) -> dict[str, int | bool]:
        return {k: getattr(self, k) for k in SETTING_KEYS}


# Hard exclusions as `scopes` reports them; decide.py enforces them.
HARD_RULES: tuple[dict[str, str | None], ...] = (
    {"pattern": INDEX_KEY + "/**", "rule": "index storage"},
    {"pattern": None, "rule": "anything that is not a regular file (symlinks are never followed)"},
    {
        "pattern": None,
        "rule": "paths not representable beneath their root (a symlinked parent folder, '..')",
    },
)


@dataclass
class Plan:
    project: Project
    config: Config
    scopes: tuple[Scope, ...]
    exclude: tuple[str, ...]
    exclude_origin: str
    settings: Settings
    derived_roots: tuple[str, ...] | None = None  # None when scopes are explicit
    # What the plan depends on besides the config file: the fingerprints of
    # the folders root detection listed ({} with explicit scopes; None when a
    # folder was racily clean). The query fast path and the daemon re-check them.
    detected_from: dict[str, Fingerprint] | None = None
    # The config file's stat (ctindex.policy.config.config_stamp) taken *before* it
    # was read, and the clock just before that: a record made from this plan
    # vouches for the config it was computed from, never for a later one.
    config_stamp: list[int] | str | None = None
    stamped_ns: int = 0

    # --- compiled patterns -------------------------------------------------
    @cached_property
    def exclude_set(self) -> PatternSet:
        return compile_patterns(self.exclude)

    @cached_property
    def compiled_scopes(self) -> tuple[tuple[Scope, PatternSet, PatternSet], ...]:
        """(scope, include set, exclude set) in scope order, compiled once."""
        return tuple(
            (s, compile_patterns(s.include), compile_patterns(s.exclude)) for s in self.scopes
        )

    def find_scope(self, key: str) -> tuple[Scope, PatternSet, PatternSet] | None:
        """The first scope (in order) whose root contains `key`, with its sets."""
        for entry in self.compiled_scopes:
            if entry[0].contains(key):
                return entry
        return None

    def walk_roots(self) -> tuple[str, ...]:
        """Scope roots with nested ones dropped, so no folder is walked twice."""
        roots = sorted({s.root for s in self.scopes})
        kept: list[str] = []
        for root in roots:
            if not any(key_under(root, k) for k in kept):
                kept.append(root)
        return tuple(kept)

    # --- digests -------------------------------------------------------------
    def digest(self) -> str:
        """Stable hash of everything that decides index content: scopes,
        exclusions, provider versions, size limit. Origins and daemon
        timings are left out, so `init --write` keeps the digest."""
        return self._digest

    @cached_property
    def _digest(self) -> str:
        # Once per plan, like the compiled patterns: every query asks for it.
        return _sha256(
            {
                "policy": POLICY_VERSION,
                "scopes": [s.as_dict() for s in self.scopes],
                "exclude": list(self.exclude),
                "providers": {
                    p: PROVIDERS[p].versions() for p in sorted({s.provider for s in self.scopes})
                },
                "max_file_bytes": self.settings.max_file_bytes,
            }
        )

    def scope_digest(self, scope: Scope) -> str:
        """Hash of what decides one scope's content, including earlier scopes
        nested with it (the first containing scope decides a path)."""
        index = self.scopes.index(scope)
        shadowing = [
            s.root for s in self.scopes[:index] if s.contains(scope.root) or scope.contains(s.root)
        ]
        return _sha256(
            {
                "policy": POLICY_VERSION,
                "scope": scope.as_dict(),
                "shadowing": shadowing,
                "exclude": list(self.exclude),
                "provider": PROVIDERS[scope.provider].versions(),
                "max_file_bytes": self.settings.max_file_bytes,
            }
        )

    # --- decisions (ctindex/policy/decide.py: the rules; it knows the plan
    # only as a type, so the dependency runs one way, plan -> decide) ----------
    def decide(self, path: StrPath, cwd: StrPath | None = None) -> Decision:
        """Decision for a filesystem path; relative paths are taken from
        `cwd`, which defaults to the project root."""
        return decide_path(self, path, self.project.root if cwd is None else cwd)

    def decide_key(self, key: str, st: os.stat_result | None = None) -> Decision:
        """Decision for a key; without `st` the path is lstat'ed and its
        parent folders checked for symlinks."""
        return decide_key(self, key, st)

    def path_filter(self) -> PlanPathFilter:
        return PlanPathFilter(self)


def scope_root_of(plan: Plan, key: str) -> str:
    """The root of the scope that decides `key` ("" when none does): the
    folder its concept ID is taken relative to. One rule for the indexer and
    the `--direct` oracle, so both name a document alike."""
    found = plan.find_scope(key)
    return found[0].root if found else ""


def _sha256(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def load_plan(project: Project) -> Plan:
    """The effective plan; raises PolicyError for a malformed project store."""
    refuse_unsafe_store(project)
    # Stamp first, read second: a change in between makes the stamp older than
    # the plan (the next check re-plans once more), never the other way round.
    stamped_ns = time.time_ns()
    stamp = config_stamp(project.config_path)
    config = load_config(project.config_path)
    settings = Settings.from_config(config)
    exclude = config.exclude if config.exclude is not None else DEFAULT_EXCLUDE
    exclude_origin = PROJECT if config.exclude is not None else DERIVED
    if config.scopes is not None:
        scopes = tuple(
            Scope(s.root, s.provider, s.include, s.exclude, PROJECT) for s in config.scopes
        )
        return Plan(
            project,
            config,
            scopes,
            exclude,
            exclude_origin,
            settings,
            detected_from={},
            config_stamp=stamp,
            stamped_ns=stamped_ns,
        )
    # Derived scopes come from the index provider's root marker
    # (ctindex/providers/__init__.py).
    deriving = PROVIDERS[INDEX_PROVIDER]
    roots, folders = _detect(project, compile_patterns(exclude), deriving)
    scopes = tuple(
        Scope(root, deriving.id, deriving.default_include, (), DERIVED) for root in roots
    )
    return Plan(
        project,
        config,
        scopes,
        exclude,
        exclude_origin,
        settings,
        roots,
        folders,
        config_stamp=stamp,
        stamped_ns=stamped_ns,
    )


# --- root detection (docs/decisions/policy.md, "Derived plan") -------------------


def detect_roots(
    project: Project, exclude: PatternSet, provider: ProviderInfo | None = None
) -> tuple[str, ...]:
    """Folders at depth 0..`root_depth` holding a regular `root_marker` file
    of `provider` (default: the index provider; okf-markdown: 0..3,
    `index.md`), topmost winning, hidden and excluded folders skipped.
    Cached in the runtime folder against the full fingerprint of every
    folder looked at: a new or removed marker or sub-folder changes its
    parent's ctime even when a tool (tar --mtime, rsync -a) puts the old
    mtime back."""
    return _detect(project, exclude, provider or PROVIDERS[INDEX_PROVIDER])[0]


def _detect(
    project: Project, exclude: PatternSet, provider: ProviderInfo
) -> tuple[tuple[str, ...], dict[str, Fingerprint] | None]:
    """(roots, fingerprints of the folders listed; None when one was racily clean)."""
    if provider.root_marker is None:
        return (), {}
    fingerprint = _sha256(
        {
            "depth": provider.root_depth,
            "marker": provider.root_marker,  # another marker: another set of roots
            "exclude": list(exclude.patterns),
            "format": _ROOTS_CACHE_FORMAT,
        }
    )
    cache = project.runtime_dir / ROOTS_CACHE
    cached = _read_cache(project, cache, fingerprint)
    if cached is not None:
        return cached
    started = time.time_ns()
    roots, seen = _scan_roots(project, exclude, provider.root_marker, provider.root_depth)
    # Racily clean folders (mtime or ctime within timestamp granularity of the
    # scan) could change again keeping their fingerprint: do not cache them
    # (git's rule, ctindex/reconciler/fingerprint.py).
    if not any(racily_clean(fp, started) for fp in seen.values()):
        _write_cache(
            project,
            cache,
            {
                "fingerprint": fingerprint,
                "roots": list(roots),
                "folders": {k: list(fp) for k, fp in seen.items()},
            },
        )
        return roots, seen
    return roots, None


class _Looked(NamedTuple):
    """One folder as root detection saw it (None: it could not look)."""

    fingerprint: Fingerprint | None
    marker: bool  # holds the root marker, a regular file
    folders: list[str] | None  # its sub-folders' names (None: not listed)


def _look(folder: Path, marker_name: str, list_folders: bool) -> _Looked:
    try:
        fp = fingerprint_of(os.lstat(folder))
    except OSError:
        return _Looked(None, False, None)
    try:
        marker = stat_mod.S_ISREG(os.lstat(folder / marker_name).st_mode)
    except FileNotFoundError:
        marker = False
    except OSError:
        return _Looked(fp, False, None)
    if marker or not list_folders:
        return _Looked(fp, marker, None)
    try:
        with os.scandir(folder) as entries:
            names = [
                e.name
                for e in entries
                if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return _Looked(fp, False, None)
    return _Looked(fp, False, names)


def _scan_roots(
    project: Project, exclude: PatternSet, marker_name: str, max_depth: int
) -> tuple[tuple[str, ...], dict[str, Fingerprint]]:
    """Breadth first, one level at a time. On a network filesystem the
    folders of a level are looked at by WALK_THREADS threads at once: each
    look is a few round trips (ctindex/policy/netfs.py); the result is the
    same in any order."""
    from concurrent.futures import ThreadPoolExecutor

    from ctindex.policy.netfs import walk_threads

    roots: list[str] = []
    seen: dict[str, Fingerprint] = {}
    frontier = [""]
    threads = walk_threads(project.root)
    pool = ThreadPoolExecutor(max_workers=threads) if threads else None
    try:
        for depth in range(max_depth + 1):
            following = _level(
                project, exclude, marker_name, frontier, depth < max_depth, pool, roots, seen
            )
            frontier = sorted(following)
    finally:
        if pool is not None:
            pool.shutdown()
    return tuple(sorted(roots)), seen


def _level(
    project: Project,
    exclude: PatternSet,
    marker_name: str,
    frontier: list[str],
    deeper: bool,
    pool: ThreadPoolExecutor | None,
    roots: list[str],
    seen: dict[str, Fingerprint],
) -> list[str]:
    """One level of _scan_roots: its roots and fingerprints noted, the
    next level's folders returned."""

    def look(key: str) -> _Looked:
        return _look(project.path(key), marker_name, deeper)

    many = pool is not None and len(frontier) > 1
    looks = pool.map(look, frontier) if many and pool is not None else map(look, frontier)
    following: list[str] = []
    for key, looked in zip(frontier, looks, strict=True):
        if looked.fingerprint is None:
            continue
        seen[key] = looked.fingerprint
        if looked.marker:
            roots.append(key)
            continue
        if looked.folders is None:
            continue
        for name in looked.folders:
            child = f"{key}/{name}" if key else name
            if child == INDEX_KEY or exclude.matches(child + "/"):
                continue
            following.append(child)
    return following


def _read_cache(
    project: Project, cache: Path, fingerprint: str
) -> tuple[tuple[str, ...], dict[str, Fingerprint]] | None:
    try:
        data = json.loads(read_text_bounded(cache, ROOTS_CACHE_LIMIT))
        if data.get("fingerprint") != fingerprint:
            return None
        folders: dict[str, Fingerprint] = {}
        for key, value in data["folders"].items():
            recorded = from_json(value)
            st = os.lstat(project.path(str(key)))
            if (
                recorded is None
                or fingerprint_of(st) != recorded
                or not stat_mod.S_ISDIR(st.st_mode)
            ):
                return None
            folders[str(key)] = recorded
        return tuple(str(root) for root in data["roots"]), folders
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing or damaged cache: detect again


def _write_cache(project: Project, cache: Path, data: dict[str, object]) -> None:
    # The policy commands are read-only: only reuse a runtime folder
    # that indexing already created, never create one. Failures are fine.
    if not project.runtime_dir.is_dir():
        return
    with contextlib.suppress(WriteFailed):  # a cache: not synced, and best effort
        atomic_write(cache, json.dumps(data, ensure_ascii=True).encode("ascii"), sync=False)
