"""The per-path decision, in its precedence order
(docs/decisions/policy.md):

1. hard: outside the project, not representable beneath the root, index
   storage, not a regular file;
2. global and scope-local exclusions;
3. a scope root and one of its include patterns;
4. the scope's provider: suffix claimed, name not reserved, size within limit;
5. included.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ctindex.errors import shown
from ctindex.policy.project import (
    INDEX_KEY,
    StrPath,
    is_index_key,
    is_normal_key,
    unrepresentable,
)
from ctindex.providers import PROVIDERS, any_claims

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan

INCLUDED = "included"
EXCLUDED = "excluded"
HARD_EXCLUDED = "hard-excluded"
OUTSIDE_SCOPE = "outside-scope"
UNSUPPORTED_PROVIDER = "unsupported-provider"
UNSUPPORTED_TYPE = "unsupported-type"
TOO_LARGE = "too-large"
NOT_REGULAR = "not-regular"
REASONS = (
    INCLUDED,
    EXCLUDED,
    HARD_EXCLUDED,
    OUTSIDE_SCOPE,
    UNSUPPORTED_PROVIDER,
    UNSUPPORTED_TYPE,
    TOO_LARGE,
    NOT_REGULAR,
)

HARD = "hard"
INDEX_PATTERN = INDEX_KEY + "/**"
_INDEX_PREFIX = INDEX_KEY + "/"
MISSING = "does not exist"


@dataclass(frozen=True)
class Decision:
    path: str  # key ("" = project root), or the absolute path when outside
    reason: str  # one of REASONS
    scope: str | None  # root key of the deciding scope
    pattern: str | None  # the pattern that decided, if any
    origin: str | None  # derived | project | hard
    provider: str | None
    detail: str

    @property
    def included(self) -> bool:
        return self.reason == INCLUDED

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)


def _kind(mode: int) -> str:
    if stat_mod.S_ISDIR(mode):
        return "a directory"
    if stat_mod.S_ISLNK(mode):
        return "a symbolic link (never followed)"
    if stat_mod.S_ISFIFO(mode):
        return "a fifo"
    if stat_mod.S_ISSOCK(mode):
        return "a socket"
    if stat_mod.S_ISCHR(mode) or stat_mod.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _human(size: int) -> str:
    from ctindex.base.output import human_bytes

    return human_bytes(size)


def decide_path(plan: Plan, path: StrPath, cwd: StrPath) -> Decision:
    """Decision for a user-given filesystem path (relative to `cwd`)."""
    for what, given in (("path", path), ("folder it is taken from", cwd)):
        problem = unrepresentable(os.fsdecode(os.fspath(given)))
        if problem is not None:  # no file has this name: decided before any syscall
            return Decision(
                shown(os.fsdecode(os.fspath(path))),
                HARD_EXCLUDED,
                None,
                None,
                HARD,
                None,
                f"cannot name a file: the {what} holds {problem}",
            )
    located = plan.project.locate(path, cwd)
    if located.key is None:
        return Decision(
            located.display,
            OUTSIDE_SCOPE,
            None,
            None,
            None,
            None,
            f"outside the project {plan.project.root}",
        )
    key = located.key
    if located.symlinked is not None or located.escapes:
        where = (
            f"parent folder {located.symlinked!r} is a symbolic link"
            if located.symlinked is not None
            else "'..' after a symbolic link leads elsewhere"
        )
        return Decision(
            key,
            HARD_EXCLUDED,
            None,
            None,
            HARD,
            None,
            f"cannot be represented beneath the project root: {where}",
        )
    return decide_key(plan, key, None, check_parents=False)


def decide_key(
    plan: Plan, key: str, st: os.stat_result | None = None, check_parents: bool = True
) -> Decision:
    """Decision for a key. Without `st` the path is lstat'ed (and, with
    `check_parents`, its parent folders are checked for symlinks)."""
    if not is_normal_key(key):
        return Decision(
            key,
            HARD_EXCLUDED,
            None,
            None,
            HARD,
            None,
            "cannot be represented beneath the project root ('..', '.' or '//')",
        )
    if is_index_key(key):
        return Decision(key, HARD_EXCLUDED, None, INDEX_PATTERN, HARD, None, "index storage")
    absent = MISSING
    if st is None:
        if check_parents:
            linked = plan.project.symlinked_parent(key)
            if linked is not None:
                return Decision(
                    key,
                    HARD_EXCLUDED,
                    None,
                    None,
                    HARD,
                    None,
                    "cannot be represented beneath the project root: "
                    f"parent folder {linked!r} is a symbolic link",
                )
        try:
            st = os.lstat(plan.project.path(key))
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as exc:  # e.g. an unsearchable parent: decide on the path alone
            st, absent = None, f"cannot be inspected ({exc.strerror or exc})"
    return classify(plan, key, st, absent)


def classify(plan: Plan, key: str, st: os.stat_result | None, absent: str = MISSING) -> Decision:
    """Steps after the path-shape checks; `st` None means the path could not
    be stat'ed (`absent` says why, appended to the detail). Makes no system
    calls."""

    def made(
        reason: str,
        scope: str | None = None,
        pattern: str | None = None,
        origin: str | None = None,
        provider: str | None = None,
        detail: str = "",
    ) -> Decision:
        if st is None:
            detail = f"{detail}; {absent}" if detail else absent
        return Decision(key, reason, scope, pattern, origin, provider, detail)

    if st is not None and not stat_mod.S_ISREG(st.st_mode):
        return made(NOT_REGULAR, origin=HARD, detail=_kind(st.st_mode))

    if plan.exclude_set.matches(key):
        return made(
            EXCLUDED,
            pattern=plan.exclude_set.first(key),
            origin=plan.exclude_origin,
            detail="global exclude",
        )

    found = plan.find_scope(key)
    if found is None:
        return made(OUTSIDE_SCOPE, detail="not beneath any scope root")
    scope, include, exclude = found
    rel = scope.relative(key)
    if exclude.matches(rel):
        return made(
            EXCLUDED, scope.root, exclude.first(rel), scope.origin, scope.provider, "scope exclude"
        )
    if not include.matches(rel):
        return made(
            OUTSIDE_SCOPE,
            scope.root,
            None,
            scope.origin,
            scope.provider,
            "no include pattern of the scope matches",
        )
    pattern = include.first(rel)
    provider = PROVIDERS[scope.provider]
    name = key.rsplit("/", 1)[-1]
    if not provider.claims_extension(name):
        other = "another provider" if any_claims(name) else "no registered provider"
        return made(
            UNSUPPORTED_PROVIDER,
            scope.root,
            pattern,
            scope.origin,
            scope.provider,
            f"{provider.id} does not accept this file type ({other} claims it)",
        )
    if provider.refuses_name(name):
        return made(
            UNSUPPORTED_TYPE,
            scope.root,
            pattern,
            scope.origin,
            scope.provider,
            f"{name} is reserved by {provider.id}",
        )
    limit = plan.settings.max_file_bytes
    if st is not None and st.st_size > limit:
        return made(
            TOO_LARGE,
            scope.root,
            pattern,
            scope.origin,
            scope.provider,
            f"{_human(st.st_size)} ({st.st_size} bytes) > max_file_bytes {limit}",
        )
    return made(INCLUDED, scope.root, pattern, scope.origin, scope.provider)


# What accept() needs for every file of one folder (() when no scope decides
# it): where the scope-relative key starts, the scope's include and exclude
# matchers (None: no exclude), its provider's extensions and reserved names.
_FolderRules = tuple[
    int,
    Callable[[str], object],
    Callable[[str], object] | None,
    tuple[str, ...],
    frozenset[str],
]


class PlanPathFilter:
    """The reconciler's PathFilter over a plan (docs/architecture.md).

    The walker must not follow symlinked folders: accept() trusts that the
    key was reached through real folders and makes no system calls. accept()
    is the hot path (every file of every pass), so it repeats classify()'s
    rules without building Decision objects and remembers the deciding scope
    per folder; test_plan checks that both always agree.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._roots = plan.walk_roots()
        self._exclude = plan.exclude_set
        self._exclude_match = plan.exclude_set.bound_match()
        self._limit = plan.settings.max_file_bytes
        self._folders: dict[str, _FolderRules | tuple[()]] = {}
        # Files this filter refused only for their reserved name (index.md,
        # log.md of okf-markdown): an update counts and names them, as no
        # other refusal is silent about a document-looking file.
        self.reserved: list[str] = []

    def roots(self) -> Sequence[str]:
        return self._roots

    def descend(self, key: str) -> bool:
        """False for folders nothing beneath which can be included: index
        storage, folders matching a global or scope exclude ('archive/**')."""
        if is_index_key(key):
            return False
        if key and self._exclude.matches(key + "/"):
            return False
        found = self.plan.find_scope(key)
        if found is None:
            # Above every scope root (walk toward one) or beside them all.
            return any(root.startswith(key + "/") or not key for root in self._roots)
        scope, _include, exclude = found
        rel = scope.relative(key)
        return not (rel and exclude.matches(rel + "/"))

    def accept(self, key: str, st: os.stat_result) -> bool:
        if not stat_mod.S_ISREG(st.st_mode) or st.st_size > self._limit:
            return False
        if key.startswith(_INDEX_PREFIX) or self._exclude_match(key):
            return False
        folder, _slash, name = key.rpartition("/")
        rules = self._folders.get(folder)
        if rules is None:
            rules = self._folder_rules(key)
        if not rules:
            return False
        cut, include, exclude, extensions, reserved = rules
        rel = key[cut:]
        if (exclude is not None and exclude(rel)) or include(rel) is None:
            return False
        if name in reserved:
            if name.endswith(extensions):
                self.reserved.append(key)
            return False
        return name.endswith(extensions)

    def _folder_rules(self, key: str) -> _FolderRules | tuple[()]:
        """What accept() needs for every file of `key`'s folder, bound once."""
        if len(self._folders) > 4096:
            self._folders.clear()
        found = self.plan.find_scope(key)
        rules: _FolderRules | tuple[()] = ()
        if found is not None:
            scope, include, exclude = found
            provider = PROVIDERS[scope.provider]
            rules = (
                len(scope.root) + 1 if scope.root else 0,
                include.bound_match(),
                exclude.bound_match() if exclude.patterns else None,
                provider.extensions,
                frozenset(provider.reserved_names),
            )
        self._folders[key.rpartition("/")[0]] = rules
        return rules
