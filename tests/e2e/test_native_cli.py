"""Whole commands give byte-identical results with and without the native
scan (docs/reliability.md, "Native core"), and the answers are the
independent oracle's (tests/oracle.py), with the daemon off and on.

Each step changes the tree with a real tool (tar with --mtime, rsync -a,
cp -p, cp -al, os.link, rm, mv), then `update` runs twice from the same index
state: once under CTINDEX_PURE=1 and once without it. The segments, the file
table (minus "recorded at", a clock reading), the update report and the
search answers must agree. Where the extension is not built both runs are
pure and the test still checks the answers against the oracle.

A nothing-changed `update` with the extension also counts its work: no
path-filter call and no file table decoded into a dict (the saving that
puts it near `find`, docs/decisions/native.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.reconciler import DEFAULT_GRANULARITY_NS
from ctindex.reconciler import native as native_mod
from tests import oracle
from tests.daemon_support import TEST_CONFIG, CliProject, wait_for

MARK = "zqxv7marker"
OTHER = "qpzw3token"
FIXED_MTIME = "@1600000000"
HAVE_NATIVE = native_mod.module() is not None


def _env(pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != native_mod.PURE_ENV}
    if pure:
        env[native_mod.PURE_ENV] = "1"
    return env


def _cli(root: Path, *args: str, pure: bool) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=_env(pure),
    )
    assert done.returncode in (0, 1), done.stderr
    return done


def _state(root: Path) -> dict[str, Any]:
    """What an index holds, independent of its random file names and clock."""
    from ctindex.store.filetable import load_file_table
    from ctindex.store.generation import read_manifest

    index = root / ".ct" / "okf"
    m = read_manifest(index)
    assert m is not None
    table = {k: e[:6] for k, e in load_file_table(index, m).raw().items()}
    return {
        "generation": m.generation,
        "documents": m.documents,
        "segments": [(index / ref.name).read_bytes() for ref in m.segments],
        "dels": [(index / ref.dels).read_bytes() if ref.dels else None for ref in m.segments],
        "table": sorted(table.items()),
        "delta_keys": sorted(m.files_delta),
    }


_REPORT = (
    "generation",
    "published",
    "refreshed",
    "rebuilt",
    "added",
    "changed",
    "removed",
    "renamed",
    "metadata_only",
    "dirty",
    "documents",
    "errors",
    "warnings",
    "entries_visited",
    "missing_roots",
    "notes",
    "problems",
    "exit_code",
)


def _search(root: Path, word: str, pure: bool) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        _cli(root, "--json", "search", word, "--limit", "1000", pure=pure).stdout
    )
    return doc


def _settle(root: Path) -> None:
    """Past the racy-clean window of every stamp, so unchanged files are
    trusted from their fingerprint (else both ways just re-read them)."""
    newest = 0
    for folder, _dirs, files in os.walk(root):
        for name in (".", *files):
            st = os.lstat(os.path.join(folder, name))
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    wait = (newest + DEFAULT_GRANULARITY_NS - time.time_ns()) / 1e9 + 0.05
    if wait > 0:
        time.sleep(wait)


def _both_ways(root: Path) -> None:
    """update from the same index state pure and native: the same outcome,
    and the search answers are the oracle's."""
    _settle(root)
    index = root / ".ct" / "okf"
    snapshot = root.parent / "index-snapshot"
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(index, snapshot, symlinks=True)
    outcomes = []
    for pure in (True, False):
        shutil.rmtree(index)
        shutil.copytree(snapshot, index, symlinks=True)
        report = json.loads(_cli(root, "--json", "update", pure=pure).stdout)
        answers = {
            w: sorted(r["path"] for r in _search(root, w, pure)["results"]) for w in (MARK, OTHER)
        }
        ranked = [(r["path"], r.get("score")) for r in _search(root, MARK, pure)["results"]]
        outcomes.append(({k: report.get(k) for k in _REPORT}, _state(root), answers, ranked))
    assert outcomes[0] == outcomes[1]
    answers = outcomes[1][2]
    for word in (MARK, OTHER):
        assert set(answers[word]) == oracle.containing(root, word), word


def _doc(path: Path, words: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: {path.stem}\n---\n\n# {path.stem}\n\n{words}\n")


def _tarball(tmp: Path, name: str, words: str) -> Path:
    stage = tmp / f"stage-{name}"
    for i in range(3):
        _doc(stage / "kb" / "concepts" / f"c{i}.md", f"{words} item {i}")
    tarball = tmp / f"{name}.tar"
    subprocess.run(
        ["tar", f"--mtime={FIXED_MTIME}", "-cf", str(tarball), "-C", str(stage), "kb"], check=True
    )
    return tarball


@pytest.mark.slow
def test_update_native_and_pure_agree_with_real_tools(tmp_path: Path) -> None:
    root = tmp_path / "project"
    project = CliProject(root, config={**TEST_CONFIG, "watch": False})
    (root / "kb").mkdir()
    (root / "kb" / "index.md").write_text("# kb\n")
    for i in range(40):
        _doc(root / "kb" / "notes" / f"n{i:02d}.md", f"{MARK if i % 3 == 0 else 'plain'} {i}")
    (root / "kb" / "weird name\nwith newline.md").write_text(f"# odd\n\n{OTHER}\n")
    os.symlink("notes", root / "kb" / "linked-notes")  # never followed
    assert project.cli("update").returncode == 0

    _both_ways(root)  # nothing changed
    v1, v2 = _tarball(tmp_path, "v1", MARK), _tarball(tmp_path, "v2", OTHER)  # same sizes
    subprocess.run(["tar", "-xf", str(v1), "-C", str(root)], check=True)
    _both_ways(root)
    subprocess.run(["tar", "-xf", str(v2), "-C", str(root)], check=True)  # same mtime, size
    _both_ways(root)
    build = tmp_path / "build"
    build.mkdir()
    subprocess.run(["tar", "-xf", str(v1), "-C", str(build)], check=True)
    subprocess.run(["rsync", "-a", f"{build}/", f"{root}/"], check=True)
    _both_ways(root)
    subprocess.run(
        ["cp", "-p", str(root / "kb" / "notes" / "n01.md"), str(root / "kb" / "notes" / "n00.md")],
        check=True,
    )
    subprocess.run(["cp", "-al", str(root / "kb" / "notes"), str(root / "kb" / "hard")], check=True)
    os.link(root / "kb" / "concepts" / "c0.md", root / "kb" / "c0-again.md")
    _both_ways(root)
    (root / "kb" / "notes" / "n03.md").unlink()
    (root / "kb" / "notes" / "n06.md").rename(root / "kb" / "notes" / "n06-moved.md")
    _doc(root / "kb" / "notes" / "new.md", f"{MARK} new")
    _both_ways(root)


def _count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    calls = [0]
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kw: Any) -> Any:
        calls[0] += 1
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_nothing_changed_update_filters_and_decodes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted, not timed: with the extension a nothing-changed update calls
    the path filter for no file the table holds and never decodes the file
    table into a dict; the pure path filters every file (the cost it pays)."""
    from ctindex.indexing.transaction import update
    from ctindex.policy.decide import PlanPathFilter
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project
    from ctindex.store.filetable import BaseTable

    root = tmp_path / "project"
    CliProject(root, bundles=(), config={**TEST_CONFIG, "watch": False})
    (root / "kb").mkdir()
    (root / "kb" / "index.md").write_text("# kb\n")
    for i in range(300):
        _doc(root / "kb" / f"d{i % 7}" / f"n{i:03d}.md", f"word {i}")
    project = Project.at(root)
    assert update(project, load_plan(project)).added == 300
    _settle(root)
    update(project, load_plan(project))  # re-reads the racily-clean files once, records them
    accepts = _count_calls(monkeypatch, PlanPathFilter, "accept")
    decodes = _count_calls(monkeypatch, BaseTable, "everything")
    report = update(project, load_plan(project))
    assert not report.published and report.added == report.changed == 0
    # kb/index.md is no document: the table does not hold it, so it is
    # filtered (and rejected) on every pass, either way.
    if HAVE_NATIVE:
        assert (accepts[0], decodes[0]) == (1, 0)
    else:
        assert (accepts[0], decodes[0]) == (301, 1)


@pytest.mark.slow
def test_daemon_answers_match_the_oracle_both_ways(tmp_path: Path) -> None:
    """With the daemon on: its full passes run the same update code, with
    and without the extension; answers after a same-size, same-mtime swap
    (tar --mtime) are the oracle's either way."""
    for pure in (True, False):
        root = tmp_path / f"daemon-{int(pure)}"
        project = CliProject(root, bundles=(), config={**TEST_CONFIG, "watch": True})
        try:
            (root / "kb").mkdir()
            (root / "kb" / "index.md").write_text("# kb\n")
            v1, v2 = (
                _tarball(tmp_path / f"t{int(pure)}", v, w) for v, w in (("v1", MARK), ("v2", OTHER))
            )
            subprocess.run(["tar", "-xf", str(v1), "-C", str(root)], check=True)
            _cli(root, "watch", "start", pure=pure)
            project.wait_daemon()
            _settle(root)
            for word in (MARK, OTHER):
                got = {r["path"] for r in _search(root, word, pure)["results"]}
                assert got == oracle.containing(root, word)
            subprocess.run(["tar", "-xf", str(v2), "-C", str(root)], check=True)
            for word in (MARK, OTHER):
                want = oracle.containing(root, word)
                wait_for(
                    lambda w=word, o=want, r=root, p=pure: (
                        {hit["path"] for hit in _search(r, w, p)["results"]} == o
                    ),
                    timeout=30,
                )
        finally:
            _cli(root, "watch", "stop", pure=pure)
            project.kill_daemons()
