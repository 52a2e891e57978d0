"""ctindex/search/execute.py Vouched: the one check between a barrier's word
and the generation read (the plan-less fast path and the daemon's query path)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ctindex.search.execute import PlanMismatch, Vouched


def snap(digest: str, generation: int) -> SimpleNamespace:
    return SimpleNamespace(manifest=SimpleNamespace(plan_digest=digest), generation=generation)


def test_the_vouched_generation_or_a_newer_one_of_the_same_plan() -> None:
    vouched = Vouched("plan-a", 5)
    assert vouched.matches(snap("plan-a", 5))  # type: ignore[arg-type]
    assert vouched.matches(snap("plan-a", 6))  # type: ignore[arg-type]  (an outside rebuild)
    assert not vouched.matches(snap("plan-a", 4))  # type: ignore[arg-type]
    assert not vouched.matches(snap("plan-b", 9))  # type: ignore[arg-type]


def test_check_raises_plan_mismatch() -> None:
    with pytest.raises(PlanMismatch, match="generation 4"):
        Vouched("plan-a", 5).check(snap("plan-a", 4))  # type: ignore[arg-type]
    Vouched("plan-a", 5).check(snap("plan-a", 5))  # type: ignore[arg-type]
