"""What vouches for "unchanged" uses the full stat fingerprint (size,
mtime_ns, ctime_ns, inode, device), never a partial stamp, and an answer
reports the generation it read (docs/reliability.md, "What vouches for
unchanged").

Real tools make the stamps collide: reproducible tarballs (`tar --mtime`),
`rsync -a` and `cp -p` restore every mtime, `tar x` and `cp -p` reuse the
inode, and the sizes are equal on purpose. Only ctime (which no user can set
back) and the content tell the versions apart. Answers are compared with the
independent oracle (tests/oracle.py), with the daemon on and off.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.policy.project import Project
from ctindex.store.generation import read_manifest
from tests import oracle
from tests.conftest import cli_main, outlive_racy_window
from tests.daemon_support import TEST_CONFIG, CliProject, wait_for

MARK = "zqxv7marker"
FIXED_MTIME = "@1600000000"  # what a reproducible build stamps on everything
FIXED_NS = 1_600_000_000 * 10**9


def _bundle(base: Path, name: str) -> None:
    folder = base / "okf" / "bundles" / name
    (folder / "concepts").mkdir(parents=True)
    (folder / "index.md").write_text(f"# {name}\n")
    (folder / "concepts" / f"{name}-one.md").write_text(f"# {name} one\n\n{MARK} in {name}\n")


def _tarballs(tmp: Path) -> tuple[Path, Path]:
    """v1 holds bundle b1; v2 adds b2 (a folder with an index.md and concepts).
    Every member, folders included, carries the same fixed mtime."""
    out = []
    for version, names in (("v1", ("b1",)), ("v2", ("b1", "b2"))):
        stage = tmp / f"stage-{version}"
        for name in names:
            _bundle(stage, name)
        tarball = tmp / f"{version}.tar"
        subprocess.run(
            ["tar", f"--mtime={FIXED_MTIME}", "-cf", str(tarball), "-C", str(stage), "okf"],
            check=True,
        )
        out.append(tarball)
    return out[0], out[1]


def _extract(tarball: Path, root: Path) -> None:
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(root)], check=True)


def _rsync(tarball: Path, root: Path, tmp: Path) -> None:
    """Build output (the unpacked tarball: every mtime fixed) synced with rsync -a."""
    build = tmp / f"build-{tarball.stem}"
    build.mkdir()
    _extract(tarball, build)
    os.utime(build, ns=(FIXED_NS, FIXED_NS))  # the output folder too: every mtime fixed
    subprocess.run(["rsync", "-a", f"{build}/", f"{root}/"], check=True)


def _stamps(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_size, st.st_mtime_ns, st.st_ino


def _search(root: Path, *extra: str) -> dict[str, Any]:
    done = cli_main("-C", str(root), "--json", "search", MARK, "--limit", "1000", *extra)
    assert done.code in (0, 1), done.err
    doc: dict[str, Any] = json.loads(done.out)
    return doc


def _hits(doc: dict[str, Any]) -> set[str]:
    return {r["path"] for r in doc["results"]}


def _watch_off_project(tmp: Path) -> Path:
    root = tmp / "project"
    (root / ".git").mkdir(parents=True)
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    # As an earlier daemon (watching was on once) leaves it: the roots cache
    # lives here, and only in a runtime folder that already exists.
    Project.at(root).runtime_dir.mkdir(parents=True, mode=0o700)
    return root


# -- item: a new bundle under a folder that keeps its mtime ----------------------


@pytest.mark.parametrize("entry", ["search", "direct", "why", "update", "rebuild"])
@pytest.mark.slow
def test_fixed_mtime_tar_adds_bundle_daemon_off(tmp_path: Path, entry: str) -> None:
    v1, v2 = _tarballs(tmp_path)
    root = _watch_off_project(tmp_path)
    _extract(v1, root)
    outlive_racy_window(root)
    for _ in range(2):
        assert (
            _hits(_search(root))
            == oracle.containing(root, MARK)
            == {"okf/bundles/b1/concepts/b1-one.md"}
        )
    assert (Project.at(root).runtime_dir / "roots.json").is_file()
    bundles = root / "okf" / "bundles"
    before = _stamps(bundles)
    _extract(v2, root)
    assert _stamps(bundles)[1] == before[1], "precondition: tar kept the folder's mtime"
    expected = oracle.containing(root, MARK)
    assert "okf/bundles/b2/concepts/b2-one.md" in expected
    if entry == "search":
        assert _hits(_search(root)) == expected
    elif entry == "direct":
        assert _hits(_search(root, "--direct")) == expected
    elif entry == "why":
        done = cli_main("-C", str(root), "why", "okf/bundles/b2/concepts/b2-one.md")
        assert done.code == 0, done.out + done.err
    else:
        done = cli_main("-C", str(root), "--json", entry)
        assert done.code == 0, done.err
        assert json.loads(done.out)["documents"] == len(oracle.indexed_files(root))


def test_fixed_mtime_rsync_adds_bundle_daemon_off(tmp_path: Path) -> None:
    v1, v2 = _tarballs(tmp_path)
    root = _watch_off_project(tmp_path)
    _rsync(v1, root, tmp_path)
    outlive_racy_window(root)
    for _ in range(2):
        assert _hits(_search(root)) == oracle.containing(root, MARK)
    bundles = root / "okf" / "bundles"
    before = _stamps(bundles)
    _rsync(v2, root, tmp_path)
    assert _stamps(bundles)[1] == before[1], "precondition: rsync -a kept the folder's mtime"
    assert _hits(_search(root)) == oracle.containing(root, MARK)
    assert len(oracle.containing(root, MARK)) == 2


def _daemon_project(make_cli_project: Callable[..., CliProject], v1: Path) -> CliProject:
    proj = make_cli_project(bundles=())
    _extract(v1, proj.root)
    outlive_racy_window(proj.root)
    proj.search(MARK)  # no daemon yet: answers by fallback and starts one
    proj.wait_daemon()
    doc = proj.search(MARK)
    assert doc["freshness"]["mode"] == "watcher-clean", doc["freshness"]
    assert set(proj.hits(doc)) == oracle.containing(proj.root, MARK)
    return proj


@pytest.mark.slow
def test_fixed_mtime_tar_adds_bundle_daemon_on(
    tmp_path: Path, make_cli_project: Callable[..., CliProject]
) -> None:
    v1, v2 = _tarballs(tmp_path)
    proj = _daemon_project(make_cli_project, v1)
    bundles = proj.root / "okf" / "bundles"
    before = _stamps(bundles)
    _extract(v2, proj.root)
    assert _stamps(bundles)[1] == before[1], "precondition: tar kept the folder's mtime"
    expected = oracle.containing(proj.root, MARK)
    assert len(expected) == 2
    doc = proj.search(MARK)
    assert set(proj.hits(doc)) == expected, doc["freshness"]
    assert set(proj.hits(proj.search(MARK, direct=True))) == expected


@pytest.mark.slow
def test_new_root_replans_daemon_without_a_query(
    tmp_path: Path, make_cli_project: Callable[..., CliProject]
) -> None:
    """The daemon watches only scope roots; a new root beside them must still
    re-derive its plan (heartbeat check of the folders detection listed)."""
    v1, v2 = _tarballs(tmp_path)
    proj = _daemon_project(make_cli_project, v1)
    digest = proj.status()
    _extract(v2, proj.root)

    def replanned() -> bool:
        last = proj.status().get("last_reconcile") or {}
        return bool(last.get("reason") == "plan-changed")

    wait_for(replanned, timeout=30)
    assert digest["pid"] == proj.status()["pid"]  # the same daemon, re-planned
    doc = proj.search(MARK)
    assert set(proj.hits(doc)) == oracle.containing(proj.root, MARK)


# -- item: a config swapped for one with the same size, mtime and inode ----------


def _swap_config_project(
    tmp_path: Path, make_cli_project: Callable[..., CliProject]
) -> tuple[CliProject, Path]:
    """A watched project answering watcher-clean for b1 and b2, and a config
    excluding b2 of the same size, to be put in place with `cp -p`."""
    _v1, v2 = _tarballs(tmp_path)
    default = list(oracle.DEFAULT_EXCLUDE)
    # Equal sizes on purpose: only content (and ctime) differ.
    keep = {**TEST_CONFIG, "exclude": [*default, "okf/bundles/zz/**"]}
    drop = {**TEST_CONFIG, "exclude": [*default, "okf/bundles/b2/**"]}
    assert len(json.dumps(keep)) == len(json.dumps(drop))
    proj = make_cli_project(config=keep, bundles=())
    _extract(v2, proj.root)
    config = proj.root / ".ct" / "index.jsonc"
    os.utime(config, ns=(FIXED_NS, FIXED_NS))
    swap = tmp_path / "index.jsonc"
    swap.write_text(json.dumps(drop))
    os.utime(swap, ns=(FIXED_NS, FIXED_NS))
    outlive_racy_window(proj.root)
    proj.search(MARK)
    proj.wait_daemon()
    doc = proj.search(MARK)
    assert set(proj.hits(doc)) == oracle.containing(proj.root, MARK)
    assert len(proj.hits(doc)) == 2 and doc["freshness"]["mode"] == "watcher-clean"
    return proj, swap


def _cp_p(swap: Path, config: Path) -> None:
    before = _stamps(config)
    subprocess.run(["cp", "-p", str(swap), str(config)], check=True)
    assert _stamps(config) == before, "precondition: same size, mtime and inode"


@pytest.mark.slow
def test_config_swap_same_stamp_is_seen_by_daemon(
    tmp_path: Path, make_cli_project: Callable[..., CliProject]
) -> None:
    proj, swap = _swap_config_project(tmp_path, make_cli_project)
    _cp_p(swap, proj.root / ".ct" / "index.jsonc")
    expected = oracle.containing(proj.root, MARK)
    assert expected == {"okf/bundles/b1/concepts/b1-one.md"}
    doc = proj.search(MARK)
    assert set(proj.hits(doc)) == expected, doc["freshness"]
    assert set(proj.hits(proj.search(MARK, direct=True))) == expected


@pytest.mark.slow
def test_config_swap_same_stamp_replans_daemon_without_a_query(
    tmp_path: Path, make_cli_project: Callable[..., CliProject]
) -> None:
    """The daemon's own heartbeat check (no client stat to compare with)."""
    proj, swap = _swap_config_project(tmp_path, make_cli_project)
    _cp_p(swap, proj.root / ".ct" / "index.jsonc")

    def replanned() -> bool:
        last = proj.status().get("last_reconcile") or {}
        return bool(last.get("reason") == "plan-changed")

    wait_for(replanned, timeout=30)
    doc = proj.search(MARK)
    assert set(proj.hits(doc)) == oracle.containing(proj.root, MARK), doc["freshness"]


# -- item: the generation reported is the generation read -------------------------


@pytest.mark.slow
def test_generation_reported_is_generation_read(
    tmp_path: Path, make_cli_project: Callable[..., CliProject]
) -> None:
    v1, _v2 = _tarballs(tmp_path)
    proj = _daemon_project(make_cli_project, v1)
    index_dir = Project.at(proj.root).index_dir
    first = read_manifest(index_dir)
    assert first is not None
    proj.cli("rebuild")  # an outside writer publishes the next generation
    published = read_manifest(index_dir)
    assert published is not None and published.generation > first.generation
    doc = proj.search(MARK)
    assert doc["freshness"]["generation"] == published.generation, doc["freshness"]
    assert set(proj.hits(doc)) == oracle.containing(proj.root, MARK)
    text = proj.cli("search", MARK).stdout
    assert f"generation {published.generation} ·" in text, text


# -- the same two items with watching off (every query reconciles itself) --------


def test_config_swap_same_stamp_is_seen_daemon_off(tmp_path: Path) -> None:
    _v1, v2 = _tarballs(tmp_path)
    root = _watch_off_project(tmp_path)
    default = list(oracle.DEFAULT_EXCLUDE)
    keep = {"version": 1, "watch": False, "exclude": [*default, "okf/bundles/zz/**"]}
    drop = {"version": 1, "watch": False, "exclude": [*default, "okf/bundles/b2/**"]}
    assert len(json.dumps(keep)) == len(json.dumps(drop))
    config = root / ".ct" / "index.jsonc"
    config.write_text(json.dumps(keep))
    _extract(v2, root)
    os.utime(config, ns=(FIXED_NS, FIXED_NS))
    swap = tmp_path / "index.jsonc"
    swap.write_text(json.dumps(drop))
    os.utime(swap, ns=(FIXED_NS, FIXED_NS))
    outlive_racy_window(root)
    assert _hits(_search(root)) == oracle.containing(root, MARK) and len(_hits(_search(root))) == 2
    before = _stamps(config)
    subprocess.run(["cp", "-p", str(swap), str(config)], check=True)
    assert _stamps(config) == before, "precondition: same size, mtime and inode"
    expected = oracle.containing(root, MARK)
    assert expected == {"okf/bundles/b1/concepts/b1-one.md"}
    doc = _search(root)
    assert doc["freshness"]["mode"] == "reconcile-on-query"
    assert _hits(doc) == expected
    assert _hits(_search(root, "--direct")) == expected


def test_generation_reported_is_generation_read_daemon_off(tmp_path: Path) -> None:
    v1, _v2 = _tarballs(tmp_path)
    root = _watch_off_project(tmp_path)
    _extract(v1, root)
    _search(root)
    index_dir = Project.at(root).index_dir
    first = read_manifest(index_dir)
    assert first is not None
    assert cli_main("-C", str(root), "rebuild").code == 0  # another writer publishes
    published = read_manifest(index_dir)
    assert published is not None and published.generation > first.generation
    doc = _search(root)
    assert doc["freshness"]["generation"] == published.generation, doc["freshness"]
    assert _hits(doc) == oracle.containing(root, MARK)
