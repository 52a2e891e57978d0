"""`--direct` (ctindex/search/direct.py) says what it could not read: a
refused folder or file is left out of the answer and named in its notes,
never dropped in silence (the index reports the same as walk problems)."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.reconciler.report import Bucket
from ctindex.reconciler.walk import FsOps
from ctindex.search.direct import eligible_contents, unread_note
from tests.conftest import cli_main, write_config

REFUSED = {"locked", "secret.md"}  # EACCES however the test runs (root ignores modes)


def _refusing(real: Callable[..., int]) -> Callable[..., int]:
    def open_(name: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if dir_fd is not None and os.fsdecode(name) in REFUSED:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
        return real(name, flags, mode, dir_fd=dir_fd)

    return open_


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    write_config(root, "kb")
    kb = root / "kb"
    (kb / "locked").mkdir(parents=True)
    (kb / "locked" / "inner.md").write_text("# Inner\n\nwombat\n")
    (kb / "secret.md").write_text("# Secret\n\nwombat\n")
    (kb / "open.md").write_text("# Open\n\nwombat\n")
    return root


def test_refused_folders_and_files_are_counted(tmp_path: Path) -> None:
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    root = _project(tmp_path)
    flt = load_plan(Project.at(root)).path_filter()
    unread = Bucket()
    ops = FsOps()
    ops.open = _refusing(ops.open)
    got = dict(eligible_contents(str(root), flt, unread, ops))
    assert sorted(got) == ["kb/open.md"]
    assert unread.count == 2 and sorted(unread.sample) == ["kb/locked", "kb/secret.md"]
    note = unread_note(unread)
    assert note == 'could not read, so not searched: 2 ("kb/locked", "kb/secret.md")'


def test_vanished_entries_are_not_reported(tmp_path: Path) -> None:
    """A name that is gone by the time it is opened was simply not there."""
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    root = _project(tmp_path)
    flt = load_plan(Project.at(root)).path_filter()
    real = FsOps().open

    def vanishing(name: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if dir_fd is not None and os.fsdecode(name) in REFUSED:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
        return real(name, flags, mode, dir_fd=dir_fd)

    unread = Bucket()
    ops = FsOps()
    ops.open = vanishing
    assert sorted(dict(eligible_contents(str(root), flt, unread, ops))) == ["kb/open.md"]
    assert unread.count == 0 and unread_note(unread) is None


def test_direct_answer_names_what_it_could_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctindex.reconciler import walk

    def refusing_ops() -> FsOps:
        ops = FsOps()
        ops.open = _refusing(ops.open)
        return ops

    root = _project(tmp_path)
    # Not os.open itself: a wrapper is not in os.supports_dir_fd, which
    # would switch the walk to its path primitives.
    monkeypatch.setattr(walk, "FsOps", refusing_ops)
    result = cli_main("-C", str(root), "--json", "search", "--direct", "wombat")
    doc = json.loads(result.out)
    assert [r["path"] for r in doc["results"]] == ["kb/open.md"]
    assert doc["notes"] == ['could not read, so not searched: 2 ("kb/locked", "kb/secret.md")']
    text = cli_main("-C", str(root), "search", "--direct", "wombat")
    assert "could not read, so not searched: 2" in text.err
