"""The no-scopes note (ctindex/service/no_scopes.py): why a plan has no
scope, and the command that adds one; nothing for a plan with scopes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.service.no_scopes import ADD_HINT, NoScopes, no_scopes
from tests.conftest import write_config


def test_detection_found_nothing(plain: Path) -> None:
    note = no_scopes(load_plan(Project.at(plain)))
    assert note is not None and note.hint == ADD_HINT
    assert note.message.startswith(f"no scopes: no OKF root found under {plain} (")
    assert "index.md" in note.message  # the marker detection looks for
    assert note.line() == f"{note.message}; add one with `{ADD_HINT}`"
    assert NoScopes(**note.to_json()) == note  # what `status` rebuilds from its document


def test_explicit_empty_scopes_replace_detection(make_project: Callable[..., Path]) -> None:
    root = make_project("ga4")
    config = write_config(root)  # `scopes: []`
    note = no_scopes(load_plan(Project.at(root)))
    assert note is not None
    assert note.message == (
        f"no scopes: {config} lists none, and explicit scopes replace root detection"
    )


def test_a_plan_with_scopes_has_no_note(make_project: Callable[..., Path]) -> None:
    assert no_scopes(load_plan(Project.at(make_project("ga4")))) is None
