"""Gitignore patterns as regular expressions (ctindex/policy/glob.py): the
semantics docs/decisions/policy.md ("Patterns") describes, the same matches
as pathspec's translation and as fnmatch where they coincide, and the
patterns the configuration refuses (PolicyError, exit 2)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pathspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ctindex.errors import PolicyError
from ctindex.policy.config import pattern_factory, validate
from ctindex.policy.glob import normalize, translate


def matches(pattern: str, key: str) -> bool:
    return re.match(translate(pattern), key) is not None


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        # one component floats: it matches at any depth
        ("*.md", ["a.md", "x/y/a.md", ".md"], ["a.mdx", "a.txt"]),
        ("a.md", ["a.md", "dir/a.md"], ["ba.md", "a.md.bak"]),
        # a leading '/' anchors at the root of the scope
        ("/a.md", ["a.md"], ["x/a.md"]),
        # a '/' inside anchors too
        ("docs/*.md", ["docs/a.md"], ["x/docs/a.md", "docs/sub/a.md"]),
        # '*' and '?' stay within one component
        ("a*b", ["ab", "axxb", "d/ab"], ["a/b"]),
        ("a?c", ["abc", "d/axc"], ["ac", "a/c", "abbc"]),
        # '**' spans whole components
        ("**/x.md", ["x.md", "a/x.md", "a/b/x.md"], ["ax.md"]),
        ("a/**/b", ["a/b", "a/x/b", "a/x/y/b"], ["b", "xa/b", "a/xb"]),
        ("a/**", ["a/x", "a/x/y", "a/"], ["a", "b/a/x"]),
        # a folder pattern matches everything beneath it
        ("archive", ["archive", "archive/x.md", "d/archive/x.md"], ["archives/x.md"]),
        ("cache/", ["cache/", "cache/x", "b/cache/x"], ["cache", "cachex/y"]),
        # a run of '*' inside a component is one '*'
        ("a***b", ["ab", "axb"], ["a/b"]),
        ("******x.md", ["x.md", "dir/abcx.md"], ["x.mdy", "a/b"]),
        # bracket expressions; a negated one never matches '/'
        ("[ab].md", ["a.md", "d/b.md"], ["c.md", "ab.md"]),
        ("a[!b]c", ["axc"], ["abc", "a/c"]),
        ("a[^b]c", ["axc"], ["abc", "a/c"]),
        ("[]a].md", ["].md", "a.md"], ["b.md"]),
        ("a[", ["a["], ["a", "ab"]),  # an unclosed '[' is a literal
    ],
)
def test_pattern_semantics(pattern: str, yes: list[str], no: list[str]) -> None:
    for key in yes:
        assert matches(pattern, key), (pattern, key)
    for key in no:
        assert not matches(pattern, key), (pattern, key)


def test_a_pattern_normalizing_to_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="normalizes to nothing"):
        translate("")


@pytest.mark.parametrize(
    ("pattern", "normal"),
    [("a***b", "a*b"), ("**", "**"), ("***/x", "*/x"), ("a/**/b", "a/**/b"), ("x**", "x*")],
)
def test_normalize_collapses_star_runs_inside_a_component(pattern: str, normal: str) -> None:
    assert normalize(pattern) == normal


_PATTERN_PARTS = st.sampled_from(["a", "b", "*", "?", "[ab]", "**", "/", "ab", "***", "[!a]"])


@given(st.lists(_PATTERN_PARTS, min_size=1, max_size=6).map("".join))
def test_normalize_is_idempotent(pattern: str) -> None:
    once = normalize(pattern)
    assert normalize(once) == once
    assert all(part == "**" or "**" not in part for part in once.split("/"))


_KEYS = st.lists(st.text(alphabet="ab", min_size=1, max_size=4), min_size=1, max_size=4).map(
    "/".join
)


@given(
    st.sampled_from(["", "/"]),
    st.lists(st.sampled_from(["a", "b", "*", "?", "[ab]", "**", "/", "ab", "***"]), max_size=6),
    st.sampled_from(["", "/"]),
    _KEYS,
    st.booleans(),
)
def test_the_same_matches_as_pathspec(
    lead: str, parts: list[str], trail: str, key: str, folder: bool
) -> None:
    """Where pathspec is right (it lets `[!x]` match `/`, so negated classes
    are left out), glob.py matches exactly the keys its translation does."""
    pattern = lead + "".join(parts) + trail
    assume(pattern and "//" not in pattern)
    reference = pathspec.PathSpec.from_lines(pattern_factory(), [normalize(pattern)]).patterns[0]
    assume(reference.include is not None)
    key += "/" if folder else ""
    want = reference.regex.match(key) is not None  # type: ignore[attr-defined]
    assert matches(pattern, key) == want, (pattern, key)


@given(
    st.lists(st.sampled_from(["a", "b", "*", "?", "[ab]", "[!a]", "ab"]), min_size=1, max_size=5),
    st.text(alphabet="abc", min_size=1, max_size=6),
    st.booleans(),
)
def test_a_component_pattern_matches_a_name_as_fnmatch_does(
    parts: list[str], name: str, anchored: bool
) -> None:
    """Within one component (no '/', no '**') gitignore's wildcards are
    fnmatch's, negated classes included; anchored or floating, a top-level
    name matches the same."""
    glob = "".join(parts)
    pattern = ("/" if anchored else "") + glob
    assert matches(pattern, name) == fnmatch.fnmatchcase(name, glob), (pattern, name)
    if normalize(glob) == "*" and anchored:
        return  # `/*`: the top-level entries themselves (a folder's content is pruned)
    # floating: any component matching decides, and everything beneath it
    # matches; anchored: only the first component can
    first, inner = fnmatch.fnmatchcase(name, glob), fnmatch.fnmatchcase("c", glob)
    assert matches(pattern, f"c/{name}") == (inner or (not anchored and first))
    assert matches(pattern, f"{name}/c") == (first or (not anchored and inner))


@given(st.lists(st.lists(_PATTERN_PARTS, min_size=1, max_size=5).map("".join), max_size=8), _KEYS)
def test_patterns_joined_into_one_alternation_match_as_any_of_them(
    patterns: list[str], key: str
) -> None:
    """PatternSet joins translations with '|': the group names each one uses
    must not collide, and the union must match what any one matches."""
    usable = [p for p in patterns if "//" not in p]
    assume(usable)
    joined = re.compile("|".join(f"(?:{translate(p)})" for p in usable))
    assert (joined.match(key) is not None) == any(matches(p, key) for p in usable)


# -- patterns the configuration refuses -----------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("", "empty"),
        (" a.md", "whitespace"),
        ("a.md ", "whitespace"),
        ("!a.md", "negation"),
        ("#a.md", "comment"),
        ("a\\b.md", "backslash"),
        ("a\x00b", "NUL"),
        ("../a.md", "'..'"),
        ("a/../b", "'..'"),
        ("[z-a].md", "invalid"),
    ],
)
def test_a_bad_pattern_is_a_policy_error_naming_it(pattern: str, reason: str) -> None:
    path = Path("/project/.ct/index.jsonc")
    with pytest.raises(PolicyError) as caught:
        validate({"version": 1, "exclude": ["ok/**", pattern]}, path)
    text = str(caught.value)
    assert text.startswith(f"{path}: exclude[1]: bad pattern ")
    assert reason in text
    assert "\n" not in text and caught.value.exit_code == 2
