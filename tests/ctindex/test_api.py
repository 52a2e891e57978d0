"""The Python API (ctindex/api.py, docs/api.md): its answers equal the CLI's
JSON; one long-lived Index sees every change made after it was opened
(against tests/oracle.py, daemon on and off) while reusing its open
generation; `show ID`; `search --paths/--ids`; the import cost."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import ctindex
from ctindex.errors import WrongType
from tests import oracle
from tests.conftest import REPO, CliResult, cli_main, outlive_racy_window, write_config
from tests.daemon_support import CliProject

MARK = "zqxv7marker"
QUERIES = (
    "event",
    "session OR revenue",
    '"page view"',
    "tabl*",
    "tag:ga4 -event",
    "type:table",
    "path:okf/bundles/ga4/tables/ user",
    "tables/events_",
    MARK,
)
TIMES = ("barrier_ms", "reconcile_ms")


def _cli_json(root: Path, *args: str) -> dict[str, Any]:
    done = cli_main("-C", str(root), "--json", *args)
    assert done.code in (0, 1), done.err
    doc: dict[str, Any] = json.loads(done.out)
    return doc


def _untimed(doc: dict[str, Any]) -> dict[str, Any]:
    """A search document without the figures that differ between two runs."""
    return {**doc, "freshness": {k: v for k, v in doc["freshness"].items() if k not in TIMES}}


def _paths(result: ctindex.SearchResult) -> set[str]:
    return {h.path for h in result.hits}


def _schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((files("ctindex.schemas") / name).read_text()))


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    p = make_project("ga4", "stackoverflow")
    (p / ".ct").mkdir()
    (p / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')  # derived scopes
    return p


# -- the API equals the CLI ---------------------------------------------------------


def test_api_search_equals_cli_json_watch_off(project: Path) -> None:
    outlive_racy_window(project)  # else a later pass confirming racy entries publishes
    cli_main("-C", str(project), "update")
    with ctindex.Index(project) as index:
        for query in QUERIES:
            for limit in (10, 3):
                api = index.search(query, limit=limit).to_json()
                cli = _cli_json(project, "search", query, "--limit", str(limit))
                assert _untimed(api) == _untimed(cli), query
                assert api["freshness"]["mode"] == "reconcile-on-query"
            direct = index.search(query, limit=1000, direct=True).to_json()
            assert direct == _cli_json(project, "search", query, "--limit", "1000", "--direct")
        assert index.opened == 1  # nothing changed: one generation served every query


def test_api_search_equals_cli_json_with_a_daemon(
    make_cli_project: Callable[..., CliProject],
) -> None:
    cp = make_cli_project(bundles=("ga4", "stackoverflow"))
    cp.cli("watch", "start")
    cp.wait_daemon()
    with ctindex.Index(cp.root) as index:
        for query in QUERIES:
            cli = json.loads(cp.cli("--json", "search", query).stdout)
            api = index.search(query).to_json()
            assert api["freshness"]["mode"] == cli["freshness"]["mode"] == "watcher-clean"
            assert _untimed(api) == _untimed(cli), query


def test_api_status_why_update_equal_the_cli(project: Path) -> None:
    with ctindex.Index(project) as index:
        report = index.update()
        assert report.published and report.documents > 0
        again = index.update()
        cli = _cli_json(project, "update")
        assert not again.published and again.generation == cli["generation"] == report.generation
        assert again.problems == cli["problems"]
        status = index.status()
        doc = _cli_json(project, "status")
        volatile = ("runtime_bytes", "watcher")
        assert {k: v for k, v in status.document.items() if k not in volatile} == {
            k: v for k, v in doc.items() if k not in volatile
        }
        assert status.documents == doc["documents"] and status.exit_code == 0
        decision = index.why("okf/bundles/ga4/index.md")
        why = _cli_json(project, "why", "okf/bundles/ga4/index.md")["decisions"][0]
        assert (decision.reason, decision.scope, decision.pattern) == (
            why["reason"],
            why["scope"],
            why["pattern"],
        )
        rebuilt = index.rebuild()
        assert rebuilt.rebuilt and rebuilt.generation > report.generation


def test_api_errors_are_the_stable_types(project: Path, tmp_path: Path) -> None:
    with ctindex.Index(project) as index:
        with pytest.raises(ctindex.QueryError):
            index.search('"unterminated')
        with pytest.raises(ctindex.UnknownField) as unknown:  # a QueryError too
            index.search("tgs:finance")
        assert isinstance(unknown.value, ctindex.QueryError) and unknown.value.exit_code == 2
        assert unknown.value.field == "tgs" and unknown.value.suggestions[0] == "tags"
        assert "did you mean 'tags'?" in str(unknown.value) and "\n" not in str(unknown.value)
        with pytest.raises(ctindex.UsageError):
            index.search("event", limit=0)
        with pytest.raises(ctindex.ConceptNotFound) as missing:
            index.get("tables/event_")
        assert missing.value.exit_code == 1 and "tables/events_" in missing.value.suggestions
    (project / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": "yes"}')
    with pytest.raises(ctindex.PolicyError), ctindex.Index(project) as index:
        index.search("event")
    lonely = tmp_path / "no-project"
    lonely.mkdir()
    if not any((p / ".git").exists() or (p / ".ct").is_dir() for p in (lonely, *lonely.parents)):
        with pytest.raises(ctindex.UsageError):
            ctindex.Index(lonely)
    assert issubclass(ctindex.IndexBusy, ctindex.IndexWriteError)
    assert issubclass(ctindex.IndexCorrupt, ctindex.CtindexError)


# -- a long-lived Index sees every change ---------------------------------------------


def _changes(root: Path, scratch: Path) -> list[tuple[str, Callable[[], None]]]:
    """Changes made underneath a long-lived Index, each with real tools, and
    including the kinds an mtime-only check misses (an old mtime kept by
    `cp -p` and `tar --mtime`, a hard link's other name rewritten)."""
    tables = root / "okf" / "bundles" / "ga4" / "tables"
    src = scratch / "src.md"

    def create() -> None:
        (tables / "fresh_one.md").write_text(f"# Fresh one\n\n{MARK} appears here.\n")

    def cp_p_old_mtime() -> None:
        src.write_text(f"# Copied\n\nold mtime {MARK}\n")
        os.utime(src, ns=(1_000_000_000, 1_000_000_000))
        subprocess.run(["cp", "-p", str(src), str(tables / "copied.md")], check=True)

    def tar_mtime() -> None:
        folder = scratch / "tarred"
        folder.mkdir()
        (folder / "tarred.md").write_text(f"# Tarred\n\n{MARK}\n")
        archive = scratch / "t.tar"
        subprocess.run(
            ["tar", "-C", str(folder), "--mtime=2001-01-01", "-cf", str(archive), "tarred.md"],
            check=True,
        )
        subprocess.run(["tar", "-C", str(tables), "-xf", str(archive)], check=True)

    def same_size_same_mtime_edit() -> None:
        path = tables / "copied.md"
        st = path.stat()
        path.write_text(path.read_text().replace(MARK, "x" * len(MARK)))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as before

    def hard_link_rewrite() -> None:
        other = scratch / "other-name.md"
        os.link(tables / "fresh_one.md", other)
        with open(other, "r+") as fh:  # in place through the other name, as vim does
            fh.write("# Fresh one\n\nnothing  here ")

    def delete() -> None:
        (tables / "tarred.md").unlink()

    return [
        ("create", create),
        ("cp -p", cp_p_old_mtime),
        ("tar --mtime", tar_mtime),
        ("same size and mtime", same_size_same_mtime_edit),
        ("hard link", hard_link_rewrite),
        ("delete", delete),
    ]


def _sees_every_change(root: Path, scratch: Path, mode: str, skip: tuple[str, ...] = ()) -> None:
    with ctindex.Index(root) as index:
        first = index.search(MARK, limit=1000)
        assert _paths(first) == oracle.containing(root, MARK) == set()
        opened = index.opened
        index.search("event")
        assert index.opened == opened  # nothing changed: the open generation was reused
        for name, change in _changes(root, scratch):
            if name in skip:
                continue
            before = index.opened
            change()
            got = index.search(MARK, limit=1000)
            assert _paths(got) == oracle.containing(root, MARK), name
            assert got.freshness.mode == mode, (name, got.freshness)
            assert index.opened == before + 1, name  # a new generation, opened once
            again = index.search(MARK, limit=1000)
            assert _paths(again) == _paths(got) and index.opened == before + 1, name
        assert _paths(index.search(MARK, limit=1000, direct=True)) == oracle.containing(root, MARK)


def test_long_lived_index_sees_changes_watch_off(project: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _sees_every_change(project, scratch, "reconcile-on-query")


def test_long_lived_index_sees_changes_with_a_daemon(
    make_cli_project: Callable[..., CliProject], tmp_path: Path
) -> None:
    cp = make_cli_project(root=tmp_path / "proj", bundles=())
    (cp.root / "okf" / "bundles").mkdir(parents=True)
    shutil.copytree(REPO / "fixtures" / "okf-bundles" / "ga4", cp.root / "okf/bundles/ga4")
    cp.cli("watch", "start")
    cp.wait_daemon()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # Including a rewrite through a hard link made after the daemon's last
    # pass: test_daemon_sees_a_link_made_after_its_pass.
    _sees_every_change(cp.root, scratch, "watcher-clean")


def test_the_read_overlaps_the_barrier_and_runs_again_unless_vouched_for(
    make_cli_project: Callable[..., CliProject], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Index.search reads the generation it holds while the daemon answers
    the barrier (ctindex/query/freshness.py _EarlyRead). Nothing changed:
    that one read answers. A change the daemon had not applied yet (a long
    debounce holds it back until the barrier): the barrier applies it, so
    an early read of the old generation is not vouched for, and the read
    runs again on the new one; the answer is the files'."""
    from ctindex.search import execute

    cp = make_cli_project(config={"debounce_ms": 60_000})
    cp.cli("watch", "start")
    cp.wait_daemon()
    real = execute.search_snapshot
    generations: list[int] = []

    def counted(snap: Any, node: Any, limit: int, want_keys: bool = False) -> execute.Outcome:
        generations.append(snap.generation)
        return real(snap, node, limit, want_keys)

    monkeypatch.setattr(execute, "search_snapshot", counted)
    with ctindex.Index(cp.root) as index:
        index.search("margin")
        for _ in range(3):
            generations.clear()
            got = index.search("margin")
            assert got.freshness.mode == "watcher-clean" and len(generations) == 1
        before = got.freshness.generation
        for i in range(3):
            page = cp.root / "acme_retail" / "metrics" / f"overlap{i}.md"
            page.write_text(f"# Overlap\n\n{MARK}{i}\n")
            generations.clear()
            got = index.search(f"{MARK}{i}", limit=1000)
            assert _paths(got) == oracle.containing(cp.root, f"{MARK}{i}") != set()
            assert got.freshness.mode == "watcher-clean"
            # The early read opened `before` and ran again on the generation
            # the barrier published; or, when the daemon's publish came
            # before the early open, it read that one and it was kept (each
            # way tested alone: tests/ctindex/query/test_freshness.py).
            answered = got.freshness.generation
            assert answered is not None and answered > before
            assert generations in ([before, answered], [answered]), generations
            before = answered


def test_daemon_sees_a_link_made_after_its_pass(
    make_cli_project: Callable[..., CliProject], tmp_path: Path
) -> None:
    """Found while testing the API; the same with `ctindex search` processes.
    Closed by watching every indexed file itself (ctindex/daemon/filewatch.py):
    the write through the new name reaches the file's own watch."""
    cp = make_cli_project(root=tmp_path / "proj", bundles=("ga4",))
    cp.cli("watch", "start")
    cp.wait_daemon()
    target = cp.root / "ga4" / "tables" / "linked.md"
    target.write_text(f"# Linked\n\n{MARK}\n")
    assert cp.hits(cp.search(MARK)) == ["ga4/tables/linked.md"]
    other = tmp_path / "other-name.md"
    os.link(target, other)
    with open(other, "r+") as fh:
        fh.write("# Linked\n\nnothing  here ")
    assert cp.hits(cp.search(MARK)) == sorted(oracle.containing(cp.root, MARK)) == []


def test_long_lived_index_follows_a_plan_change(project: Path) -> None:
    """A new bundle (root detection) and a config edit reach the next query."""
    with ctindex.Index(project) as index:
        assert index.search(MARK).total == 0
        extra = project / "okf" / "bundles" / "newbundle"
        extra.mkdir()
        (extra / "index.md").write_text("# New bundle\n")
        (extra / "c.md").write_text(f"# C\n\n{MARK}\n")
        assert (
            _paths(index.search(MARK))
            == oracle.containing(project, MARK)
            == {"okf/bundles/newbundle/c.md"}
        )
        write_config(project, "okf/bundles/ga4", watch=False)
        assert _paths(index.search(MARK)) == oracle.containing(project, MARK) == set()


# -- show ID ------------------------------------------------------------------------


def test_show_existing_missing_and_ambiguous(
    project: Path, run_cli: Callable[..., CliResult]
) -> None:
    root = str(project)
    so = project / "okf" / "bundles" / "stackoverflow"
    users = so / "tables" / "users.md"
    done = run_cli("-C", root, "show", "tables/users")
    assert done.code == 0 and done.out == users.read_text()  # the file as it is
    doc = json.loads(run_cli("-C", root, "--json", "show", "tables/users").out)
    _schema("show.json").validate(doc)
    assert doc["id"] == "tables/users" and doc["scope"] == "okf/bundles/stackoverflow"
    assert doc["frontmatter"]["title"] == doc["title"] == "Stack Overflow Users"
    assert doc["freshness"]["mode"] == "direct"
    assert any(link["concept_id"] == "datasets/stackoverflow" for link in doc["links"])
    # the API and the CLI agree
    with ctindex.Index(project) as index:
        concept = index.get("tables/users")
        assert {**concept.to_json(), "freshness": None} == {**doc, "freshness": None}

    missing = run_cli("-C", root, "show", "tables/user")
    assert missing.code == 1 and missing.out == ""
    assert "no such concept" in missing.err and "tables/users" in missing.err
    assert missing.err.count("\n") == 1 and "Traceback" not in missing.err
    error = json.loads(run_cli("-C", root, "--json", "show", "users").out)["error"]
    assert error["kind"] == "ConceptNotFound" and error["exit_code"] == 1
    assert error["suggestions"][0] == "tables/users"  # same last segment first

    # The same ID in two bundles: ambiguous (exit 2, both named), unless the
    # scope or the project-relative path picks one.
    twin = project / "okf" / "bundles" / "ga4" / "tables" / "users.md"
    twin.write_text("---\ntitle: GA4 users\n---\nbody\n")
    amb = run_cli("-C", root, "--json", "show", "tables/users")
    assert amb.code == 2 and "ambiguous" in amb.err
    assert sorted(json.loads(amb.out)["error"]["candidates"]) == [
        "okf/bundles/ga4/tables/users.md",
        "okf/bundles/stackoverflow/tables/users.md",
    ]
    assert (
        run_cli("-C", root, "show", "tables/users", "--scope", "okf/bundles/ga4").out
        == twin.read_text()
    )
    assert run_cli("-C", root, "show", "okf/bundles/ga4/tables/users").out == twin.read_text()
    assert run_cli("-C", root, "show", "okf/bundles/ga4/tables/users.md").code == 0
    # A fresh answer: created, edited and removed files are seen at once.
    (so / "new_one.md").write_text("# New one\n")
    assert run_cli("-C", root, "show", "new_one").out == "# New one\n"
    (so / "new_one.md").unlink()
    assert run_cli("-C", root, "show", "new_one").code == 1


def test_show_refuses_what_is_not_an_included_concept(
    project: Path, run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    root = str(project)
    ga4 = project / "okf" / "bundles" / "ga4"
    outside = tmp_path / "secret.md"
    outside.write_text("# secret\n")
    (ga4 / "link.md").symlink_to(outside)  # never followed
    os.mkfifo(ga4 / "pipe.md")  # must not hang
    (ga4 / "bad.md").write_bytes(b"\x00\x01")
    for wanted in ("link", "pipe", "index", "../../../../secret", "/etc/passwd", ""):
        done = run_cli("-C", root, "show", wanted)
        assert done.code in (1, 2) and "Traceback" not in done.err, wanted
        assert "secret" not in done.out
    bad = run_cli("-C", root, "show", "bad")
    assert bad.code == 2 and "NUL" in bad.err


# -- search --paths / --ids ---------------------------------------------------------


def test_search_paths_and_ids(project: Path, run_cli: Callable[..., CliResult]) -> None:
    root = str(project)
    for i in range(14):  # more than the default limit of 10
        (project / "okf" / "bundles" / "ga4" / f"m{i}.md").write_text(f"# M{i}\n\n{MARK}\n")
    doc = _cli_json(project, "search", MARK, "--limit", "1000")
    paths = run_cli("-C", root, "search", MARK, "--paths")
    assert paths.code == 0
    assert paths.out.splitlines() == [r["path"] for r in doc["results"]]
    assert set(paths.out.splitlines()) == oracle.containing(project, MARK)
    assert "14 of 14 matches" in paths.err and "reconcile-on-query" in paths.err
    ids = run_cli("-C", root, "-q", "search", MARK, "--ids", "--limit", "3")
    assert ids.out.splitlines() == [r["id"] for r in doc["results"][:3]] and ids.err == ""
    none = run_cli("-C", root, "search", "zqxv7absent", "--paths")
    assert none.code == 1 and none.out == ""
    both = run_cli("-C", root, "search", MARK, "--paths", "--ids")
    assert both.code == 2
    with_json = run_cli("-C", root, "--json", "search", MARK, "--paths")
    assert with_json.code == 2 and json.loads(with_json.out)["error"]["kind"] == "UsageError"


# -- docs/api.md runs ------------------------------------------------------------------


def test_docs_api_examples_run(project: Path) -> None:
    """Every ```python block of docs/api.md, in order, in one namespace, with
    PROJECT naming a project of two bundles."""
    text = (REPO / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4
    namespace: dict[str, Any] = {"PROJECT": str(project)}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)


# -- import cost -----------------------------------------------------------------------


def _modules_after(code: str, cwd: Path | None = None) -> set[str]:
    script = code + "\nimport sys\nprint(' '.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=cwd,
    )
    return set(done.stdout.split())


def test_import_ctindex_is_light() -> None:
    plain = _modules_after("pass")
    loaded = _modules_after("import ctindex") - plain
    assert {m for m in loaded if m.startswith("ctindex")} == {"ctindex"}
    assert "dataclasses" not in loaded and "ctindex.api" not in loaded


def test_a_search_process_loads_none_of_the_api(project: Path) -> None:
    """The CLI's search (fast or slow path) imports no API, MCP or `show` code."""
    cli_main("-C", str(project), "update")  # watching is off: the slow path runs
    code = f"from ctindex.cli import main\nmain(['-C', {str(project)!r}, 'search', 'event'])"
    loaded = _modules_after(code)
    assert not {
        m
        for m in loaded
        if m in ("ctindex.api", "ctindex.mcp_server", "difflib", "ctindex.commands.show")
        or m.startswith("mcp")
    }


_READ_ONLY_READER = """
import json, subprocess, sys
import ctindex
root, idx = sys.argv[1], sys.argv[2]
subprocess.run(["mount", "--bind", idx, idx], check=True)
subprocess.run(["mount", "-o", "remount,bind,ro", idx], check=True)
# The index is now behind the files.
with open(root + "/okf/bundles/ga4/tables/behind.md", "w") as fh:
    fh.write("# Behind\\n\\n" + sys.argv[3] + "\\n")
with ctindex.Index(root) as index:
    result = index.search(sys.argv[3], limit=100)
print(json.dumps({"paths": sorted(h.path for h in result.hits), "mode": result.freshness.mode,
                  "reason": result.freshness.reason}))
"""


def test_api_read_only_index_answers_from_the_files(project: Path) -> None:
    """As `ctindex search` does: an index that is behind the files and cannot be
    written (a read-only mount) answers from the files, labelled, not an error."""
    with ctindex.Index(project) as index:
        assert index.search(MARK).total == 0  # builds the index
    idx = project / ".ct" / "okf"
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            _READ_ONLY_READER,
            str(project),
            str(idx),
            MARK,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no private mount namespace here: {done.stderr.strip()[:80]}")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["mode"] == "fallback" and "read-only index" in answer["reason"], answer
    behind = {"okf/bundles/ga4/tables/behind.md"}
    assert set(answer["paths"]) == oracle.containing(project, MARK) == behind


# -- wrong argument types ------------------------------------------------------------


class _BytesPath:
    """An os.PathLike whose path is bytes: not a text path."""

    def __fspath__(self) -> bytes:
        return b"okf"


# (method, arguments, the parameter at fault, what it takes, the type given).
# "Index" is the constructor.
WRONG_TYPES: list[tuple[str, tuple[Any, ...], dict[str, Any], str, str, str]] = [
    ("Index", (b"here",), {}, "path", "str, os.PathLike or None", "bytes"),
    ("Index", (3,), {}, "path", "str, os.PathLike or None", "int"),
    ("Index", (_BytesPath(),), {}, "path", "str, os.PathLike or None", "_BytesPath"),
    ("search", (b"event",), {}, "query", "str", "bytes"),
    ("search", (None,), {}, "query", "str", "None"),
    ("search", (["event"],), {}, "query", "str", "list"),
    ("search", ("event",), {"limit": "3"}, "limit", "int", "str"),
    ("search", ("event",), {"limit": True}, "limit", "int", "bool"),
    ("search", ("event",), {"limit": 2.0}, "limit", "int", "float"),
    ("search", ("event",), {"direct": "yes"}, "direct", "bool", "str"),
    ("search", ("event",), {"direct": 1}, "direct", "bool", "int"),
    ("search", ("event",), {"direct": None}, "direct", "bool", "None"),
    ("get", (b"tables/users",), {}, "concept_id", "str", "bytes"),
    ("get", (None,), {}, "concept_id", "str", "None"),
    ("get", ("tables/users",), {"scope": 3}, "scope", "str or None", "int"),
    ("get", ("tables/users",), {"scope": b"okf"}, "scope", "str or None", "bytes"),
    ("concepts", (), {"type": 3}, "type", "str or None", "int"),
    ("concepts", (), {"tag": b"ga4"}, "tag", "str or None", "bytes"),
    ("concepts", (), {"prefix": None}, "prefix", "str", "None"),
    ("concepts", (), {"offset": "1"}, "offset", "int", "str"),
    ("concepts", (), {"offset": True}, "offset", "int", "bool"),
    ("concepts", (), {"limit": 5.0}, "limit", "int", "float"),
    ("why", (b"okf/x.md",), {}, "path", "str or os.PathLike", "bytes"),
    ("why", (None,), {}, "path", "str or os.PathLike", "None"),
    ("why", (_BytesPath(),), {}, "path", "str or os.PathLike", "_BytesPath"),
    ("why", ("x.md",), {"cwd": 3}, "cwd", "str, os.PathLike or None", "int"),
    ("why", ("x.md",), {"cwd": b"okf"}, "cwd", "str, os.PathLike or None", "bytes"),
    ("status", (), {"verbose": "yes"}, "verbose", "bool", "str"),
    ("status", (), {"verbose": 1}, "verbose", "bool", "int"),
]


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "parameter", "expected", "got"),
    WRONG_TYPES,
    ids=[f"{m}-{p}-{g}" for m, _a, _k, p, _e, g in WRONG_TYPES],
)
def test_a_wrong_argument_type_is_named_before_anything_is_read(
    tmp_path: Path,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    parameter: str,
    expected: str,
    got: str,
) -> None:
    (tmp_path / ".git").mkdir()
    with ctindex.Index(tmp_path) as index:
        call = ctindex.Index if method == "Index" else getattr(index, method)
        with pytest.raises(WrongType) as wrong:
            call(*args, **kwargs)
    error = wrong.value
    assert str(error) == f"{method}: {parameter} must be {expected}, not {got}"
    assert (error.call, error.parameter, error.expected) == (method, parameter, expected)
    assert error.got.__qualname__ == got or (got == "None" and error.got is type(None))
    assert isinstance(error, TypeError) and isinstance(error, ctindex.UsageError)
    assert error.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git"]  # nothing read or written


def test_every_public_parameter_has_a_wrong_type_case() -> None:
    """Each public method's every parameter is in WRONG_TYPES, so a method or
    parameter added later is checked too."""
    import inspect

    public = {"Index": ctindex.Index.__init__}
    public.update(
        (name, member)
        for name, member in vars(ctindex.Index).items()
        if not name.startswith("_") and inspect.isfunction(member)
    )
    wanted = {
        (name, parameter)
        for name, function in public.items()
        for parameter in list(inspect.signature(function).parameters)[1:]  # past self
    }
    assert wanted == {(m, p) for m, _a, _k, p, _e, _g in WRONG_TYPES}
