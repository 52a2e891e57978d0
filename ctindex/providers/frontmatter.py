"""A concept document's frontmatter: where it ends, and the fields kept of it.

`split(text)` cuts the YAML block off the front of a document and returns
the four fields the okf-markdown provider uses (docs/provider.md), the body,
and a warning when the block can not be used.

Most frontmatter is read without YAML. `read_without_yaml` takes block
YAML of the shape people and dumpers write: block mappings and sequences
by indentation, plain scalars (folded over lines), one-line quoted scalars,
one-line `[a, b]` lists and `{k: v}` mappings. For such a block it returns exactly what
`load_yaml` (libyaml) would, at a fraction of the cost; for anything it is
unsure of -- an anchor, a tag, a block scalar, an escape, a tab, a flow
collection over lines -- it returns None and libyaml decides. Comments are
skipped: whole-line ones between entries, and ` # ...` after a value.
tests/ctindex/providers/test_frontmatter.py holds the two equal on generated
YAML; ctindex/providers/_words.c `frontmatter` is the same reader in C.

Every value read is validated even where it is not kept: a block libyaml
would reject must not be read here, because a rejected block makes the
whole document plain text (a warning), whatever its kept fields say.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, TypeAlias, cast

from ctindex.base.jsontypes import JSON, JSONObject

if TYPE_CHECKING:
    import yaml

# Frontmatter bigger than this is not handed to YAML at all (a warning, the
# whole text is indexed as body): concept frontmatter is a few hundred bytes.
MAX_FRONTMATTER_BYTES = 64 * 1024

# The first line after the opening one that is `---` or `...` (trailing CRs
# ignored): ^ and $ are line bounds at "\n" only, as the frontmatter's lines are.
CLOSING = re.compile(r"^(?:---|\.\.\.)\r*$", re.MULTILINE)
WANTED = ("title", "type", "description", "tags")


class NotScalar:
    """Stands for a mapping (or a nested collection) where a scalar was expected."""

    def __repr__(self) -> str:
        return "NOT_SCALAR"


NOT_SCALAR = NotScalar()  # the one instance, so that read values compare with ==

# What a kept field holds: a scalar's text (None for null) or NOT_SCALAR for
# a mapping, or a list of those (a list in a list is NOT_SCALAR too).
Scalar: TypeAlias = "str | NotScalar | None"
FieldValue: TypeAlias = "Scalar | list[Scalar]"
Fields = dict[str, FieldValue]  # the kept fields by name (WANTED)


class _Reader(Protocol):
    def __call__(self, block: str, not_scalar: NotScalar) -> Fields | None: ...


def _native_reader() -> _Reader | None:
    from ctindex.base import native_modules

    words = native_modules.load("ctindex.providers._words")
    return None if words is None else cast("_Reader", words.frontmatter)


def _cut(text: str) -> tuple[str, int] | None:
    """(the YAML block, where its closing line ends), None when the text has
    no frontmatter; ("", -1) when the opening line is never closed."""
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return None
    start = text.index("\n") + 1
    closing = CLOSING.search(text, start)
    if closing is None:
        return "", -1
    return text[start : closing.start()], closing.end()


def split(text: str) -> tuple[Fields, str, str | None]:
    """(frontmatter fields, body, warning). Any problem: ({}, whole text, why)."""
    cut = _cut(text)
    if cut is None:
        return {}, text, None
    block, line_end = cut
    if line_end < 0:
        return {}, text, "frontmatter has no closing '---' line; indexed as plain text"
    body = text[line_end + 1 :] if line_end < len(text) else ""
    if len(block.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        return (
            {},
            text,
            (
                f"frontmatter larger than {MAX_FRONTMATTER_BYTES // 1024} KiB "
                "not parsed; indexed as plain text"
            ),
        )
    native = _native_reader()
    meta: Fields | list[Scalar] | None
    meta = native(block, NOT_SCALAR) if native is not None else read_without_yaml(block)
    try:
        if meta is None:
            meta = load_yaml(block)
    except Exception as exc:  # yaml.YAMLError and friends: never fatal for a document
        return {}, text, f"malformed YAML frontmatter{yaml_problem(exc)}; indexed as plain text"
    if meta is None:
        return {}, body, None
    if not isinstance(meta, dict):
        return {}, text, "frontmatter is not a mapping; indexed as plain text"
    return meta, body, None


MAX_DEPTH = 32  # nesting levels `whole_mapping` converts


def whole_mapping(text: str) -> tuple[JSONObject, str | None]:
    """The whole frontmatter mapping as JSON-compatible values (what `show
    --json` gives), or ({}, why not) -- why is None where `split` has
    already warned (malformed, too large, not a mapping). Aliases are
    refused: one alias can stand for a structure exponentially larger than
    the text, which JSON output would have to spell out."""
    cut = _cut(text)
    if cut is None or cut[1] < 0:
        return {}, None
    block = cut[0]
    if len(block.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        return {}, None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for event in yaml.parse(block, Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                return {}, "frontmatter uses a YAML alias; not shown"
        plain = _plain(yaml.load(block, Loader=loader), 0)
    except (yaml.YAMLError, RecursionError, ValueError):
        return {}, None
    return (plain, None) if isinstance(plain, dict) else ({}, None)


def _plain(value: object, depth: int) -> JSON:
    """JSON-compatible values: dates as ISO text, keys as text."""
    if depth > MAX_DEPTH:
        raise ValueError("frontmatter nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return str(isoformat())
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def yaml_problem(exc: Exception) -> str:
    """' at line L, column C: problem' from PyYAML's marked error, the line
    counted in the file (the block starts on line 2, after '---'); else
    ' (first line of the message)'."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    line, column = getattr(mark, "line", None), getattr(mark, "column", None)
    if isinstance(line, int) and isinstance(column, int) and problem:
        return f" at line {line + 2}, column {column + 1}: {problem}"
    text = str(exc).strip()
    return f" ({text.splitlines()[0] if text else type(exc).__name__})"


# -- with libyaml -------------------------------------------------------------


def load_yaml(block: str) -> Fields | list[Scalar] | None:
    """The frontmatter's top-level fields ctindex uses, as plain values.

    PyYAML composes the node graph (in C with libyaml); only the four fields
    are converted, at most two levels deep. Scalars keep their text as
    written (`title: 2026` is "2026", `yes` stays "yes"). An alias is the very
    node its anchor names, never a copy, and nothing is walked beyond two
    levels, so alias bombs cost nothing here.
    """
    import yaml  # lazy: only writers and --direct parse documents

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    node = yaml.compose(block, Loader=loader)
    if node is None:
        return None
    if not isinstance(node, yaml.MappingNode):
        return []  # "not a mapping"
    meta: Fields = {}
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value in WANTED:
            meta[key.value] = _node_value(value, yaml, nested=False)
    return meta


def _node_value(node: yaml.Node, yaml: ModuleType, nested: bool) -> FieldValue:
    if isinstance(node, yaml.SequenceNode) and not nested:
        return [_node_scalar(item, yaml) for item in node.value]
    return _node_scalar(node, yaml)


def _node_scalar(node: yaml.Node, yaml: ModuleType) -> Scalar:
    if isinstance(node, yaml.ScalarNode):
        return None if node.tag.endswith(":null") else str(node.value)
    return NOT_SCALAR


# -- without it ---------------------------------------------------------------

# Characters allowed anywhere in a block read without YAML: YAML's printable
# set without the tab, the CR, the BOM and the line separators YAML 1.1
# counts as line breaks (U+0085, U+2028, U+2029), whose handling differs
# from a split at "\n".
_UNSAFE = re.compile(
    r"[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
# A mapping key this reader takes, and the ": " (or end of line) after it.
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,63}):(?: +|$)")
# Characters that may not begin a plain scalar here (YAML's indicators; `-`,
# `?` and `:` may in YAML when a non-space follows, but not here).
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
# A plain scalar's text may not hold these (": " starts a mapping value, " #"
# a comment). One in a flow collection may hold no flow indicator and no
# `#`, and a `:` in it only before a letter, a digit or `/` (a time, a URL):
# what libyaml does with the others differs from YAML's rules.
_NOT_IN_PLAIN = re.compile(r": | #|:$")
_NOT_IN_FLOW = re.compile(r"[\[\]{}#]|:(?![A-Za-z0-9/])")
_FLOW_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}: ")
_NULLS = frozenset(("~", "null", "Null", "NULL"))
_MAX_DEPTH = 24  # nesting levels read here; deeper goes to YAML


class _Decline(Exception):
    """The block is not of the shape read here: ask YAML."""


def read_without_yaml(block: str) -> Fields | None:
    """`load_yaml(block)` for the block YAML shape described above, else None."""
    if _UNSAFE.search(block) is not None:
        return None
    lines = _Lines(block)
    first = lines.peek()
    if first is None or first[0] != 0 or _KEY.match(first[1]) is None:
        return None  # empty, indented, or not a mapping: YAML says what it is
    try:
        return lines.mapping(0, 0, top=True)  # keys at column 0: it reads every line
    except _Decline:
        return None


class _Lines:
    """The block's lines as (indent, text without the indent and trailing
    spaces); empty ones are skipped except inside a folded plain scalar."""

    def __init__(self, block: str) -> None:
        self.lines: list[tuple[int, str]] = []
        for raw in block.split("\n"):
            text = raw.lstrip(" ")
            self.lines.append((len(raw) - len(text), text.rstrip(" ")))
        self.at = 0

    def peek(self) -> tuple[int, str] | None:
        """The next line that is neither empty nor a comment (skipping those)."""
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if line[1] and line[1][0] != "#":
                return line
            self.at += 1
        return None

    def mapping(self, col: int, depth: int, top: bool = False) -> Fields:
        """The block mapping whose keys sit at column `col`: at the top, its
        wanted fields; below it, only checked (none kept: to its parent it is
        NOT_SCALAR)."""
        if depth > _MAX_DEPTH:
            raise _Decline
        meta: Fields = {}
        while (line := self.peek()) is not None and line[0] >= col:
            m = _KEY.match(line[1]) if line[0] == col else None
            if m is None:
                raise _Decline
            self.at += 1
            rest = line[1][m.end() :]
            if rest and rest[0] != "#":  # `key: # note` has no value on its line
                value = self.inline(rest, col)
            else:
                value = self.block_value(col, depth, indentless=True)
            if top and m.group(1) in WANTED:
                meta[m.group(1)] = value
        return meta

    def sequence(self, col: int, depth: int) -> list[Scalar]:
        """The block sequence whose `-` sit at column `col`."""
        if depth > _MAX_DEPTH:
            raise _Decline
        items: list[Scalar] = []
        while (line := self.peek()) is not None and line[0] >= col:
            text = line[1]
            if line[0] > col:
                raise _Decline
            if not (text == "-" or text.startswith("- ")):
                break  # the mapping this sequence is the value of goes on
            self.at += 1
            rest = text[1:].lstrip(" ")
            if not rest or rest[0] == "#":
                item = self.block_value(col, depth, indentless=False)
            elif _KEY.match(rest) is not None:
                # `- key: value`: a mapping whose keys sit where this one does
                self.at -= 1
                self.lines[self.at] = (col + len(text) - len(rest), rest)
                self.mapping(col + len(text) - len(rest), depth + 1)
                item = NOT_SCALAR
            else:
                item = self.inline(rest, col)
            # A list in a list is not a scalar either (`_node_value`, nested).
            items.append(NOT_SCALAR if isinstance(item, list) else item)
        return items

    def block_value(self, col: int, depth: int, *, indentless: bool) -> FieldValue:
        """The value of a `key:` or `-` that ends its line: what the next
        lines hold, more indented (or a `-` list at the key's own column,
        `indentless`), else null."""
        line = self.peek()
        if line is None or line[0] < col:
            return None
        if line[0] == col:
            if indentless and (line[1] == "-" or line[1].startswith("- ")):
                return self.sequence(col, depth + 1)
            return None
        text = line[1]
        if text == "-" or text.startswith("- "):
            return self.sequence(line[0], depth + 1)
        if _KEY.match(text) is not None:
            self.mapping(line[0], depth + 1)
            return NOT_SCALAR
        self.at += 1
        return self.inline(text, col)

    def inline(self, text: str, parent: int) -> FieldValue:
        """A scalar, `[...]` or `{...}` starting within a line (already
        consumed); a plain scalar goes on over the lines indented past
        `parent`."""
        lead = text[0]
        if lead == "'":
            return _single_quoted(text)
        if lead == '"':
            close = text.find('"', 1)
            if close < 0 or "\\" in text[:close] or not _ends(text[close + 1 :]):
                raise _Decline
            return text[1:close]
        if lead == "[":
            return _flow_list(_uncommented(text)[0])
        if lead == "{":
            return _flow_mapping(_uncommented(text)[0])
        text, ended = _uncommented(text)  # a comment ends the scalar
        _check_plain(text)
        parts = [text]  # folded: a line break is a space, n empty lines are n breaks
        breaks = 0
        while not ended and self.at < len(self.lines):
            indent, more = self.lines[self.at]
            if not more:
                breaks += 1
            elif more[0] == "#":
                break  # a comment line ends it too (peek skips the line)
            elif indent > parent:
                more, ended = _uncommented(more)
                _check_plain(more)
                parts.append("\n" * breaks if breaks else " ")
                parts.append(more)
                breaks = 0
            else:
                break
            self.at += 1
        if breaks:  # trailing empty lines belong to no scalar: leave them
            self.at -= breaks
        value = "".join(parts)
        return None if value in _NULLS else value


def _uncommented(text: str) -> tuple[str, bool]:
    """`text` without a ` # ...` comment, and whether it had one."""
    at = text.find(" #")
    return (text, False) if at < 0 else (text[:at].rstrip(" "), True)


def _ends(rest: str) -> bool:
    """What may follow a quoted scalar on its line: nothing, or a comment."""
    return not rest or (rest[0] == " " and rest.lstrip(" ")[:1] == "#")


def _check_plain(text: str) -> None:
    if text[0] in _INDICATORS or _NOT_IN_PLAIN.search(text) is not None:
        raise _Decline


def _single_quoted(text: str) -> str:
    i = 1
    while True:
        close = text.find("'", i)
        if close < 0:
            raise _Decline  # goes on over lines: YAML folds those
        if text[close + 1 : close + 2] == "'":
            i = close + 2
            continue
        if not _ends(text[close + 1 :]):
            raise _Decline
        return text[1:close].replace("''", "'")


def _flow_parts(text: str, close: str) -> list[str]:
    """The parts of a one-line `[...]` or `{...}` (`close`, its last
    character), split at commas and stripped; none when it holds only spaces."""
    if not text.endswith(close):
        raise _Decline  # goes on over lines, or something follows it
    inner = text[1:-1]
    return [raw.strip(" ") for raw in inner.split(",")] if inner.strip(" ") else []


def _flow_list(text: str) -> list[Scalar]:
    items: list[Scalar] = []
    for item in _flow_parts(text, "]"):
        _check_flow(item)
        items.append(None if item in _NULLS else item)
    return items


def _flow_mapping(text: str) -> NotScalar:
    """`{k: v, ...}` on one line, of plain keys and values: checked, not kept."""
    for pair in _flow_parts(text, "}"):
        m = _FLOW_KEY.match(pair)
        if m is None:
            raise _Decline
        _check_flow(pair[m.end() :].lstrip(" "))
    return NOT_SCALAR


def _check_flow(text: str) -> None:
    if not text or text[0] in _INDICATORS or _NOT_IN_FLOW.search(text) is not None:
        raise _Decline
