"""The daemon's pending add/change/remove counts (status.json `pending`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.daemon import sysinfo
from ctindex.daemon.layers import RealEngine
from ctindex.policy.project import Project
from ctindex.store import filetable
from tests.conftest import CliResult


def test_pending_counts_load_the_file_table_once_per_new_keys(
    make_project: Callable[..., Path],
    run_cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = make_project("acme_retail")
    assert run_cli("-C", str(root), "update").code == 0
    loads: list[int] = []
    real_load = filetable.load_file_table

    def counting_load(*args: Any, **kwargs: Any) -> Any:
        loads.append(1)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(filetable, "load_file_table", counting_load)
    bundle = "okf/bundles/acme_retail"
    (root / bundle / "tables" / "new.md").write_text("# new\n")
    keys = [f"{bundle}/tables/orders.md", f"{bundle}/tables/new.md", f"{bundle}/gone.md"]
    engine = RealEngine(Project.discover(root))

    def counts(asked: list[str]) -> dict[str, int]:
        return sysinfo.classify(asked, root, engine.indexed_among(asked))

    for _ in range(3):  # heartbeats with an unchanged dirty set
        assert counts(keys) == {"add": 1, "change": 1, "remove": 1}
    assert len(loads) == 1
    assert counts(keys[:1]) == {"add": 0, "change": 1, "remove": 0}
    assert len(loads) == 1  # a shrinking dirty set asks nothing new
    assert counts(keys) == {"add": 1, "change": 1, "remove": 1}
    assert len(loads) == 2  # keys forgotten once no longer dirty are looked up again
    assert run_cli("-C", str(root), "update").code == 0  # a new generation
    loads.clear()  # the update's own loads
    assert counts(keys) == {"add": 0, "change": 2, "remove": 1}
    assert len(loads) == 1
