"""An independent oracle: which files of a project contain a word.

It shares no code with ctindex on purpose (not its plan, not its walk, not its
tokenizer, not `--direct`): a plain `os.walk` with the documented rules of
docs/decisions/policy.md written out again, and a regular expression over the
file's text. A stale answer that ctindex's own `--direct` shares (both read the
same cached plan) is still caught here.

Rules modelled:
- scopes: the explicit `scopes` of `.ct/index.jsonc`, or else every folder at
  depth 0..3 holding a regular `index.md`, topmost winning, hidden, symlinked
  and globally excluded folders not entered;
- files: regular `*.md` below a scope root reached without a symlinked folder,
  not named `index.md`/`log.md`, not globally or locally excluded, at most
  `max_file_bytes`, valid UTF-8 without NUL;
- match: the word, case-insensitively, between non-alphanumeric characters.
  Use words that no stemmer changes (e.g. `zqxv7marker`).
- field match (`with_field_word`): the same, on the one-line value of a
  `key: value` line of the leading `---` block (the files a test writes that
  way: no YAML quoting, lists or continuation lines).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import json5
import pathspec

DEFAULT_EXCLUDE = [
    ".git/**",
    ".ct/okf/**",
    "target/**",
    "node_modules/**",
    "**/*.db",
    "**/*.sqlite*",
]
RESERVED = {"index.md", "log.md"}
DEPTH = 3
MAX_FILE_BYTES = 2 * 1024 * 1024


def _spec(patterns: list[str]) -> pathspec.PathSpec:
    return pathspec.PathSpec.from_lines("gitignore", patterns)


def _config(project: Path) -> dict:
    try:
        text = (project / ".ct" / "index.jsonc").read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return json5.loads(text)


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _detected_roots(project: Path, exclude: pathspec.PathSpec) -> list[str]:
    roots: list[str] = []
    frontier = [""]
    for depth in range(DEPTH + 1):
        following = []
        for rel in frontier:
            folder = project / rel if rel else project
            marker = folder / "index.md"
            try:
                if stat.S_ISREG(os.lstat(marker).st_mode):
                    roots.append(rel)
                    continue
            except OSError:
                pass
            if depth == DEPTH:
                continue
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                child = f"{rel}/{name}" if rel else name
                if name.startswith(".") or not _is_dir(project / child):
                    continue
                if exclude.match_file(child + "/"):
                    continue
                following.append(child)
        frontier = following
    return sorted(roots)


def scopes(project: Path) -> list[tuple[str, pathspec.PathSpec, pathspec.PathSpec]]:
    """(root, include, local exclude) of every scope, in order."""
    config = _config(project)
    exclude = _spec(config.get("exclude", DEFAULT_EXCLUDE))
    if "scopes" in config:
        return [
            (
                s["root"].strip("/"),
                _spec(s.get("include", ["**/*.md"])),
                _spec(s.get("exclude", [])),
            )
            for s in config["scopes"]
        ]
    return [(root, _spec(["**/*.md"]), _spec([])) for root in _detected_roots(project, exclude)]


def indexed_files(project: Path) -> dict[str, str]:
    """Project-relative path -> text of every file that must be indexed."""
    project = Path(project)
    config = _config(project)
    exclude = _spec(config.get("exclude", DEFAULT_EXCLUDE))
    limit = int(config.get("max_file_bytes", MAX_FILE_BYTES))
    found: dict[str, str] = {}
    claimed: set[str] = set()
    for root, include, local in scopes(project):
        base = project / root if root else project
        if not _is_dir(base):
            continue
        for folder, dirs, files in os.walk(base, followlinks=False):
            dirs[:] = [d for d in dirs if _is_dir(Path(folder) / d)]
            for name in files:
                path = Path(folder) / name
                rel = path.relative_to(project).as_posix()
                inner = path.relative_to(base).as_posix()
                if rel in claimed or rel.startswith(".ct/okf/"):
                    continue
                claimed.add(rel)  # the first scope containing a path decides
                if not name.endswith(".md") or name in RESERVED:
                    continue
                if exclude.match_file(rel) or local.match_file(inner):
                    continue
                if not include.match_file(inner):
                    continue
                try:
                    st = os.lstat(path)
                    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                        continue
                    data = path.read_bytes()
                except OSError:
                    continue
                if b"\0" in data:
                    continue
                try:
                    found[rel] = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
    return found


def containing(project: Path, word: str) -> set[str]:
    """Project-relative paths of the indexed files that contain `word`."""
    return containing_each(project, [word])[word]


def containing_each(project: Path, words: list[str]) -> dict[str, set[str]]:
    """`containing` for several words from one walk (the soak asks a handful
    of words per check; walking and reading the project once per word would
    dominate its cost)."""
    files = indexed_files(project)
    found: dict[str, set[str]] = {}
    for word in words:
        pattern = re.compile(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", re.IGNORECASE)
        found[word] = {rel for rel, text in files.items() if pattern.search(text)}
    return found


def with_field_word(project: Path, key: str, word: str) -> set[str]:
    """Paths of the indexed files whose frontmatter line `key: value` holds
    `word` (as `containing` matches it) in its value."""
    pattern = re.compile(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", re.IGNORECASE)
    line = re.compile(rf"^{re.escape(key)}:[ \t]*(.*)$", re.MULTILINE)
    found: set[str] = set()
    for rel, text in indexed_files(project).items():
        if not text.startswith("---\n"):
            continue
        block = text[4 : text.find("\n---", 3) + 1]
        m = line.search(block)
        if m and pattern.search(m.group(1)):
            found.add(rel)
    return found
