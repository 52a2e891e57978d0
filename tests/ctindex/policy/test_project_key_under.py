"""`key_under` / `key_under_any` (ctindex/policy/project.py): the one test
for "this key is the folder or below it"."""

from __future__ import annotations

import pytest

from ctindex.policy.project import key_under, key_under_any, key_within


@pytest.mark.parametrize(
    ("key", "folder", "under"),
    [
        ("a/b", "a", True),
        ("a", "a", True),
        ("ab/c", "a", False),  # a prefix of the name is not a parent
        ("a/bc", "a/b", False),
        ("anything", "", True),  # "" is the project root
        ("", "a", False),
    ],
)
def test_key_under(key: str, folder: str, under: bool) -> None:
    assert key_under(key, folder) is under
    assert key_under_any(key, [folder]) is under
    assert key_within(key, {folder}) is under  # the set form agrees


def test_key_under_any_of_none_is_false() -> None:
    assert not key_under_any("a/b", [])
