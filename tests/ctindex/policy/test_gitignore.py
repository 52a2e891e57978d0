"""`.ct/.gitignore` (ctindex/policy/gitignore.py): written once, never the
user's file changed, nothing written through a link, and git then ignores
the index but not the configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.policy.gitignore import GITIGNORE_NAME, GITIGNORE_TEXT, write_gitignore
from tests.conftest import CliResult, write_config


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / ".ct").mkdir()
    return tmp_path


def test_written_once_with_the_index_folder_ignored(root: Path) -> None:
    assert write_gitignore(root)
    path = root / ".ct" / GITIGNORE_NAME
    assert path.read_text(encoding="utf-8") == GITIGNORE_TEXT
    assert "okf/" in GITIGNORE_TEXT.splitlines()
    assert not write_gitignore(root)  # there already: idempotent
    assert path.read_text(encoding="utf-8") == GITIGNORE_TEXT


def test_a_file_of_the_user_is_never_replaced_nor_appended_to(root: Path) -> None:
    path = root / ".ct" / GITIGNORE_NAME
    path.write_text("# mine\n*.bak\n")
    before = os.stat(path)
    assert not write_gitignore(root)
    assert path.read_text() == "# mine\n*.bak\n"
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )


@pytest.mark.parametrize("dangling", [True, False])
def test_nothing_is_written_through_a_link_in_its_place(
    root: Path, tmp_path_factory: pytest.TempPathFactory, dangling: bool
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "target"
    if not dangling:
        outside.write_text("theirs\n")
    (root / ".ct" / GITIGNORE_NAME).symlink_to(outside)
    assert not write_gitignore(root)
    if dangling:
        assert not outside.exists()
    else:
        assert outside.read_text() == "theirs\n"


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_something_else_in_its_place_is_left_alone_without_blocking(root: Path, kind: str) -> None:
    path = root / ".ct" / GITIGNORE_NAME
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    assert not write_gitignore(root)  # O_EXCL: a FIFO is never opened
    assert path.exists() and not path.is_file()


def test_no_ct_folder_writes_nothing(tmp_path: Path) -> None:
    assert not write_gitignore(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_accepts_a_str_root(root: Path) -> None:
    assert write_gitignore(str(root))
    assert (root / ".ct" / GITIGNORE_NAME).is_file()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_ignores_the_index_and_keeps_the_configuration(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
    assert write_gitignore(root)
    candidates = [
        ".ct/okf/MANIFEST",
        ".ct/okf/seg-00000001-aa.seg",
        ".ct/okf/runtime/daemon.log",
        ".ct/index.jsonc",
        ".ct/.gitignore",
        "okf/index.md",  # the project's own okf/ folder is no business of .ct/.gitignore
    ]
    done = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", *candidates],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.split() == candidates[:3]


def test_the_first_build_writes_it_unless_the_project_opts_out(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult]
) -> None:
    wanted = make_project("acme_retail")
    write_config(wanted, "okf/bundles/acme_retail", watch=False)
    assert run_cli("update", cwd=wanted).code == 0
    assert (wanted / ".ct" / GITIGNORE_NAME).read_text() == GITIGNORE_TEXT

    opted_out = make_project("acme_retail")
    write_config(opted_out, "okf/bundles/acme_retail", watch=False, gitignore_index=False)
    assert run_cli("update", cwd=opted_out).code == 0
    assert (opted_out / ".ct" / "okf" / "MANIFEST").is_file()  # the build did happen
    assert not (opted_out / ".ct" / GITIGNORE_NAME).exists()
