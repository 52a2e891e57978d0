"""The bounded-work parts of the matcher give the answers of the plain ones:
the leaders of a ranking, proximity on a long stream, postings looked up by
binary search beside tombstones (ctindex/search/matcher.py,
ctindex/search/index_partition.py)."""

from __future__ import annotations

import heapq
import random
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.indexing.transaction import update
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.search import matcher
from ctindex.search.index_partition import SegmentPartition
from ctindex.store.snapshot import Snapshot, with_snapshot

SEP = 0xFFFF


def _full_key(
    scores: list[dict[int, float]], tiers: list[dict[int, int]], i: int, d: int
) -> tuple[int, float, str, int, int]:
    return (-tiers[i].get(d, 0), -round(scores[i][d], 4), f"k{d:05d}", i, d)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.dictionaries(
            st.integers(0, 300),
            st.tuples(st.sampled_from([0.0, 1.0, 1.00004, 2.5, 2.50001, 7.25]), st.integers(0, 2)),
            max_size=60,
        ),
        min_size=1,
        max_size=3,
    ),
    limit=st.integers(1, 12),
)
def test_leaders_hold_the_first_limit_matches(
    parts: list[dict[int, tuple[float, int]]], limit: int
) -> None:
    scores = [{d: s for d, (s, _) in p.items()} for p in parts]
    tiers = [{d: t for d, (_, t) in p.items() if t} for p in parts]
    every = [(i, d) for i, sc in enumerate(scores) for d in sc]
    want = heapq.nsmallest(limit, (_full_key(scores, tiers, i, d) for i, d in every))
    chosen = matcher.leaders(scores, tiers, limit, margin=1e-4)
    got = heapq.nsmallest(
        limit, (_full_key(scores, tiers, i, d) for i, docs in enumerate(chosen) for d in docs)
    )
    assert got == want


def _pair_span(seq: list[int]) -> int | None:
    """Shortest run holding both 1 and 2 (no separators in these streams)."""
    ones = [i for i, x in enumerate(seq) if x == 1]
    twos = [i for i, x in enumerate(seq) if x == 2]
    if not ones or not twos:
        return None
    return min(abs(a - b) + 1 for a in ones for b in twos)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    length=st.integers(matcher.PROXIMITY_LONG + 1, 6000),
    where=st.lists(st.integers(0, 5999), min_size=1, max_size=4),
    gap=st.integers(0, matcher.PROXIMITY_REACH - 2),
)
def test_long_stream_span_within_reach_is_exact(
    seed: int, length: int, where: list[int], gap: int
) -> None:
    # A rare anchor (1) placed a few times, the other word (2) `gap` tokens
    # after one of them, maybe more 2s elsewhere: the narrowed stream finds
    # the same shortest run as the whole one.
    rng = random.Random(seed)
    seq = [
        rng.choice((2, *range(10, 40))) if rng.random() < 0.01 else rng.randrange(10, 40)
        for _ in range(length)
    ]
    for at in where:
        seq[at % length] = 1
    first = min(w % length for w in where)
    if first + gap + 1 < length:
        seq[first + gap + 1] = 2
    want = _pair_span(seq)
    got = matcher.min_span(array("H", seq), [1, 2], SEP)
    if want is not None and want <= matcher.PROXIMITY_REACH:
        assert got == want
    if want is None:
        assert got is None
    if got is not None:  # never a run shorter than the stream holds
        assert want is not None and got >= want


def test_min_span_long_stream_without_anchor() -> None:
    seq = array("H", [7] * (matcher.PROXIMITY_LONG + 10) + [2])
    assert matcher.min_span(seq, [1, 2], SEP) is None


def test_tf_in_and_df_match_tf_beside_tombstones(tmp_path: Path) -> None:
    root = tmp_path / "p"
    kb = root / "kb"
    kb.mkdir(parents=True)
    (root / ".git").mkdir()
    (kb / "index.md").write_text("# kb\n")
    for i in range(120):
        (kb / f"d{i:03d}.md").write_text(
            f"# Page {i}\n\ncommon words here {'rareword' if i % 40 == 0 else 'plain'} w{i % 7}\n"
        )
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    project = Project.at(root)
    update(project, load_plan(project))
    for i in (3, 40, 77):  # tombstones in the first segment
        (kb / f"d{i:03d}.md").write_text(f"# Changed {i}\n\nother text\n")
    update(project, load_plan(project))

    def check(snap: Snapshot) -> None:
        for view in snap.views:
            part = SegmentPartition(view)
            fresh = SegmentPartition(view)
            for term in ("common", "rareword", "w3", "plain", "absent", "other"):
                full = SegmentPartition(view).tf(term)
                assert fresh.df(term) == len(full), term
                for want in (set(range(0, 120, 9)), set(full), {1}, set()):
                    live = want & part.universe()
                    assert part.tf_in(term, live) == {d: full[d] for d in live if d in full}

    with_snapshot(project.index_dir, check)


@settings(max_examples=200, deadline=None)
@given(found=st.sets(st.text(alphabet="abcé", min_size=1, max_size=6), max_size=300))
def test_the_closest_expansions_are_the_first_by_length_then_term(found: set[str]) -> None:
    """The bounded ordering keeps what ordering every expansion would."""
    want = sorted(found, key=lambda t: (len(t), t))[: matcher.PREFIX_CAP]
    assert matcher._closest(found) == want


def test_a_one_shot_query_decodes_only_the_keys_of_its_results(
    bundles_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh snapshot's query names its results by the keys it decodes
    one at a time (`Segment.key_view`), not by decoding every key of every
    segment (`Segment.keys`); the answer is the same."""
    from ctindex.search.execute import search_index
    from ctindex.search.query import parse_query
    from ctindex.store.segment_read import Segment

    proj = Project.at(bundles_project)
    update(proj, load_plan(proj))
    queries = ["bigquery", "events OR sessions", "table*", "type:Table"]
    want = [search_index(proj.index_dir, parse_query(q), 5, want_keys=True) for q in queries]

    def every_key(self: Segment) -> list[str]:
        raise AssertionError("a query decoded every key of a segment")

    monkeypatch.setattr(Segment, "keys", every_key)
    got = [search_index(proj.index_dir, parse_query(q), 5, want_keys=True) for q in queries]
    assert got == want and all(o.results for o in got)


def test_recorded_field_sums_rank_as_summed_lengths_do(bundles_project: Path) -> None:
    """The per-field length sums a manifest records (SegmentRef.field_sums)
    give every query the scores that summing the lengths gives, with
    tombstones and without; without tombstones nothing is summed."""
    from ctindex.search.execute import search_snapshot
    from ctindex.search.query import parse_query
    from ctindex.store.segment_read import Segment

    proj = Project.at(bundles_project)
    update(proj, load_plan(proj))
    queries = [parse_query(q) for q in ("bigquery", "events OR sessions", "user id", "table*")]

    def both() -> tuple[list[object], list[object]]:
        def work(snap: Snapshot) -> tuple[list[object], list[object]]:
            assert all(v.ref.field_sums is not None for v in snap.views)
            recorded = [search_snapshot(snap, q, 10) for q in queries]
            for v in snap.views:
                v.ref.field_sums = None  # as a manifest written before them
            summed = [search_snapshot(snap, q, 10) for q in queries]
            return recorded, summed

        return with_snapshot(proj.index_dir, work)

    recorded, summed = both()
    assert recorded == summed
    # Without tombstones the recorded sums are the answer: no length is summed.
    from ctindex.search.index_partition import _field_length_sums

    class NoLengths(Segment):
        def __init__(self) -> None:  # never opened: only asked for its lengths
            pass

        def field_lengths(self) -> list[array[int]]:
            raise AssertionError("field lengths summed without tombstones")

    assert _field_length_sums(NoLengths(), (), [1, 2, 3, 4]) == [1, 2, 3, 4]
    # A tombstone: the recorded sums less the removed document's lengths.
    gone = next(p for p in sorted(bundles_project.rglob("*.md")) if "tables" in p.parts)
    gone.unlink()
    update(proj, load_plan(proj))
    recorded, summed = both()
    assert recorded == summed
