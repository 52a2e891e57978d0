"""ctindex/client/spawn.py `spawn`: a project with nothing to index gets no daemon
(it would watch nothing for `idle_seconds`), whoever asks for one, and
nothing is written for the attempt (docs/cli.md, "No scopes"); neither
does a project folder of another user."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctindex.client.spawn import FOREIGN_PROJECT, NOTHING_TO_INDEX, spawn
from ctindex.ipc.runtime_dir import RuntimePaths
from ctindex.policy.project import Project
from tests.conftest import _daemons_under


def test_spawn_refuses_a_project_without_scopes(tmp_path: Path) -> None:
    project = tmp_path / "plain"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / "hello.md").write_text("# Hello\n")
    (project / ".git").mkdir()
    paths = RuntimePaths.for_project(Project.at(project))
    for ignore_cache in (False, True):  # a search's lazy start, `watch start`
        assert spawn(project, paths, ignore_cache=ignore_cache) == NOTHING_TO_INDEX
    assert not (project / ".ct").exists()
    daemons = _daemons_under(tmp_path)
    for proc in daemons:
        proc.kill()
    assert daemons == []


def test_spawn_starts_nothing_in_a_project_folder_of_another_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not even a cached failure is written: a member searching a group's
    index in someone else's folder answers without a daemon, and a
    command that would write is refused before (docs/format.md, "Store folders")."""
    from ctindex.ipc.spawn_failure import spawn_failure
    from ctindex.policy import store_path

    project = tmp_path / "theirs"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / "index.md").write_text("# Notes\n")
    (project / ".git").mkdir()
    monkeypatch.setattr(store_path, "foreign_project", lambda root, st=None: "not yours")
    paths = RuntimePaths.for_project(Project.at(project))
    for ignore_cache in (False, True):
        assert spawn(project, paths, ignore_cache=ignore_cache) == FOREIGN_PROJECT
    assert not (project / ".ct").exists()
    assert spawn_failure(paths) is None
    daemons = _daemons_under(tmp_path)
    for proc in daemons:
        proc.kill()
    assert daemons == []
