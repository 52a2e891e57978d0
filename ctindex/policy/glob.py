"""Gitignore patterns as regular expressions that cannot backtrack badly.

pathspec's translation (`*` -> ``[^/]*``, `**/` -> ``(?:.+/)?``) is correct
but leaves Python's backtracking engine free to retry every split: a
pattern like ``*a*a*a*b`` costs O(n^4) on a component of `a`s, and
``******x.md`` took minutes per path. This module produces the same
matches (tests/e2e/test_bounded_input.py compares the two on random patterns
and paths) with every wildcard committed to its leftmost fit, which is
always a correct choice (docs/decisions/policy.md, "Patterns"):

- within a component, `P0*P1*...*Pk` (each Pi of fixed length) matches iff
  P0 is a prefix, Pk a suffix and P1..Pk-1 occur in order; taking each
  middle piece at its leftmost occurrence leaves the most room for the
  rest, so it never needs to be undone;
- across components, `G0/**/G1/**/.../Gk` works the same way with whole
  components for characters.

Each committed step is an atomic group, spelled ``(?=(?P<n>X))(?P=n)`` (a
lookahead is never re-entered once it matched; ``(?>X)`` needs Python
3.11). A match is then a sequence of leftmost searches: O(len(path) *
len(pattern)) for any pattern.

Semantics are gitignore's (the `gitignore` factory of pathspec): a run of
`*` inside a component equals one `*`, and `**` is special only as a whole
component. Keys are matched as `/`-separated strings with no empty
components (folders get a trailing `/` in PathFilter.descend).
"""

from __future__ import annotations

import itertools
import re

# One counter for the whole process: group names must be unique inside the
# alternation PatternSet joins, and patterns of several sets may be joined.
_names = itertools.count()


def _atomic(body: str) -> str:
    name = f"g{next(_names)}"
    return f"(?=(?P<{name}>{body}))(?P={name})"


def normalize(pattern: str) -> str:
    """`pattern` with every run of `*` inside a component that is not
    exactly `**` collapsed to one `*` (their gitignore meaning)."""
    return "/".join(
        part if part == "**" else re.sub(r"\*{2,}", "*", part) for part in pattern.split("/")
    )


def _atoms(glob: str) -> list[str | None]:
    """The component glob as atoms: a regex for one character, or None for `*`.
    Bracket expressions follow pathspec's rules (`!`/`^` negate, a leading
    `]` is literal, an unclosed `[` is a literal `[`)."""
    out: list[str | None] = []
    i, end = 0, len(glob)
    while i < end:
        c = glob[i]
        i += 1
        if c == "\\" and i < end:
            out.append(re.escape(glob[i]))
            i += 1
        elif c == "*":
            if not out or out[-1] is not None:
                out.append(None)
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i
            if j < end and glob[j] in "!^":
                j += 1
            if j < end and glob[j] == "]":
                j += 1
            while j < end and glob[j] != "]":
                j += 1
            if j >= end:
                out.append(r"\[")
                continue
            body = glob[i:j]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            # A negated class never matches `/` (fnmatch's FNM_PATHNAME, as in
            # git); pathspec's `[^...]` does, letting one component's
            # class swallow a separator.
            cls = "[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]"
            out.append("(?!/)" + cls if negate else cls)
            i = j + 1
        else:
            out.append(re.escape(c))
    return out


def _component(glob: str) -> str:
    """A regex matching exactly one whole path component."""
    if glob == "*":
        return "[^/]+"
    atoms = _atoms(glob)
    pieces: list[list[str]] = [[]]
    for atom in atoms:
        if atom is None:
            pieces.append([])
        else:
            pieces[-1].append(atom)
    text = ["".join(p) for p in pieces]
    if len(text) == 1:
        return text[0] + r"(?=/|\Z)"
    middle = "".join(_atomic("[^/]*?" + p) for p in text[1:-1] if p)
    # The last piece must end the component: a greedy star backs off to
    # exactly one place, so this costs O(len(component) * len(piece)).
    return text[0] + middle + _atomic("[^/]*" + text[-1] + r"(?=/|\Z)")


def _group(globs: list[str]) -> str:
    return "/".join(_atomic(_component(g)) for g in globs)


def translate(pattern: str) -> str:
    """The regex (for ``re.match``) of a gitignore pattern already accepted
    by config.pattern_problem. Mirrors pathspec's normalisation: a leading
    `/` anchors, a single component floats (`**/` in front), a trailing `/`
    means everything beneath (`/**`)."""
    pattern = normalize(pattern.rstrip())
    segs = pattern.split("/")
    is_dir = not segs[-1]
    if pattern == "/":
        is_dir = False
    if not segs[0]:
        del segs[0]
    elif (len(segs) == 1 or (len(segs) == 2 and not segs[1])) and segs[0] != "**":
        segs.insert(0, "**")
    if not segs:
        raise ValueError(f"pattern {pattern!r} normalizes to nothing")
    if not segs[-1]:
        segs[-1] = "**"
    segs = [s for i, s in enumerate(segs) if not (s == "**" and i and segs[i - 1] == "**")]
    if segs == ["**"]:
        return "/" if is_dir else "(?s:.)"
    if segs in (["**", "*"],):
        return "(?s:.)"
    if segs == ["**", "*", "**"]:
        return "/"

    lead = segs[0] == "**"
    trail = len(segs) > 1 and segs[-1] == "**"
    core = segs[1 if lead else 0 : len(segs) - 1 if trail else len(segs)]
    groups: list[list[str]] = [[]]
    for s in core:
        if s == "**":
            groups.append([])
        else:
            groups[-1].append(s)
    # What must follow the last group: more path (`dir/**`), the end (a last
    # component that is exactly `*`: a file or folder, nothing beneath), or
    # nothing further (the component's own boundary; the path may go on).
    if trail:
        tail = "/"
    elif core[-1] == "*":
        tail = r"/?\Z"
    else:
        tail = ""
    out = ["^"]
    for i, globs in enumerate(groups):
        body = _group(globs) + (tail if i == len(groups) - 1 else "")
        if i == 0 and not lead:
            out.append(body)
        else:
            # `**` before this group: skip whole components, leftmost fit.
            out.append(("/" if i else "") + _atomic("(?:[^/]*/)*?" + body))
    return "".join(out)
