"""The effective plan and the eight decision reasons, on real files."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from ctindex.policy import decide as decide_mod
from ctindex.policy import plan as plan_mod
from ctindex.policy.plan import Plan, load_plan
from ctindex.policy.project import Project
from ctindex.reconciler import DEFAULT_GRANULARITY_NS
from tests.conftest import BUNDLES


def plan_of(root: Path) -> Plan:
    return load_plan(Project.at(root))


def write_config(root: Path, text: str) -> None:
    (root / ".ct").mkdir(exist_ok=True)
    (root / ".ct" / "index.jsonc").write_text(text, encoding="utf-8")


def all_files(root: Path) -> list[str]:
    keys = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            keys.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return sorted(keys)


# --- the eight reasons, each from a real file situation ------------------------


def test_reason_included(bundles_project: Path) -> None:
    d = plan_of(bundles_project).decide("okf/bundles/ga4/tables/events_.md")
    assert (d.reason, d.scope, d.pattern, d.origin, d.provider) == (
        "included",
        "okf/bundles/ga4",
        "**/*.md",
        "derived",
        "okf-markdown",
    )
    assert d.detail == ""


def test_reason_excluded(bundles_project: Path) -> None:
    archive = bundles_project / "okf/bundles/ga4/archive"
    archive.mkdir()
    (archive / "old.md").write_text("# old\n")
    (bundles_project / "okf/bundles/ga4/state.db").write_bytes(b"SQLite format 3\0")
    write_config(
        bundles_project,
        """{
      scopes: [{root: "okf/bundles/ga4", provider: "okf-markdown",
                include: ["**/*"], exclude: ["archive/**"]}],
    }""",
    )
    plan = plan_of(bundles_project)
    local = plan.decide("okf/bundles/ga4/archive/old.md")
    assert (local.reason, local.pattern, local.origin, local.scope) == (
        "excluded",
        "archive/**",
        "project",
        "okf/bundles/ga4",
    )
    glob = plan.decide("okf/bundles/ga4/state.db")
    assert (glob.reason, glob.pattern, glob.origin) == ("excluded", "**/*.db", "derived")


def test_reason_hard_excluded(bundles_project: Path) -> None:
    storage = bundles_project / ".ct/okf"
    storage.mkdir(parents=True)
    (storage / "seg.md").write_text("# not content\n")
    write_config(bundles_project, '{scopes: [{root: ".", provider: "okf-markdown"}], exclude: []}')
    plan = plan_of(bundles_project)
    d = plan.decide(".ct/okf/seg.md")
    assert (d.reason, d.pattern, d.origin) == ("hard-excluded", ".ct/okf/**", "hard")
    # A file reached through a symlinked folder cannot be represented beneath its root.
    os.symlink(bundles_project / "okf/bundles/ga4", bundles_project / "linked")
    linked = plan.decide("linked/tables/events.md")
    assert (linked.reason, linked.origin) == ("hard-excluded", "hard")
    assert "'linked' is a symbolic link" in linked.detail
    assert plan.decide_key("okf/../okf/bundles/ga4/tables/events_.md").reason == "hard-excluded"


def test_reason_outside_scope(bundles_project: Path, tmp_path: Path) -> None:
    plan = plan_of(bundles_project)
    (bundles_project / "notes.md").write_text("# loose\n")
    beside = plan.decide("notes.md")
    assert (beside.reason, beside.scope) == ("outside-scope", None)
    viz = plan.decide("okf/bundles/ga4/viz.html")
    assert (viz.reason, viz.scope, viz.pattern) == ("outside-scope", "okf/bundles/ga4", None)
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# x\n")
    far = plan.decide(outside)
    assert (far.reason, far.path) == ("outside-scope", str(outside))


def test_reason_unsupported_provider(bundles_project: Path) -> None:
    write_config(
        bundles_project,
        """{scopes: [{root: "okf/bundles/acme_retail",
        provider: "okf-markdown", include: ["**/*"]}]}""",
    )
    plan = plan_of(bundles_project)
    for key in (
        "okf/bundles/acme_retail/viz.html",
        "okf/bundles/acme_retail/attesters/sql_equality.py",
    ):
        d = plan.decide(key)
        assert (d.reason, d.pattern, d.provider) == ("unsupported-provider", "**/*", "okf-markdown")
        assert "no registered provider" in d.detail


def test_reason_unsupported_type(bundles_project: Path) -> None:
    plan = plan_of(bundles_project)
    for key in ("okf/bundles/acme_retail/log.md", "okf/bundles/acme_retail/tables/index.md"):
        d = plan.decide(key)
        assert (d.reason, d.provider) == ("unsupported-type", "okf-markdown")
        assert "reserved" in d.detail


def test_reason_too_large(bundles_project: Path) -> None:
    big = bundles_project / "okf/bundles/ga4/tables/huge.md"
    limit = 2 * 1024 * 1024
    with big.open("wb") as handle:
        handle.truncate(limit + 1)
    d = plan_of(bundles_project).decide(big)
    assert d.reason == "too-large" and str(limit + 1) in d.detail
    with big.open("r+b") as handle:
        handle.truncate(limit)
    assert plan_of(bundles_project).decide(big).reason == "included"


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo", "socket"])
def test_reason_not_regular(
    bundles_project: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = bundles_project / "okf/bundles/ga4/tables/odd.md"
    if kind == "directory":
        target.mkdir()
    elif kind == "symlink":
        os.symlink("events_.md", target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        monkeypatch.chdir(target.parent)  # AF_UNIX paths are short: bind a bare name
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(target.name)
        except OSError:
            pytest.skip("cannot bind a Unix socket here")
        finally:
            sock.close()
    d = plan_of(bundles_project).decide(target)
    assert (d.reason, d.origin) == ("not-regular", "hard")


def test_every_reason_is_covered() -> None:
    tested = {
        name.removeprefix("test_reason_").replace("_", "-")
        for name in globals()
        if name.startswith("test_reason_")
    }
    assert tested == set(decide_mod.REASONS)


# --- the four real bundles ------------------------------------------------------


def test_bundles_decisions(bundles_project: Path) -> None:
    plan = plan_of(bundles_project)
    keys = [k for k in all_files(bundles_project) if k.startswith("okf/")]
    assert len(keys) == 83
    for key in keys:
        reason = plan.decide(key).reason
        name = key.rsplit("/", 1)[-1]
        if name.endswith((".html", ".py")):
            assert reason == "outside-scope", key
        elif name in ("index.md", "log.md"):
            assert reason == "unsupported-type", key
        else:
            assert key.endswith(".md") and reason == "included", key
    assert sum(plan.decide(k).included for k in keys) == 83 - 24 - 1 - 4 - 1


def test_bundles_with_wide_include_still_refuse_non_markdown(bundles_project: Path) -> None:
    scopes = ", ".join(
        f'{{root: "okf/bundles/{b}", provider: "okf-markdown", include: ["**/*"]}}' for b in BUNDLES
    )
    write_config(bundles_project, f"{{scopes: [{scopes}]}}")
    plan = plan_of(bundles_project)
    for key in all_files(bundles_project / "okf"):
        if key.endswith((".html", ".py")):
            assert plan.decide(f"okf/{key}").reason == "unsupported-provider", key


# --- derived roots ----------------------------------------------------------------


def test_derived_roots_are_the_bundles(bundles_project: Path) -> None:
    plan = plan_of(bundles_project)
    assert [s.root for s in plan.scopes] == [f"okf/bundles/{b}" for b in BUNDLES]
    assert {(s.provider, s.include, s.exclude, s.origin) for s in plan.scopes} == {
        ("okf-markdown", ("**/*.md",), (), "derived")
    }


def test_topmost_root_wins_and_depth_is_bounded(tmp_path: Path) -> None:
    for folder in ("a/b/c/d", "x/y", ".hidden", "node_modules/pkg", "top"):
        (tmp_path / folder).mkdir(parents=True)
    for marker in (
        "a/b/c/d/index.md",
        "x/index.md",
        "x/y/index.md",
        ".hidden/index.md",
        "node_modules/pkg/index.md",
    ):
        (tmp_path / marker).write_text("# i\n")
    os.symlink(tmp_path / "x", tmp_path / "top/link")
    assert plan_of(tmp_path).derived_roots == ("x",)  # depth 4, hidden, excluded, symlink: no
    (tmp_path / "a/b/c/index.md").write_text("# i\n")
    assert plan_of(tmp_path).derived_roots == ("a/b/c", "x")
    (tmp_path / "index.md").write_text("# i\n")
    assert plan_of(tmp_path).derived_roots == ("",)


def test_explicit_scopes_replace_derived(bundles_project: Path) -> None:
    write_config(bundles_project, '{scopes: [{root: "okf/bundles/ga4", provider: "okf-markdown"}]}')
    plan = plan_of(bundles_project)
    assert [(s.root, s.origin) for s in plan.scopes] == [("okf/bundles/ga4", "project")]
    assert plan.derived_roots is None
    assert plan.decide("okf/bundles/acme_retail/tables/orders.md").reason == "outside-scope"


def _age(root: Path) -> None:
    old = 1_000_000_000
    for folder, _dirs, _files in os.walk(root):
        os.utime(folder, (old, old))


def _outlive_ctime_window(root: Path) -> None:
    """utime moves ctime to now, and no one can set it back: wait until every
    folder's ctime is older than the racy window, or nothing is cached."""
    newest = max(os.lstat(folder).st_ctime_ns for folder, _d, _f in os.walk(root))
    wait = (newest + DEFAULT_GRANULARITY_NS - time.time_ns()) / 1e9 + 0.05
    if wait > 0:
        time.sleep(wait)


def test_roots_cache_is_used_and_invalidated(
    bundles_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = Project.at(bundles_project)
    project.runtime_dir.mkdir(parents=True)
    _age(bundles_project)
    _outlive_ctime_window(bundles_project)
    first = plan_of(bundles_project).derived_roots
    cache = json.loads((project.runtime_dir / plan_mod.ROOTS_CACHE).read_text())
    assert tuple(cache["roots"]) == first

    def no_scan(*_args: object) -> None:
        raise AssertionError("cache not used")

    with monkeypatch.context() as m:
        m.setattr(plan_mod, "_scan_roots", no_scan)
        assert plan_of(bundles_project).derived_roots == first
    (bundles_project / "okf/bundles/new").mkdir()
    (bundles_project / "okf/bundles/new/index.md").write_text("# new\n")
    assert "okf/bundles/new" in (plan_of(bundles_project).derived_roots or ())


def test_roots_cache_never_creates_the_runtime_folder(bundles_project: Path) -> None:
    _age(bundles_project)
    plan_of(bundles_project)
    assert not (bundles_project / ".ct").exists()


def test_roots_cache_write_failure_is_silent(bundles_project: Path) -> None:
    runtime = Project.at(bundles_project).runtime_dir
    runtime.mkdir(parents=True)
    _age(bundles_project)
    runtime.chmod(0o500)
    try:
        assert len(plan_of(bundles_project).scopes) == 4
    finally:
        runtime.chmod(0o700)


def test_racy_folders_are_not_cached(bundles_project: Path) -> None:
    runtime = Project.at(bundles_project).runtime_dir
    runtime.mkdir(parents=True)
    plan_of(bundles_project)  # folders were just created: racily clean
    assert not (runtime / plan_mod.ROOTS_CACHE).exists()


# --- digests ------------------------------------------------------------------


def test_digest_tracks_content_policy_only(bundles_project: Path) -> None:
    base = plan_of(bundles_project)
    assert base.digest() == plan_of(bundles_project).digest()
    write_config(bundles_project, "{watch: false, debounce_ms: 10, idle_seconds: 5}")
    assert plan_of(bundles_project).digest() == base.digest()
    write_config(bundles_project, "{max_file_bytes: 1000}")
    assert plan_of(bundles_project).digest() != base.digest()
    write_config(bundles_project, '{exclude: [".git/**"]}')
    assert plan_of(bundles_project).digest() != base.digest()


def test_scope_digest_changes_only_for_the_affected_scope(bundles_project: Path) -> None:
    def config(ga4_exclude: str) -> str:
        scopes = [
            f'{{root: "okf/bundles/{b}", provider: "okf-markdown"'
            + (f', exclude: ["{ga4_exclude}"]' if b == "ga4" else "")
            + "}"
            for b in BUNDLES
        ]
        return "{scopes: [" + ", ".join(scopes) + "]}"

    write_config(bundles_project, config("archive/**"))
    before = plan_of(bundles_project)
    write_config(bundles_project, config("old/**"))
    after = plan_of(bundles_project)
    changed = [
        a.root
        for a, b in zip(before.scopes, after.scopes, strict=True)
        if before.scope_digest(a) != after.scope_digest(b)
    ]
    assert changed == ["okf/bundles/ga4"]


# --- the reconciler's PathFilter ------------------------------------------------

FILTER_CONFIGS = [
    None,
    """{scopes: [{root: "okf/bundles/ga4", provider: "okf-markdown", include: ["tables/**"]},
                {root: "okf", provider: "okf-markdown", include: ["**/*"],
                 exclude: ["bundles/acme_retail/skills/**", "**/blocks.md"]}],
       exclude: ["**/stackoverflow/tables/", "**/*.db"], max_file_bytes: 4000}""",
    """{scopes: [{root: ".", provider: "okf-markdown", include: ["**/*.md", "**/*.html"]}]}""",
]


@pytest.mark.parametrize("config", FILTER_CONFIGS, ids=["derived", "nested", "project-root"])
def test_path_filter_agrees_with_decide(bundles_project: Path, config: str | None) -> None:
    (bundles_project / "okf/bundles/ga4/big.md").write_bytes(b"x" * (2 * 1024 * 1024 + 1))
    (bundles_project / "okf/bundles/ga4/state.db").write_bytes(b"x")
    (bundles_project / "okf/bundles/ga4/tables/notes.md").write_bytes(b"x" * 5000)
    os.mkfifo(bundles_project / "okf/bundles/ga4/pipe.md")
    os.symlink("tables/events_.md", bundles_project / "okf/bundles/ga4/alias.md")
    if config:
        write_config(bundles_project, config)
    plan = plan_of(bundles_project)
    flt = plan.path_filter()
    if config is None:
        assert list(flt.roots()) == [f"okf/bundles/{b}" for b in BUNDLES]
    accepted = 0
    for key in all_files(bundles_project):
        st = os.lstat(bundles_project / key)
        assert flt.accept(key, st) == plan.decide(key).included, key
        accepted += flt.accept(key, st)
    assert accepted > 10


def test_path_filter_prunes_excluded_folders(bundles_project: Path) -> None:
    write_config(
        bundles_project,
        """{
      scopes: [{root: "okf", provider: "okf-markdown", exclude: ["bundles/ga4/**"]}],
      exclude: ["node_modules/**", "**/cache/"],
    }""",
    )
    flt = plan_of(bundles_project).path_filter()
    assert list(flt.roots()) == ["okf"]
    assert flt.descend("okf/bundles") and flt.descend("okf/bundles/acme_retail")
    assert not flt.descend("okf/bundles/ga4")
    assert not flt.descend("okf/bundles/acme_retail/cache")
    assert not flt.descend("node_modules")
    assert not flt.descend(".ct/okf")


def test_nested_scopes_walk_once_and_first_scope_decides(bundles_project: Path) -> None:
    write_config(
        bundles_project,
        """{scopes: [
      {root: "okf/bundles/ga4", provider: "okf-markdown", include: ["tables/**"]},
      {root: "okf", provider: "okf-markdown"},
    ]}""",
    )
    plan = plan_of(bundles_project)
    assert list(plan.path_filter().roots()) == ["okf"]
    assert plan.decide("okf/bundles/ga4/datasets/ga4.md").reason == "outside-scope"
    assert plan.decide("okf/bundles/stackoverflow/tables/users.md").scope == "okf"


def test_scope_root_of_is_the_first_scope_containing_the_key(bundles_project: Path) -> None:
    """The root concept IDs are taken relative to, for the indexer and the
    --direct oracle alike (ctindex/policy/plan.py scope_root_of)."""
    write_config(
        bundles_project,
        """{scopes: [
      {root: "okf/bundles/ga4", provider: "okf-markdown"},
      {root: "okf", provider: "okf-markdown"},
    ]}""",
    )
    plan = plan_of(bundles_project)
    assert plan_mod.scope_root_of(plan, "okf/bundles/ga4/tables/events_.md") == "okf/bundles/ga4"
    assert plan_mod.scope_root_of(plan, "okf/bundles/stackoverflow/tables/users.md") == "okf"
    assert plan_mod.scope_root_of(plan, "elsewhere/a.md") == ""


def test_pattern_names_the_first_match() -> None:
    patterns = plan_mod.PatternSet(("*.txt", "docs/**", "**/*.md"))
    assert patterns.first("docs/a.md") == "docs/**"
    assert patterns.first("x/y.md") == "**/*.md"
    assert patterns.first("x/y.rst") is None and not patterns.matches("x/y.rst")


def test_uninspectable_path_is_decided_on_its_path(
    bundles_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root ignores permission bits, so an unsearchable folder is simulated
    # for this one path; every other lstat is real.
    target = str(bundles_project / "okf/bundles/ga4/tables/events_.md")
    real_lstat = os.lstat

    def lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if os.fspath(path) == target:  # type: ignore[call-overload]
            raise PermissionError(13, "Permission denied")
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    d = plan_of(bundles_project).decide("okf/bundles/ga4/tables/events_.md")
    assert (d.reason, d.detail) == ("included", "cannot be inspected (Permission denied)")
