"""The index folder changed outside ctindex, with ordinary tools: an older
MANIFEST or a whole older store restored (`cp -p`, `rsync -a --delete`),
another project's store copied in, a segment truncated. With a daemon
running, the next answer must still equal the independent oracle's
(tests/oracle.py) and `--direct`'s, and say `fallback (index changed outside
ctindex: ...)`, never `watcher-clean`; the answers after it are watcher-clean
again and still right. Without a daemon (`"watch": false`) every answer
equals the oracle's. (ctindex/daemon/storeguard.py, ctindex/query/freshness.py,
docs/daemon.md "Index changed outside ctindex".)"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.daemon_support import CliProject

WORD = "zebrafjord"  # in no bundle: only the documents the tests write hold it
pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync not installed")


def store(p: CliProject) -> Path:
    return p.root / ".ct" / "okf"


def snapshot_store(p: CliProject, to: Path) -> None:
    """A copy of the store as a backup would take it (the runtime folder is
    the daemon's, not the index's)."""
    subprocess.run(
        ["rsync", "-a", "--delete", "--exclude", "runtime/", f"{store(p)}/", f"{to}/"], check=True
    )


def restore_store(p: CliProject, source: Path) -> None:
    """rsync -a --delete back over the live store, its runtime folder kept."""
    subprocess.run(
        ["rsync", "-a", "--delete", "--exclude", "runtime/", f"{source}/", f"{store(p)}/"],
        check=True,
    )


def write_doc(p: CliProject, name: str, text: str) -> None:
    (p.root / "acme_retail" / "metrics" / name).write_text(f"# {name}\n\n{text}\n")


def agree(p: CliProject, word: str) -> dict[str, Any]:
    """The indexed answer equals the oracle's and --direct's; its freshness."""
    indexed = p.search(word)
    assert p.hits(indexed) == sorted(oracle.containing(p.root, word)), word
    assert p.hits(indexed) == p.hits(p.search(word, direct=True)), word
    fresh: dict[str, Any] = indexed["freshness"]
    return fresh


def restore_older_manifest(p: CliProject, backup: Path, other: Path) -> None:
    shutil.copy2(backup / "MANIFEST", store(p) / "MANIFEST")  # cp -p


def restore_older_store(p: CliProject, backup: Path, other: Path) -> None:
    restore_store(p, backup)


def copy_other_projects_store(p: CliProject, backup: Path, other: Path) -> None:
    restore_store(p, other)


def truncate_a_segment(p: CliProject, backup: Path, other: Path) -> None:
    seg = max(store(p).glob("seg-*.seg"), key=lambda f: f.stat().st_size)
    os.truncate(seg, seg.stat().st_size // 2)


TAMPERS: dict[str, Callable[[CliProject, Path, Path], None]] = {
    "older MANIFEST restored": restore_older_manifest,
    "older store restored": restore_older_store,
    "another project's store copied in": copy_other_projects_store,
    "segment truncated": truncate_a_segment,
}


def other_store(make_cli_project: Callable[..., CliProject], tmp_path: Path) -> Path:
    """Another project's store, built under the same configuration, whose
    generation number runs ahead of the project's."""
    q = make_cli_project(config={"watch": False}, root=tmp_path / "other", bundles=("acme_retail",))
    write_doc(q, "other.md", f"{WORD} in another project")
    for i in range(3):
        write_doc(q, f"other{i}.md", f"{WORD} number {i}")
        q.cli("update")
    copy = tmp_path / "other-store"
    snapshot_store(q, copy)
    return copy


@pytest.mark.parametrize("tamper", list(TAMPERS))
@pytest.mark.slow
def test_a_store_changed_under_the_daemon_is_never_answered_as_watcher_clean(
    tamper: str, make_cli_project: Callable[..., CliProject], tmp_path: Path
) -> None:
    other = other_store(make_cli_project, tmp_path)
    p = make_cli_project()
    agree(p, "margin")  # builds the index, starts the daemon
    p.wait_daemon()
    assert agree(p, "margin")["mode"] == "watcher-clean"
    backup = tmp_path / "backup"
    snapshot_store(p, backup)
    write_doc(p, "zebra.md", f"the {WORD} metric")
    assert agree(p, WORD)["mode"] == "watcher-clean"

    TAMPERS[tamper](p, backup, other)

    fresh = agree(p, WORD)
    assert fresh["mode"] == "fallback", fresh
    assert "index changed outside ctindex" in str(fresh["reason"]), fresh
    # Later edits land on the rebuilt store, not on the tampered base.
    write_doc(p, "zebra2.md", f"a second {WORD}")
    fresh = agree(p, WORD)
    assert fresh["mode"] == "watcher-clean", fresh
    (p.root / "acme_retail" / "metrics" / "zebra.md").unlink()
    assert agree(p, WORD)["mode"] == "watcher-clean"
    assert agree(p, "margin")["mode"] == "watcher-clean"


@pytest.mark.parametrize("tamper", list(TAMPERS))
@pytest.mark.slow
def test_a_store_changed_without_a_daemon_answers_as_the_files_say(
    tamper: str, make_cli_project: Callable[..., CliProject], tmp_path: Path
) -> None:
    other = other_store(make_cli_project, tmp_path)
    p = make_cli_project(config={"watch": False})
    agree(p, "margin")
    backup = tmp_path / "backup"
    snapshot_store(p, backup)
    write_doc(p, "zebra.md", f"the {WORD} metric")
    agree(p, WORD)

    TAMPERS[tamper](p, backup, other)

    assert agree(p, WORD)["mode"] in ("reconcile-on-query", "fallback")
    write_doc(p, "zebra2.md", f"a second {WORD}")
    agree(p, WORD)
    assert not p.daemon_pids()


def test_the_daemon_rebuilds_a_restored_store_without_waiting_for_a_query(
    make_cli_project: Callable[..., CliProject], tmp_path: Path
) -> None:
    """The heartbeat notices too: `status` then shows the daemon's generation
    and the published one agreeing, with no query asked."""
    from ctindex.daemon.schedule import HEARTBEAT_S
    from ctindex.store.generation import read_manifest
    from tests.daemon_support import wait_for

    p = make_cli_project()
    agree(p, "margin")
    p.wait_daemon()
    backup = tmp_path / "backup"
    snapshot_store(p, backup)
    write_doc(p, "zebra.md", f"the {WORD} metric")
    agree(p, WORD)
    restore_older_manifest(p, backup, backup)
    restored = read_manifest(store(p))
    assert restored is not None

    def rebuilt() -> bool:
        m = read_manifest(store(p))
        return m is not None and m.identity != restored.identity

    wait_for(rebuilt, timeout=HEARTBEAT_S * 4 + 10)
    status = p.status()
    m = read_manifest(store(p))
    assert m is not None and status["generation"] == m.generation
    assert agree(p, WORD)["mode"] in ("watcher-clean", "fallback")
