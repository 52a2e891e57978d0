"""ctindex/store/budget.py and the writer under a build budget: documents cut
into parts that fit it, merges that never build past it, and full segments
left alone by merges made to lower the segment count."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.indexing.analyse import build_input, reanalyze
from ctindex.providers import okf_markdown as okf
from ctindex.store import writer as writer_mod
from ctindex.store.budget import MIN_PART_DOCS, BuildBudget, estimate
from ctindex.store.generation import StoreManifest
from ctindex.store.writer import StoreWriter
from tests.ctindex.store.test_writer import _commit, _live_keys, make_doc
from tests.e2e.test_differential import dump


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 50_000), max_size=400),
    total=st.integers(1, 4 << 20),
    builders=st.integers(1, 4),
    max_docs=st.integers(0, 300),
)
def test_parts_keep_the_order_and_fit_the_share(
    sizes: list[int], total: int, builders: int, max_docs: int
) -> None:
    budget = BuildBudget(total, builders)
    sized = [(f"k{i:04d}", n) for i, n in enumerate(sizes)]
    parts = list(budget.parts(sized, max_docs=max_docs))
    assert [k for part in parts for k in part] == [k for k, _ in sized]
    size_of = dict(sized)
    for part in parts:
        assert part
        if max_docs:
            assert len(part) <= max_docs
        over = estimate(len(part), sum(size_of[k] for k in part)) > budget.per_build
        # Only a part kept at its minimum may pass the share.
        assert not over or len(part) <= MIN_PART_DOCS
    for part, after in itertools.pairwise(parts):
        # A cut is made only when it was needed.
        whole = part + after[:1]
        cost = estimate(len(whole), sum(size_of[k] for k in whole))
        assert cost > budget.per_build or len(part) == max_docs


def _writer(index: Path, base: StoreManifest | None, budget: BuildBudget) -> StoreWriter:
    return StoreWriter(index, base, fresh=False, reanalyze=reanalyze, sep=okf.SEP, budget=budget)


def _doc(i: int) -> okf.Document:
    return make_doc(f"d{i:03d}.md", f"document number {i} " + "word " * (i % 7))


def test_a_commit_past_the_budget_writes_several_segments_each_within_it(
    tmp_path: Path,
) -> None:
    small = BuildBudget(estimate(MIN_PART_DOCS, MIN_PART_DOCS * 400))
    one, many = tmp_path / "one", tmp_path / "many"
    published = []
    for index, budget in ((one, BuildBudget()), (many, small)):
        index.mkdir()
        w = _writer(index, None, budget)
        for i in range(300):
            w.add(build_input(_doc(i)))
        published.append(_commit(w))
        assert published[-1].documents == 300
    assert len(published[0].segments) == 1
    segments = published[1].segments
    assert len(segments) >= 300 * 400 // (MIN_PART_DOCS * 400) - 1
    for ref in segments:
        # Each build stopped before the document that would have passed the share.
        assert estimate(ref.ndocs - 1, 0) <= small.per_build
    assert dump(one) == dump(many)


def test_full_segments_are_not_merged_to_lower_the_count_and_tombstones_still_go(
    tmp_path: Path,
) -> None:
    index = tmp_path / "okf"
    index.mkdir()
    budget = BuildBudget(estimate(MIN_PART_DOCS, MIN_PART_DOCS * 400))
    w = _writer(index, None, budget)
    for i in range(2 * writer_mod.MAX_SEGMENTS * MIN_PART_DOCS):
        w.add(build_input(_doc(i)))
    base = _commit(w)
    full = [r.name for r in base.segments if budget.full(r.live, r.size)]
    assert len(full) > writer_mod.MAX_SEGMENTS
    for i in range(3):  # small additions: merged among themselves only
        w = _writer(index, base, budget)
        w.add(build_input(make_doc(f"z{i}.md", "a late one")))
        base = _commit(w)
        assert set(full) <= {r.name for r in base.segments}
        assert w.merged == 0
    # A full segment more than a fifth deleted is rewritten, in segments that fit.
    victim = base.segments[0]
    w = _writer(index, base, budget)
    keys = sorted(_live_keys(index))[: victim.ndocs // 2]
    for key in keys:
        w.remove(key)
    base = _commit(w)
    assert w.merged == 1 and victim.name not in {r.name for r in base.segments}
    assert all(r.deleted == 0 for r in base.segments)
    assert _live_keys(index) == {
        f"d{i:03d}.md" for i in range(2 * writer_mod.MAX_SEGMENTS * MIN_PART_DOCS)
    } - set(keys) | {f"z{i}.md" for i in range(3)}
