"""Read and strictly validate `.ct/index.jsonc` (docs/decisions/policy.md).

Every problem raises ``PolicyError("<file>: <key path>: <problem>")``: the
CLI prints that one line and exits 2. Only the keys of ``TOP_KEYS`` and
``SCOPE_KEYS`` are accepted; ``bool`` is not an integer here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from ctindex.errors import PolicyError
from ctindex.policy.project import INDEX_KEY, Project, is_index_key, is_normal_key
from ctindex.providers import PROVIDERS
from ctindex.reconciler.fingerprint import fingerprint_of

CONFIG_VERSION = 1
# Builds the error for a key path and a problem (validate() binds the file name).
Fail = Callable[[str, str], PolicyError]
GIB = 1 << 30
# A real store is a few hundred bytes. json5's parser costs ~50 us per list
# item, so the bound also keeps a hostile store's parse to a few seconds.
MAX_CONFIG_BYTES = 64 << 10
# `scopes[i].include[j]` is four levels deep; json5 recurses (docs/reliability.md).
MAX_NESTING = 16

# key -> (default, minimum, maximum); None default means "computed per machine".
INT_SETTINGS: dict[str, tuple[int | None, int, int]] = {
    "debounce_ms": (150, 0, 60_000),
    "audit_seconds": (300, 1, 7 * 86_400),
    "idle_seconds": (3600, 1, 30 * 86_400),
    "max_file_bytes": (2 * 1024 * 1024, 1, GIB),
    "max_daemon_memory_bytes": (None, 1 << 20, 1 << 40),
    # What building segments may hold at once (ctindex/store/budget.py).
    "max_build_memory_bytes": (256 << 20, 16 << 20, 1 << 40),
    "barrier_timeout_ms": (500, 10, 10_000),
    # How long a client on a network share waits for the share host's
    # barrier, before four round trips are added (docs/network-shares.md).
    "share_barrier_ms": (200, 10, 10_000),
}
BOOL_SETTINGS: dict[str, bool] = {
    "watch": True,
    # Write `.ct/.gitignore` ignoring the index (ctindex/policy/store_path.py).
    "gitignore_index": True,
    # The index is readable and writable by the group of `.ct/okf` (docs/format.md, "Modes").
    "share_index_with_group": False,
}
# Their order in `init --write` and error messages.
SETTING_KEYS = ("watch", *INT_SETTINGS, "gitignore_index", "share_index_with_group")
TOP_KEYS = ("version", *SETTING_KEYS, "scopes", "exclude")
SCOPE_KEYS = ("root", "provider", "include", "exclude")

# The global exclude list when the file has none.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git/**",
    ".ct/okf/**",
    "target/**",
    "node_modules/**",
    "**/*.db",
    "**/*.sqlite*",
)


@dataclass(frozen=True)
class ScopeSpec:
    root: str  # key of the scope root ("" = project root)
    provider: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]


@dataclass(frozen=True)
class Config:
    """What the project store says; absent keys are absent (defaults live in
    the plan, which also records where each value came from)."""

    path: Path | None  # None: there is no `.ct/index.jsonc`
    settings: dict[str, int | bool]  # only the keys the file sets
    scopes: tuple[ScopeSpec, ...] | None  # None: derive scopes
    exclude: tuple[str, ...] | None  # None: DEFAULT_EXCLUDE


def load_config(path: Path) -> Config:
    """Parse `path` if it exists; raise PolicyError on any problem. A FIFO,
    device, symlink or oversized file is refused before anything is read
    (ctindex/base/statefile.py; a symlink is not followed)."""
    from ctindex.base.statefile import UnsafeFile, read_bounded

    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return Config(None, {}, None, None)
    except UnsafeFile as exc:
        raise PolicyError(str(exc)) from None
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not valid UTF-8 at byte {exc.start}") from None
    return parse_config(text, path)


def refuse_unsafe_store(project: Project) -> None:
    """UnsafeStorePath when a folder of the store path (`.ct`, `.ct/okf`,
    `.ct/okf/runtime`) is a symbolic link or another user's: checked before
    the project store is read, by every entry point (ctindex/policy/store_path.py)."""
    from ctindex.policy.store_path import check_store

    check_store(project.root, lambda: shares_index(project))


def refuse_foreign_writer(project: Project) -> None:
    """`refuse_unsafe_store` for a command that writes under `.ct` or may
    start a daemon next: a project folder of another user is refused too,
    before anything is made (ctindex/policy/store_path.py `foreign_project`)."""
    from ctindex.policy.store_path import check_store

    check_store(project.root, lambda: shares_index(project), write=True)


def shares_index(project: Project) -> bool:
    """The project shares its index with a group (`share_index_with_group`)."""
    return load_config(project.config_path).settings.get("share_index_with_group") is True


def parse_config(text: str, path: Path) -> Config:
    import json5  # only needed when a project store exists

    too_deep = _too_deep(text, MAX_NESTING)
    if too_deep is not None:
        line = text.count("\n", 0, too_deep) + 1
        raise PolicyError(
            f"{path}: nested deeper than {MAX_NESTING} levels at line {line}"
            " (a project store needs four)"
        )
    try:
        data = json5.loads(text, allow_duplicate_keys=False)
    except ValueError as exc:
        raise PolicyError(f"{path}: {_json5_message(str(exc))}") from None
    except RecursionError:  # belt and braces: _too_deep should have caught it
        raise PolicyError(f"{path}: nested too deeply") from None
    return validate(data, path)


def _too_deep(text: str, limit: int) -> int | None:
    """The offset where `[`/`{` nesting first exceeds `limit`, outside JSON5
    strings and comments, or None. json5's parser recurses about fifteen
    frames per level and hits Python's recursion limit near 60 levels, so
    the depth is bounded before it parses. One pass, linear in the text."""
    depth, i, end = 0, 0, len(text)
    while i < end:
        c = text[i]
        if c in "[{":
            depth += 1
            if depth > limit:
                return i
        elif c in "]}":
            depth -= 1
        elif c in "\"'":
            i += 1
            while i < end and text[i] != c:
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                return None
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2)
            if i < 0:
                return None
            i += 1
        i += 1
    return None


def _json5_message(message: str) -> str:
    # json5 reports "<string>:LINE Unexpected ... at column COL"; reshape it
    # into "line L, column C: ..." so the file name leads the line.
    found = re.match(r"<string>:(\d+) (.*) at column (\d+)$", message)
    if found:
        line, what, column = found.groups()
        return f"invalid JSON5 at line {line}, column {column}: {what}"
    return f"invalid JSON5: {message.replace('<string>', 'input')}"


def validate(data: object, path: Path) -> Config:
    def fail(key: str, problem: str) -> PolicyError:
        return PolicyError(f"{path}: {key}: {problem}")

    if not isinstance(data, dict):
        raise PolicyError(f"{path}: the top level must be an object, not {_kind(data)}")
    for key in data:
        if key not in TOP_KEYS:
            raise fail(key, _unknown_key(key, TOP_KEYS))

    if "version" in data:
        version = data["version"]
        if not _is_int(version):
            raise fail("version", f"must be an integer, not {_kind(version)}")
        if version != CONFIG_VERSION:
            raise fail(
                "version", f"unsupported version {version} (this build reads {CONFIG_VERSION})"
            )

    settings: dict[str, int | bool] = {}
    for key in BOOL_SETTINGS:
        if key in data:
            value = data[key]
            if not isinstance(value, bool):
                raise fail(key, f"must be true or false, not {_kind(value)}")
            settings[key] = value
    for key, (_default, low, high) in INT_SETTINGS.items():
        if key in data:
            value = data[key]
            if not _is_int(value):
                raise fail(key, f"must be an integer, not {_kind(value)}")
            if not low <= value <= high:
                raise fail(key, f"{value} is out of range {low}..{high}")
            settings[key] = value

    scopes = None
    if "scopes" in data:
        scopes = _scopes(data["scopes"], fail)
    exclude = None
    if "exclude" in data:
        exclude = _patterns(data["exclude"], "exclude", fail)
    return Config(path, settings, scopes, exclude)


def _scopes(value: object, fail: Fail) -> tuple[ScopeSpec, ...]:
    if not isinstance(value, list):
        raise fail("scopes", f"must be a list, not {_kind(value)}")
    specs: list[ScopeSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        where = f"scopes[{i}]"
        if not isinstance(item, dict):
            raise fail(where, f"must be an object, not {_kind(item)}")
        for key in item:
            if key not in SCOPE_KEYS:
                raise fail(f"{where}.{key}", _unknown_key(key, SCOPE_KEYS))
        for key in ("root", "provider"):
            if key not in item:
                raise fail(f"{where}.{key}", "missing (required)")
        root = _root(item["root"], f"{where}.root", fail)
        if root in seen:
            raise fail(f"{where}.root", f"duplicate scope root {display_root(root)!r}")
        seen.add(root)
        provider_id = item["provider"]
        if not isinstance(provider_id, str):
            raise fail(f"{where}.provider", f"must be a string, not {_kind(provider_id)}")
        provider = PROVIDERS.get(provider_id)
        if provider is None:
            from ctindex.base.suggest import close_matches, did_you_mean

            hint = did_you_mean(close_matches(provider_id, PROVIDERS), quote=True)
            known = ", ".join(sorted(PROVIDERS))
            raise fail(
                f"{where}.provider", f"unknown provider {provider_id!r}{hint} (known: {known})"
            )
        include = (
            _patterns(item["include"], f"{where}.include", fail)
            if "include" in item
            else provider.default_include
        )
        if not include:
            raise fail(f"{where}.include", "must name at least one pattern")
        exclude = _patterns(item["exclude"], f"{where}.exclude", fail) if "exclude" in item else ()
        specs.append(ScopeSpec(root, provider_id, include, exclude))
    return tuple(specs)


def _unknown_key(key: object, allowed: tuple[str, ...]) -> str:
    """'unknown key; did you mean 'watch'? (allowed: ...)' (ctindex/base/suggest.py)."""
    from ctindex.base.suggest import close_matches, did_you_mean

    close = close_matches(key, allowed) if isinstance(key, str) else []
    return f"unknown key{did_you_mean(close, quote=True)} (allowed: {', '.join(allowed)})"


def _root(value: object, where: str, fail: Fail) -> str:
    if not isinstance(value, str):
        raise fail(where, f"must be a string, not {_kind(value)}")
    if "\\" in value or "\0" in value:
        raise fail(where, f"{value!r}: use '/' separators (no backslash or NUL)")
    if value.startswith("/") or (len(value) > 1 and value[1] == ":"):
        raise fail(where, f"{value!r}: must be relative to the project root")
    key = value.strip("/")
    while key.startswith("./"):
        key = key[2:]
    key = "" if key in ("", ".") else key
    if not is_normal_key(key):
        raise fail(where, f"{value!r}: must stay beneath the project root (no '..', '.' or '//')")
    if is_index_key(key):
        raise fail(where, f"{value!r}: lies inside the index storage {INDEX_KEY}/")
    return key


def _patterns(value: object, where: str, fail: Fail) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise fail(where, f"must be a list of patterns, not {_kind(value)}")
    out: list[str] = []
    for i, pattern in enumerate(value):
        if not isinstance(pattern, str):
            raise fail(f"{where}[{i}]", f"must be a string, not {_kind(pattern)}")
        problem = pattern_problem(pattern)
        if problem:
            raise fail(f"{where}[{i}]", f"bad pattern {pattern!r}: {problem}")
        out.append(pattern)
    return tuple(out)


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is unusable, or None. Gitignore syntax is pathspec's; the
    extra rules keep every pattern a positive, '/'-separated path match."""
    if not pattern.strip():
        return "empty"
    if pattern != pattern.strip():
        return "leading or trailing whitespace"
    if pattern.startswith("!"):
        return "negation ('!') is not supported: list what to exclude instead"
    if pattern.startswith("#"):
        return "starts with '#', which gitignore reads as a comment"
    if "\\" in pattern or "\0" in pattern:
        return "use '/' separators (no backslash or NUL)"
    if ".." in pattern.split("/"):
        return "'..' cannot leave the scope"
    import pathspec  # compiled here so a bad bracket expression fails early

    try:
        compiled = pathspec.PathSpec.from_lines(pattern_factory(), [pattern])
    except Exception as exc:  # pathspec raises several types for bad syntax
        return f"invalid ({exc})"
    if not compiled.patterns or compiled.patterns[0].include is None:
        return "matches nothing (invalid wildcard syntax)"
    from ctindex.policy.glob import translate  # what PatternSet will match with

    try:
        re.compile(translate(pattern))
    except (ValueError, re.error) as exc:
        return f"invalid ({exc})"
    return None


def pattern_factory() -> str:
    """pathspec's gitignore pattern name: 1.x calls it "gitignore" and
    deprecates "gitwildmatch"; 0.12 is the other way round."""
    import pathspec

    return "gitignore" if int(pathspec.__version__.split(".")[0]) >= 1 else "gitwildmatch"


def display_root(root: str) -> str:
    return root or "."


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction" if value == value else "NaN"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def config_text(values: dict[str, object], comments: list[str]) -> str:
    """Render a config as JSONC: leading `//` comments, then pretty JSON (keys
    in the order given). JSON escapes keep undecodable names lossless."""
    import json

    lines = [f"// {line}" if line else "//" for line in comments]
    lines.append(json.dumps(values, indent=2))
    return "\n".join(lines) + "\n"


def config_stamp(path: os.PathLike[str] | str) -> list[int] | str | None:
    """The config file's full fingerprint as a JSON list, "absent", or None
    when unknown. stat, not lstat: the config is read through a symlink. A
    plan records the one it was read under (ctindex/policy/plan.py); the
    query fast path and the daemon compare it with the file's current one."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return None
    return list(fingerprint_of(st))
