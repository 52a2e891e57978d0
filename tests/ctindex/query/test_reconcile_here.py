"""A query's own pass (ctindex/query/reconcile_here.py): one walk when
nothing changed or when the change is taken in, a second only when another
writer published in between; a generation a share host vouched for read
again through the mount, never repaired; answers from the files labelled
as such."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.errors import ShareHostWrites
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.query import reconcile_here, statement
from ctindex.search.execute import PlanMismatch
from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import read_manifest
from tests.daemon_support import CliProject

Make = Callable[..., CliProject]
RESERVED = ("index.md", "log.md")


def published(p: CliProject) -> int:
    m = read_manifest(p.root / ".ct" / "okf")
    assert m is not None
    return m.generation


def _counting_walks(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Every reconciler pass this process makes (its `only`, None: full)."""
    import ctindex.reconciler as reconciler
    from ctindex.reconciler import diff

    walks: list[str | None] = []
    real = diff.reconcile

    def counted(*args: object, **kwargs: object) -> object:
        walks.append(None if kwargs.get("only") is None else "narrowed")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reconciler, "reconcile", counted)
    return walks


def _a_concept(p: CliProject) -> Path:
    return min(f for f in (p.root / "acme_retail").rglob("*.md") if f.name not in RESERVED)


def _pass(p: CliProject) -> statement.Proof:
    project = Project.at(p.root)
    return reconcile_here.reconcile(project, load_plan(project), statement.FALLBACK, "why")


def test_nothing_changed_walks_once_and_publishes_nothing(
    make_cli_project: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = make_cli_project(config={"watch": False})
    _pass(p)
    before = published(p)
    walks = _counting_walks(monkeypatch)
    proof = _pass(p)
    assert walks == [None] and published(p) == before
    assert (proof.fresh.mode, proof.fresh.reason, proof.fresh.generation) == (
        "fallback",
        "why",
        before,
    )
    assert proof.expect is not None and proof.expect.generation == before


def test_a_query_after_a_change_walks_once(
    make_cli_project: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock-free comparison found the change; the locked update builds
    on that walk (the generation it compared with is still published)
    instead of walking again: on a network share the walk is the cost."""
    p = make_cli_project(config={"watch": False})
    _pass(p)
    before = published(p)
    page = _a_concept(p)
    page.write_text(page.read_text() + "\nzqxwalkedonce\n")
    walks = _counting_walks(monkeypatch)
    proof = _pass(p)
    assert walks == [None]
    assert proof.fresh.generation == published(p) == before + 1
    doc = p.search("zqxwalkedonce")
    assert p.hits(doc) == [str(page.relative_to(p.root))]


def test_a_generation_published_meanwhile_makes_the_update_walk_again(
    make_cli_project: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer published between the comparison and the lock: that
    walk compared with a table that is no longer the base, so it is not used."""
    from ctindex.indexing import transaction

    p = make_cli_project(config={"watch": False})
    _pass(p)
    page = _a_concept(p)
    page.write_text(page.read_text() + "\nzqxmeanwhile\n")
    walks = _counting_walks(monkeypatch)
    real_update = transaction.update
    other = p.root / "acme_retail" / "zz_meanwhile.md"

    def another_writer_first(*args: object, **kwargs: object) -> transaction.UpdateReport:
        other.write_text("# Meanwhile\n\nzqxother\n")
        project = Project.at(p.root)
        real_update(project, load_plan(project))  # publishes before us
        return real_update(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(transaction, "update", another_writer_first)
    proof = _pass(p)
    assert walks == [None, None, None]  # ours, the other writer's, ours again
    assert proof.fresh.generation == published(p)
    assert p.hits(p.search("zqxmeanwhile")) == [str(page.relative_to(p.root))]
    assert p.hits(p.search("zqxother")) == ["acme_retail/zz_meanwhile.md"]


@pytest.mark.parametrize(
    "error", [PlanMismatch("other plan"), IndexCorrupt("torn"), OSError(5, "EIO")]
)
def test_a_share_hosts_generation_is_read_again_never_repaired(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    monkeypatch.setattr(reconcile_here, "MOUNT_REREAD_S", 0.0)
    tries: list[int] = []

    def failing(read: Callable[[object], int]) -> int:
        tries.append(1)
        raise error

    with pytest.raises(ShareHostWrites, match="the generation share host server vouched for"):
        reconcile_here.read_through_mount("server", lambda snap: 1, failing)
    assert len(tries) == reconcile_here.MOUNT_REREADS + 1

    def settles(read: Callable[[object], int]) -> int:
        tries.append(1)
        if len(tries) < reconcile_here.MOUNT_REREADS + 3:
            raise error
        return read(None)

    assert reconcile_here.read_through_mount("server", lambda snap: 7, settles) == 7


def test_an_answer_from_the_files_is_a_fallback_that_says_why() -> None:
    cause = OSError("the lock is held")
    fresh, value = reconcile_here.from_files(lambda plan: "answer", None, cause, "index busy")  # type: ignore[arg-type]
    assert value == "answer"
    assert (fresh.mode, fresh.reason, fresh.generation) == (
        statement.FALLBACK,
        "index busy: answered from the files",
        None,
    )
    assert fresh.notes == ["the lock is held"] and fresh.reconcile_ms is not None
