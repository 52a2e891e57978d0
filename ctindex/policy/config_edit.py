"""Minimal text edits of the `scopes` list of `.ct/index.jsonc`, keeping
every comment and the rest of the file byte for byte (`ctindex scopes add`,
`ctindex scopes remove`, docs/cli.md).

json5 can read JSONC but not write it back with its comments, so the file
is never re-serialised: a structural scan (strings and comments skipped, as
`config._too_deep` does) finds the top-level `scopes` array and its
elements, one element (or the `scopes` member) is inserted or cut out, and
the result is parsed again with the real loader (ctindex/policy/config.py)
before it replaces the file atomically. A shape the scan cannot vouch for
raises `UneditableConfig` (exit 2) and leaves the file alone.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ctindex.base.durable import WriteFailed, atomic_write, hidden_tmp_name
from ctindex.errors import PolicyError
from ctindex.policy.config import MAX_CONFIG_BYTES, ScopeSpec, display_root, parse_config
from ctindex.reconciler.fingerprint import Fingerprint, fingerprint_of

_STRUCTURE = "{}[],:"
_SPACE = " \t\r\n\f\v\u00a0\ufeff\u2028\u2029"


class UneditableConfig(PolicyError):
    """`.ct/index.jsonc` has a shape no minimal edit can change safely."""


@dataclass(frozen=True)
class Token:
    kind: str  # one of _STRUCTURE, "string", "atom", "comment"
    start: int
    end: int


@dataclass(frozen=True)
class Member:
    """One element of an array, or one `key: value` of an object."""

    start: int
    end: int
    key: str | None  # objects only
    value_start: int


@dataclass(frozen=True)
class Container:
    open: int  # offset of `[` / `{`
    close: int  # offset of `]` / `}`
    members: tuple[Member, ...]


def tokens(text: str) -> list[Token]:
    """The structural tokens of a JSON5 text; whitespace is dropped."""
    out: list[Token] = []
    i, end = 0, len(text)
    while i < end:
        c = text[i]
        if c in _SPACE:
            i += 1
        elif c in _STRUCTURE:
            out.append(Token(c, i, i + 1))
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < end and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= end:
                raise UneditableConfig("an unterminated string")
            out.append(Token("string", i, j + 1))
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = end if j < 0 else j
            out.append(Token("comment", i, j))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise UneditableConfig("an unterminated comment")
            out.append(Token("comment", i, j + 2))
            i = j + 2
        else:
            j = i
            while (
                j < end
                and text[j] not in _SPACE
                and text[j] not in _STRUCTURE
                and text[j] not in "\"'"
                and not text.startswith("//", j)
                and not text.startswith("/*", j)
            ):
                j += 1
            out.append(Token("atom", i, j))
            i = j
    return out


class _Scan:
    """Recursive descent over the significant tokens (comments skipped)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = [t for t in tokens(text) if t.kind != "comment"]

    def kind(self, i: int) -> str:
        if i >= len(self.toks):
            raise UneditableConfig("the file ends inside a value")
        return self.toks[i].kind

    def value_end(self, i: int) -> int:
        """The token index just after the value starting at token `i`."""
        kind = self.kind(i)
        if kind in ("string", "atom"):
            return i + 1
        if kind in "[{":
            return self.container(i)[1]
        raise UneditableConfig(f"unexpected {kind!r}")

    def container(self, i: int) -> tuple[Container, int]:
        opener = self.kind(i)
        closer = "]" if opener == "[" else "}"
        members: list[Member] = []
        j = i + 1
        while self.kind(j) != closer:
            first = j
            key = None
            if opener == "{":
                if self.kind(j) not in ("string", "atom") or self.kind(j + 1) != ":":
                    raise UneditableConfig("an object member without `key:`")
                key = self._key(self.toks[j])
                j += 2
            value = j
            j = self.value_end(j)
            members.append(
                Member(self.toks[first].start, self.toks[j - 1].end, key, self.toks[value].start)
            )
            if self.kind(j) == ",":
                j += 1
            elif self.kind(j) != closer:
                raise UneditableConfig("members not separated by commas")
        return Container(self.toks[i].start, self.toks[j].start, tuple(members)), j + 1

    def _key(self, token: Token) -> str:
        raw = self.text[token.start : token.end]
        if token.kind == "atom":
            return raw
        import json5

        key = json5.loads(raw)
        if not isinstance(key, str):
            raise UneditableConfig("a key that is not a string")
        return key


def _top(text: str) -> tuple[_Scan, Container]:
    scan = _Scan(text)
    if not scan.toks or scan.toks[0].kind != "{":
        raise UneditableConfig("the top level is not an object")
    top, after = scan.container(0)
    if after != len(scan.toks):
        raise UneditableConfig("text after the top-level object")
    return scan, top


def _scopes_array(scan: _Scan, top: Container) -> Container | None:
    found = [m for m in top.members if m.key == "scopes"]
    if not found:
        return None
    if len(found) > 1:
        raise UneditableConfig("`scopes` appears more than once")
    index = next(i for i, t in enumerate(scan.toks) if t.start == found[0].value_start)
    if scan.toks[index].kind != "[":
        raise UneditableConfig("`scopes` is not a list")
    return scan.container(index)[0]


def _line_indent(text: str, offset: int) -> str:
    """The leading whitespace of the line holding `offset`."""
    start = text.rfind("\n", 0, offset) + 1
    j = start
    while j < len(text) and text[j] in " \t":
        j += 1
    return text[start:j]


def _next_significant(text: str, offset: int) -> int:
    """The offset of the first character at or after `offset` that is not
    whitespace (comments count as significant: they are never skipped)."""
    while offset < len(text) and text[offset] in _SPACE:
        offset += 1
    return offset


def _insert(text: str, box: Container, item: str, inner_indent: str | None = None) -> str:
    """`text` with `item` added as the last member of `box`, in the layout
    the container already uses (one member a line, or inline)."""
    if not box.members:
        if "\n" not in text.strip(_SPACE):  # a one-line store stays one line
            return text[: box.open + 1] + item + text[box.open + 1 :]
        indent = inner_indent or _line_indent(text, box.open) + "  "
        body = text[box.open + 1 : box.close]
        tail = "" if "\n" in body else "\n" + _line_indent(text, box.open)
        return text[: box.open + 1] + "\n" + indent + item + tail + text[box.open + 1 :]
    last = box.members[-1]
    after = _next_significant(text, last.end)
    trailing_comma = after < len(text) and text[after] == ","
    multiline = "\n" in text[last.end : box.close]
    if not multiline:  # `[{...}]` or `[{...}, ]`: stay on the line
        at = after + 1 if trailing_comma else last.end
        joint = " " if trailing_comma else ", "
        return text[:at] + joint + item + ("," if trailing_comma else "") + text[at:]
    indent = _line_indent(text, last.start)
    cut = after + 1 if trailing_comma else last.end
    line_end = text.find("\n", cut)  # keep a comment ending the last member's line there
    line_end = box.close if line_end < 0 or line_end > box.close else line_end
    if text[cut:line_end].strip() and not text[cut:line_end].strip().startswith("//"):
        line_end = cut  # code (or a block comment) follows on the line: insert right here
    added = "\n" + indent + item + ("," if trailing_comma else "")
    if trailing_comma:
        return text[:line_end] + added + text[line_end:]
    return text[: last.end] + "," + text[last.end : line_end] + added + text[line_end:]


def _remove(text: str, box: Container, index: int) -> str:
    """`text` without member `index` of `box`: the member, the whitespace
    before it and one comma go; every comment stays."""
    target = box.members[index]
    significant = [t for t in tokens(text) if t.kind != "comment"]

    def following(offset: int) -> Token:
        return next(t for t in significant if t.start >= offset)

    comma: Token | None = following(target.end)
    if comma is not None and comma.kind != ",":
        if index == 0:
            comma = None  # the only member: no comma to take
        else:  # the last member: the comma after the one before it goes
            comma = following(box.members[index - 1].end)
            if comma.kind != ",":
                raise UneditableConfig("no comma where one was expected")
    start = target.start
    while start > 0 and text[start - 1] in _SPACE:
        start -= 1
    rest_from = comma.end if comma is not None and comma.start >= target.end else target.end
    rest = text[rest_from : (text.find("\n", rest_from) + 1 or len(text))].strip(_SPACE)
    if "\n" in text[start : target.start] and rest and not rest.startswith(("]", "}")):
        # More follows on the target's line: joining it to the line before
        # could put it inside that line's `//` comment. Keep the line break.
        start = target.start
    cuts = [(start, target.end)]
    if comma is not None:
        cuts.append((comma.start, comma.end))
    for begin, end in sorted(cuts, reverse=True):
        text = text[:begin] + text[end:]
    if len(box.members) == 1:  # an emptied list closes up again: `[]`
        open_at = box.open
        close_at = text.index("]", open_at)
        if not text[open_at + 1 : close_at].strip(_SPACE):
            text = text[: open_at + 1] + text[close_at:]
    return text


def scope_value(spec: ScopeSpec) -> dict[str, str | list[str]]:
    """A scope as the store writes it (the include made explicit)."""
    value: dict[str, str | list[str]] = {
        "root": display_root(spec.root),
        "provider": spec.provider,
        "include": list(spec.include),
    }
    if spec.exclude:
        value["exclude"] = list(spec.exclude)
    return value


def scope_json(spec: ScopeSpec) -> str:
    """One scope as one line of JSON (JSON escapes keep undecodable names)."""
    return json.dumps(scope_value(spec))


def add_scope(text: str, path: Path, spec: ScopeSpec, keep: Sequence[ScopeSpec]) -> str:
    """`text` with `spec` appended to its `scopes`. Without a `scopes` member
    one is added holding `keep` (the derived scopes, which explicit scopes
    would otherwise silently drop) and then `spec`."""
    try:
        return _add(text, path, spec, keep)
    except UneditableConfig as exc:
        raise _refusal(path, exc) from None


def remove_scope(text: str, path: Path, root: str) -> str:
    """`text` without the scope whose root is the key `root`."""
    try:
        return _remove_root(text, path, root)
    except UneditableConfig as exc:
        raise _refusal(path, exc) from None


def _refusal(path: Path, exc: UneditableConfig) -> UneditableConfig:
    return UneditableConfig(
        f"{path}: cannot edit it safely ({exc}); change its `scopes` list by hand"
    )


def _add(text: str, path: Path, spec: ScopeSpec, keep: Sequence[ScopeSpec]) -> str:
    scan, top = _top(text)
    array = _scopes_array(scan, top)
    if array is not None:
        edited = _insert(text, array, scope_json(spec))
    else:
        indent = (
            _line_indent(text, top.members[-1].start)
            if top.members and "\n" in text[top.open : top.close]
            else "  "
        )
        items = [scope_json(s) for s in (*keep, spec)]
        inner = ",".join(f"\n{indent}  {item}" for item in items)
        edited = _insert(text, top, f'"scopes": [{inner}\n{indent}]', indent)
    before = parse_config(text, path).scopes
    return _checked(text, edited, path, (*(keep if before is None else before), spec))


def _remove_root(text: str, path: Path, root: str) -> str:
    scan, top = _top(text)
    array = _scopes_array(scan, top)
    if array is None:
        raise UneditableConfig("it has no `scopes` list")
    parsed = parse_config(text, path).scopes or ()
    roots = [s.root for s in parsed]
    if root not in roots or len(roots) != len(array.members):
        raise UneditableConfig(f"no scope {display_root(root)!r} found in its `scopes` list")
    kept = tuple(s for s in parsed if s.root != root)
    return _checked(text, _remove(text, array, roots.index(root)), path, kept)


def _checked(original: str, edited: str, path: Path, scopes: tuple[ScopeSpec, ...]) -> str:
    """The edit, once the real loader reads it as the original with exactly
    `scopes`, and every comment of the original is still there."""
    try:
        before, after = parse_config(original, path), parse_config(edited, path)
    except PolicyError as exc:
        raise UneditableConfig(f"the edited file would not load: {exc}") from None
    if after != replace(before, scopes=scopes):
        raise UneditableConfig("the edit would change more than the scopes")
    if Counter(_comments(original)) - Counter(_comments(edited)):
        raise UneditableConfig("the edit would lose a comment")
    return edited


def _comments(text: str) -> list[str]:
    return [text[t.start : t.end] for t in tokens(text) if t.kind == "comment"]


def replace_file(path: Path, text: str, expect: Fingerprint | None) -> None:
    """Temp sibling, fsync, rename over `path`, fsync the folder: a reader
    sees the old file or the new one, never half of one. `expect`: the full
    fingerprint of the file the edit was made from (None: there was none);
    a file changed meanwhile is refused, not overwritten."""
    if _fingerprint(path) != expect:
        raise UneditableConfig(f"{path}: changed while it was being edited; run the command again")
    try:
        mode = os.lstat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    data = text.encode("utf-8", "surrogateescape")
    try:
        atomic_write(path, data, mode=mode, tmp_name=hidden_tmp_name(path))
    except WriteFailed as exc:  # the system's error, as the command reports any
        raise exc.as_os_error() from exc


def _fingerprint(path: Path) -> Fingerprint | None:
    try:
        return fingerprint_of(os.lstat(path))
    except FileNotFoundError:
        return None


def read_store(path: Path) -> tuple[str, Fingerprint | None]:
    """The store's text and the full fingerprint it was read at. The same
    checks as the loader (no symlink, no FIFO, bounded); refusals exit 2."""
    from ctindex.base.statefile import UnsafeFile, read_bounded

    before = _fingerprint(path)
    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except UnsafeFile as exc:
        raise PolicyError(str(exc)) from None
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if _fingerprint(path) != before:
        raise UneditableConfig(f"{path}: changed while it was being read; run the command again")
    try:
        return raw.decode("utf-8"), before
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not valid UTF-8 at byte {exc.start}") from None
