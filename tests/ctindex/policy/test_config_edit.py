"""ctindex/policy/config_edit.py: `scopes add` / `scopes remove` edit the
store's text minimally. Property: over stores with comments in many places
and several layouts, adding a scope and removing it again gives a file that
loads to the same configuration, and every comment survives both edits."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.policy.config import ScopeSpec, parse_config
from ctindex.policy.config_edit import UneditableConfig, add_scope, remove_scope

PATH = Path("/p/.ct/index.jsonc")
ROOTS = ("a", "b", "notes", "kb/x", "deep/er/root", "ünï")


def _spec(root: str) -> ScopeSpec:
    return ScopeSpec(root, "okf-markdown", ("**/*.md",), ())


@st.composite
def stores(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A JSONC store with explicit scopes and unique comments `cN` in slots
    around every token of the scopes list (the text and its comments)."""
    counter = itertools.count()
    comments: list[str] = []
    multiline = draw(st.booleans())
    sep = "\n  " if multiline else " "

    def slot() -> str:
        kind = draw(st.sampled_from(("", "", "block", "line")))
        if not kind:
            return ""
        name = f"c{next(counter)}z"  # z: c1 is no prefix of c10
        comments.append(name)
        return f" /* {name} */" if kind == "block" else f" // {name}\n"

    roots = draw(st.lists(st.sampled_from(ROOTS[:-1]), unique=True, max_size=4))
    trailing = draw(st.booleans())
    elements = []
    for i, root in enumerate(roots):
        inner = slot() if draw(st.booleans()) else ""
        body = f'{{"root": "{root}",{inner} "provider": "okf-markdown"}}'
        comma = "," if i < len(roots) - 1 or trailing else ""
        elements.append(f"{slot()}{sep}  {body}{slot()}{comma}{slot()}")
    close = sep if multiline and roots else ""
    key = draw(st.sampled_from(('"scopes"', "scopes", "'scopes'")))
    scopes = f"{key}{slot()}:{slot()} [{''.join(elements)}{slot()}{close}]"
    members = ['"version": 1', scopes, '"watch": false']
    order = draw(st.permutations(members))
    last = len(order) - 1
    body = "".join(m + ("," + slot() + sep if i < last else "") for i, m in enumerate(order))
    text = f"{slot()}{{{slot()}{sep}{body}{slot()}{sep if multiline else ''}}}{slot()}\n"
    return text, comments


@settings(max_examples=150, deadline=None)
@given(stores(), st.sampled_from(ROOTS))
@pytest.mark.slow
def test_add_then_remove_keeps_the_config_and_every_comment(
    store: tuple[str, list[str]], new_root: str
) -> None:
    text, comments = store
    before = parse_config(text, PATH)
    assert before.scopes is not None
    if new_root in {s.root for s in before.scopes}:
        return
    added = add_scope(text, PATH, _spec(new_root), keep=())
    after_add = parse_config(added, PATH)
    assert after_add.scopes == (*before.scopes, _spec(new_root))
    removed = remove_scope(added, PATH, new_root)
    assert parse_config(removed, PATH) == before
    for name in comments:
        assert added.count(name) == 1 and removed.count(name) == 1, name


def test_round_trip_is_byte_exact_for_the_common_layouts() -> None:
    for text in (
        '{\n  // mine\n  "scopes": [\n    {"root": "a", "provider": "okf-markdown"}\n  ]\n}\n',
        '{"scopes": [{"root": "a", "provider": "okf-markdown"}]}',
        '{\n  "scopes": [\n    {"root": "a", "provider": "okf-markdown"}, // why a\n  ],\n}\n',
        '{\n  "scopes": []\n}\n',
    ):
        added = add_scope(text, PATH, _spec("b"), keep=())
        assert remove_scope(added, PATH, "b") == text


def test_a_store_without_scopes_gets_the_detected_ones_and_the_new_one() -> None:
    text = '{\n  // keep me\n  "version": 1,\n  "watch": false // and me\n}\n'
    added = add_scope(text, PATH, _spec("notes"), keep=(_spec("kb"),))
    config = parse_config(added, PATH)
    assert config.scopes == (_spec("kb"), _spec("notes"))
    assert config.settings == {"watch": False}
    assert "// keep me" in added and "// and me" in added


@pytest.mark.parametrize(
    "text",
    [
        "[]",  # the top level is not an object
        '{"scopes": [{"root": "a", "provider": "okf-markdown"}]} {}',  # text after it
        '{"scopes": "a"}',  # not a list
        '{"scopes": [{"root": "a", "provider": "okf-markdown"}',  # cut short
    ],
)
def test_shapes_it_cannot_edit_are_refused_with_one_line(text: str) -> None:
    with pytest.raises(UneditableConfig) as refused:
        add_scope(text, PATH, _spec("b"), keep=())
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{PATH}: cannot edit it safely")


def test_remove_never_pulls_a_member_into_a_line_comment() -> None:
    text = (
        '{"scopes": [\n  {"root": "a", "provider": "okf-markdown"}, // about a\n'
        '  {"root": "b", "provider": "okf-markdown"}, {"root": "c", "provider": "okf-markdown"}\n]}'
    )
    removed = remove_scope(text, PATH, "b")
    assert [s.root for s in parse_config(removed, PATH).scopes or ()] == ["a", "c"]
    assert "// about a\n" in removed


def test_remove_finds_the_comma_behind_a_comment() -> None:
    text = (
        '{"scopes": [{"root": "a", "provider": "okf-markdown"} /* x */ ,'
        ' {"root": "b", "provider": "okf-markdown"}]}'
    )
    removed = remove_scope(text, PATH, "b")
    assert [s.root for s in parse_config(removed, PATH).scopes or ()] == ["a"]
    assert "/* x */" in removed
