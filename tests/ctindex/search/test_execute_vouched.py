"""ctindex/search/execute.py Vouched: the one check between a barrier's word
and the generation read (the plan-less fast path, the slow path's read and
the daemon's query path)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ctindex.search.execute import PlanMismatch, Vouched
from ctindex.store.generation import StoreManifest


def snap(digest: str, generation: int, identity: str, lineage: list[str]) -> SimpleNamespace:
    m = StoreManifest(generation=generation, plan_digest=digest, lineage=lineage)
    m.identity = identity
    return SimpleNamespace(manifest=m, generation=generation)


def test_the_vouched_generation_or_one_published_on_top_of_it() -> None:
    vouched = Vouched("plan-a", 5, "id5")
    assert vouched.matches(snap("plan-a", 5, "id5", ["id4"]))  # type: ignore[arg-type]
    # an outside `update` or `rebuild` since: its lineage names the vouched one
    assert vouched.matches(snap("plan-a", 7, "id7", ["id6", "id5"]))  # type: ignore[arg-type]
    assert not vouched.matches(snap("plan-b", 5, "id5", []))  # type: ignore[arg-type]


def test_a_restored_or_foreign_generation_does_not_match_whatever_its_number() -> None:
    vouched = Vouched("plan-a", 5, "id5")
    # an older MANIFEST restored from a copy
    assert not vouched.matches(snap("plan-a", 4, "id4", ["id3"]))  # type: ignore[arg-type]
    # another project's store, with a higher number, copied in
    assert not vouched.matches(snap("plan-a", 50, "x50", ["x49"]))  # type: ignore[arg-type]
    # the same number, other bytes
    assert not vouched.matches(snap("plan-a", 5, "other", ["id4"]))  # type: ignore[arg-type]
    # a daemon that could not name an identity vouches for nothing
    assert not Vouched("plan-a", 5, "").matches(snap("plan-a", 5, "", []))  # type: ignore[arg-type]


def test_check_raises_plan_mismatch() -> None:
    with pytest.raises(PlanMismatch, match="generation 4"):
        Vouched("plan-a", 5, "id5").check(snap("plan-a", 4, "id4", []))  # type: ignore[arg-type]
    Vouched("plan-a", 5, "id5").check(snap("plan-a", 5, "id5", []))  # type: ignore[arg-type]
