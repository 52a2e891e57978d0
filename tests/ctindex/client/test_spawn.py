"""ctindex/client/spawn.py `spawn`: a project with nothing to index gets no daemon
(it would watch nothing for `idle_seconds`), whoever asks for one, and
nothing is written for the attempt (docs/cli.md, "No scopes")."""

from __future__ import annotations

from pathlib import Path

from ctindex.client.spawn import NOTHING_TO_INDEX, spawn
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
