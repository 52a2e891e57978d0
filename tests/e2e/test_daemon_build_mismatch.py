"""Upgrading ctindex while its daemon runs (docs/daemon.md "Build identity").

Two builds are simulated with real copies of the package tree: build A is an
exact copy of the code under test, build B the same with a changed module
(and, in the `provider` case, a bumped provider version, which changes every
plan digest and forces one rebuild). The daemon runs from one build
(PYTHONPATH), clients from the other. Required: the other build's daemon
exits after answering once, at most one rebuild happens, answers equal the
independent oracle, and later queries are watcher-clean again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.ipc.build_id import compute_build_id
from tests import oracle
from tests.conftest import copy_package
from tests.daemon_support import CliProject, require_daemon, wait_for

Make = Callable[..., CliProject]
REPO = Path(__file__).resolve().parents[2]
MARKER = "zqxv7marker"
HANG_GUARD_S = 30.0  # only a hang guard: the daemon normally leaves within milliseconds


def make_build(target: Path, *, edit: str | None = None, provider_bump: bool = False) -> Path:
    """A copy of the installed package tree; `edit` is appended to a module."""
    copy_package(target)
    if edit is not None:
        with open(target / "ctindex" / "client.py", "a", encoding="utf-8") as fh:
            fh.write(f"\n# {edit}\n")
    if provider_bump:
        registry = target / "ctindex" / "providers" / "__init__.py"
        text = registry.read_text(encoding="utf-8")
        assert "    version=1,\n" in text
        registry.write_text(
            text.replace("    version=1,\n", "    version=2,\n", 1), encoding="utf-8"
        )
    return target


def env_for(build: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.fspath(build)
    return env


def search(project: CliProject, build: Path) -> dict:
    """`python -m ctindex search` of `build`, started in the project (not in
    the repository, whose own packages would shadow PYTHONPATH on sys.path[0])."""
    done = subprocess.run(
        [sys.executable, "-m", "ctindex", "--json", "search", MARKER, "--limit", "1000"],
        cwd=project.root,
        env=env_for(build),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    doc: dict = json.loads(done.stdout)
    return doc


def generation(project: CliProject) -> int:
    text = (project.root / ".ct" / "okf" / "MANIFEST").read_bytes().rpartition(b"\ncrc32:")[0]
    return int(json.loads(text)["generation"])


def live_daemon(project: CliProject, build: Path) -> int:
    """The pid of the one daemon, once it answers and finished its startup
    pass, and after checking it runs `build`."""
    require_daemon()

    def ready() -> int | None:
        doc = project.status()  # status serves any build
        pids = project.daemon_pids()
        if doc["responsive"] and doc["reconciles"] and doc["pid"] in pids:
            return int(doc["pid"])
        return None

    pid: int = wait_for(ready, HANG_GUARD_S)
    assert project.status()["build"] == build_of(build)
    assert project.daemon_pids() == [pid]
    return pid


def build_of(build: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "from ctindex.ipc.build_id import build_id; print(build_id())"],
        cwd=build,
        env=env_for(build),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.parametrize("provider_bump", [False, True], ids=["code-only", "provider"])
@pytest.mark.slow
def test_other_build_daemon_exits_once_and_index_does_not_flip_flop(
    make_cli_project: Make, tmp_path: Path, provider_bump: bool
) -> None:
    old = make_build(tmp_path / "build-old")
    new = make_build(tmp_path / "build-new", edit="build B", provider_bump=provider_bump)
    project = make_cli_project()
    doc_dir = project.root / "acme_retail" / "metrics"
    (doc_dir / "marker-one.md").write_text(f"# One\n\n{MARKER} in a metric.\n")
    (doc_dir / "marker-two.md").write_text(f"# Two\n\nAnother {MARKER}.\n")
    expected = sorted(oracle.containing(project.root, MARKER))
    assert len(expected) == 2

    # The old build's daemon is up and serving its own clients.
    first = search(project, old)
    assert project.hits(first) == expected
    old_pid = live_daemon(project, old)
    assert search(project, old)["freshness"]["mode"] == "watcher-clean"
    before = generation(project)

    # A client of the new build: answered by the synchronous path, with the reason.
    switched = search(project, new)
    assert project.hits(switched) == expected
    fresh = switched["freshness"]
    assert fresh["mode"] == "fallback", fresh
    assert fresh["reason"] == "daemon was a different build; restarted", fresh
    # The old daemon leaves (bounded wait) and says why.
    wait_for(lambda: old_pid not in project.daemon_pids(), HANG_GUARD_S)
    assert any("reason=build-mismatch" in line for line in project.log_lines())

    # The new build's daemon (started by that query) serves the next ones.
    new_pid = live_daemon(project, new)
    assert new_pid != old_pid
    for _ in range(3):
        later = search(project, new)
        assert project.hits(later) == expected
        assert later["freshness"]["mode"] == "watcher-clean", later["freshness"]
    # At most one rebuild (the provider bump needs exactly one), none for a code change.
    assert generation(project) - before == (1 if provider_bump else 0)
    assert project.daemon_pids() == [new_pid]


def test_same_code_in_another_folder_is_the_same_build(
    make_cli_project: Make, tmp_path: Path
) -> None:
    """Two installs of identical code (two venvs) must not restart each other's
    daemon: the build id is the code's content, not where it lies."""
    one = make_build(tmp_path / "build-one")
    two = make_build(tmp_path / "build-two")
    project = make_cli_project()
    (project.root / "acme_retail" / "metrics" / "m.md").write_text(f"# M\n\n{MARKER}\n")
    expected = sorted(oracle.containing(project.root, MARKER))
    search(project, one)
    pid = live_daemon(project, one)
    for build in (two, one, two):
        doc = search(project, build)
        assert project.hits(doc) == expected
        assert doc["freshness"]["mode"] == "watcher-clean", doc["freshness"]
    assert project.daemon_pids() == [pid]


def test_build_id_follows_code_content(tmp_path: Path) -> None:
    """The id changes with a module's content even when size and mtime are
    kept (an editable install edited in place, then `touch -r`), and is the
    same for identical copies."""
    one = make_build(tmp_path / "one")
    two = make_build(tmp_path / "two")
    assert compute_build_id(one) == compute_build_id(two)
    target = two / "ctindex" / "reconciler" / "diff.py"
    st = os.stat(target)
    data = bytearray(target.read_bytes())
    data[-2:-1] = b"#" if data[-2:-1] != b"#" else b" "  # same size, other content
    target.write_bytes(bytes(data))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert compute_build_id(one) != compute_build_id(two)


def test_manifest_key_of_a_newer_build_is_not_damage(tmp_path: Path) -> None:
    """A newer build of the same format may add manifest keys; an older build
    must read that manifest (not call it corrupt and rebuild, which would make
    the two rebuild against each other). The writer build is recorded inside
    the last pass's record, never as a format change."""
    from ctindex.store.durable import crc
    from ctindex.store.generation import FORMAT, StoreManifest, read_manifest

    m = StoreManifest(generation=7, reconcile={"kind": "full", "writer": "abc"})
    body = json.loads(m.to_bytes().rpartition(b"\ncrc32:")[0])
    body["added_by_a_newer_build"] = {"anything": 1}
    body["segments"] = [{"name": "s1", "ndocs": 1, "future_field": True}]
    data = json.dumps(body, sort_keys=True).encode()
    (tmp_path / "MANIFEST").write_bytes(data + b"\ncrc32:%08x\n" % crc(data))
    read = read_manifest(tmp_path)
    assert read is not None and body["format"] == FORMAT
    assert read.generation == 7 and read.segments[0].name == "s1"
    assert read.reconcile["writer"] == "abc"
