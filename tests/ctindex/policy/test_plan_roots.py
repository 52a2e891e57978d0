"""Root detection reads its rule from the provider (ctindex/policy/plan.py,
`detect_roots`; ProviderInfo.root_marker / root_depth)."""

from __future__ import annotations

from pathlib import Path

from ctindex import providers
from ctindex.policy.plan import compile_patterns, detect_roots, load_plan
from ctindex.policy.project import Project


def _touch(root: Path, *keys: str) -> None:
    for key in keys:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text("x\n")


def test_the_marker_and_depth_are_the_providers(tmp_path: Path) -> None:
    _touch(tmp_path, "a/ROOT", "a/b/ROOT", "c/d/ROOT", "e/index.md")
    info = providers.OKF_MARKDOWN._replace(id="marked", root_marker="ROOT", root_depth=1)
    project = Project.at(tmp_path)
    got = detect_roots(project, compile_patterns(()), info)
    assert got == ("a",)  # topmost wins; c/d is deeper than 1
    assert detect_roots(project, compile_patterns(())) == ("e",)  # the index provider's


def test_a_provider_without_a_marker_derives_no_scope(tmp_path: Path) -> None:
    _touch(tmp_path, "a/index.md")
    info = providers.OKF_MARKDOWN._replace(id="unmarked", root_marker=None)
    assert detect_roots(Project.at(tmp_path), compile_patterns(()), info) == ()


def test_derived_scopes_are_the_index_providers(tmp_path: Path) -> None:
    _touch(tmp_path, "okf/bundles/x/index.md")
    plan = load_plan(Project.at(tmp_path))
    index = providers.PROVIDERS[providers.INDEX_PROVIDER]
    assert [(s.root, s.provider, s.include) for s in plan.scopes] == [
        ("okf/bundles/x", index.id, index.default_include)
    ]
