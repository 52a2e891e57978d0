"""The ranking loops' C twin (ctindex/search/_rank.c) against the pure
functions of ctindex/search/matcher.py, its specification: the same floats
bit for bit (hypothesis), and on a real index the same answers — results,
order, scores, snippets — with the C loops, with CTINDEX_PURE=1, and from
--direct (the oracle), tombstones and several segments included.

The kernel tests skip where the extension is not built (an install without
a compiler); CI builds it, so there they always run.
"""

from __future__ import annotations

import heapq
import importlib
import random
import struct
from array import array
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.base import native_modules
from ctindex.indexing.transaction import update
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.search import matcher
from ctindex.search.execute import Outcome, search_direct, search_snapshot
from ctindex.search.query import parse_query
from ctindex.store.snapshot import Snapshot, with_snapshot

SEP = 0xFFFF


def _native() -> ModuleType:
    try:
        return importlib.import_module("ctindex.search._rank")
    except ImportError:
        pytest.skip("the native ranking loops are not built here")


def _bits(scores: dict[int, float]) -> dict[int, bytes]:
    """Each float as its 8 bytes: equal only when bit for bit the same."""
    return {d: struct.pack("<d", v) for d, v in scores.items()}


NDOCS = 40
_docs = st.integers(0, NDOCS - 1)
_posting = st.dictionaries(_docs, st.integers(1, 0xFFFF), max_size=NDOCS)
_lengths = st.lists(st.integers(0, 5000), min_size=NDOCS, max_size=NDOCS)
_param = st.floats(0.01, 5.0, allow_nan=False, allow_infinity=False)
_filter = st.none() | st.sets(_docs)
_start = st.dictionaries(_docs, st.floats(0.0, 50.0, allow_nan=False), max_size=NDOCS)


@settings(max_examples=300, deadline=None)
@given(
    start=_start,
    posting=_posting,
    only=_filter,
    lens=_lengths,
    a=_param,
    bl=_param,
    wf=_param,
)
def test_field_scores_are_the_pure_floats(
    start: dict[int, float],
    posting: dict[int, int],
    only: set[int] | None,
    lens: list[int],
    a: float,
    bl: float,
    wf: float,
) -> None:
    pure, native = dict(start), dict(start)
    matcher._field_scores_py(pure, posting, only, array("I", lens), a, bl, wf, matcher.K1)
    _native().field_scores(native, posting, only, array("I", lens), a, bl, wf, matcher.K1)
    assert _bits(native) == _bits(pure)


@settings(max_examples=300, deadline=None)
@given(
    start=_start,
    main=_posting,
    only=_filter,
    fields=st.tuples(_posting, _posting, _posting),
    lengths=_lengths,
    flens=st.tuples(_lengths, _lengths, _lengths),
    a=_param,
    bl=_param,
    wf=_param,
)
def test_body_scores_are_the_pure_floats(
    start: dict[int, float],
    main: dict[int, int],
    only: set[int] | None,
    fields: tuple[dict[int, int], dict[int, int], dict[int, int]],
    lengths: list[int],
    flens: tuple[list[int], list[int], list[int]],
    a: float,
    bl: float,
    wf: float,
) -> None:
    arrays = (array("I", flens[0]), array("I", flens[1]), array("I", flens[2]))
    pure, native = dict(start), dict(start)
    args = (fields, array("I", lengths), arrays, (3, 2, 2), a, bl, wf, matcher.K1)
    matcher._body_scores_py(pure, main, only, *args)
    _native().body_scores(native, main, only, *args)
    assert _bits(native) == _bits(pure)


@settings(max_examples=200, deadline=None)
@given(base=_start, got=_start)
def test_sums_and_best_of_are_the_pure_floats(
    base: dict[int, float], got: dict[int, float]
) -> None:
    native = _native()
    scores = {**dict.fromkeys(got, 0.0), **base}
    pure_sum, native_sum = dict(scores), dict(scores)
    matcher._add_into_py(pure_sum, got)
    native.add_into(native_sum, got)
    assert _bits(native_sum) == _bits(pure_sum)
    pure_best, native_best = dict(base), dict(base)
    matcher._max_into_py(pure_best, got)
    native.max_into(native_best, got)
    assert _bits(native_best) == _bits(pure_best)


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(
        st.dictionaries(
            _docs,
            st.sampled_from([0.0, 1.0, 1.5, 2.5, 1e9 + 2.0])
            | st.floats(0.0, 100.0, allow_nan=False),
            max_size=NDOCS,
        ),
        min_size=1,
        max_size=3,
    ),
    k=st.integers(1, 3 * NDOCS),
)
def test_the_leaders_cut_is_the_pure_one(parts: list[dict[int, float]], k: int) -> None:
    native = _native()
    values = [v for p in parts for v in p.values()]
    if k > len(values):
        return
    bar = heapq.nlargest(k, values)[-1]
    assert struct.pack("<d", native.kth_largest(parts, k)) == struct.pack("<d", bar)
    for p in parts:
        assert native.at_least(p, bar) == [d for d, v in p.items() if v >= bar]


def test_add_into_refuses_an_unknown_document_as_the_pure_loop() -> None:
    with pytest.raises(KeyError):
        matcher._add_into_py({}, {3: 1.0})
    with pytest.raises(KeyError):
        _native().add_into({}, {3: 1.0})


@settings(max_examples=400, deadline=None)
@given(
    seq=st.lists(st.sampled_from([1, 2, 3, 4, 5, SEP]), max_size=80),
    ranks=st.lists(st.sampled_from([1, 2, 3, 4, 6]), max_size=4),
    wide=st.booleans(),
)
def test_min_span_is_the_pure_span(seq: list[int], ranks: list[int], wide: bool) -> None:
    sep = 0xFFFFFFFF if wide else SEP
    stream = array("I" if wide else "H", [sep if x == SEP else x for x in seq])
    assert _native().min_span(stream, ranks, sep) == matcher._min_span_py(stream, ranks, sep)


# -- the whole query, on a real index ------------------------------------------------------------

WORDS = [f"w{i}" for i in range(60)] + ["alpha", "beta", "gamma", "delta"]
QUERIES = [
    "w0",
    "w1 w2",
    "w0 w1 w2 w3 w4",
    "w3 -w5",
    '"w0 w1"',
    "w1*",
    "w* alpha",
    "w2 OR beta",
    "title:w0",
    "alpha beta gamma",
    "w59",
    "delta w0",
    "absentword",
]


def _page(rng: random.Random, i: int) -> str:
    pick = rng.choices(WORDS, weights=[1 / (r + 1) for r in range(len(WORDS))], k=60)
    title = " ".join(rng.sample(WORDS, 3))
    tags = ", ".join(rng.sample(WORDS, 2))
    return (
        f"---\ntitle: {title}\ntags: [{tags}]\ndescription: {' '.join(pick[:5])}\n---\n\n"
        f"# {title}\n\n" + " ".join(pick) + "\n" + ("filler text " * (i % 50)) + "\n"
    )


@pytest.fixture(scope="module")
def index_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three generations: the second and third change and delete pages, so
    the published index has several segments and tombstones."""
    root = tmp_path_factory.mktemp("rank") / "p"
    kb = root / "kb"
    kb.mkdir(parents=True)
    (kb / "index.md").write_text("# kb\n")
    (root / ".git").mkdir()
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    rng = random.Random(11)
    for i in range(400):
        (kb / f"d{i:03d}.md").write_text(_page(rng, i))
    project = Project.at(root)
    update(project, load_plan(project))
    for i in range(0, 400, 7):
        (kb / f"d{i:03d}.md").write_text(_page(rng, i + 1000))
    update(project, load_plan(project))
    for i in range(3, 400, 31):
        (kb / f"d{i:03d}.md").unlink()
    update(project, load_plan(project))
    return root


def _answers(root: Path) -> list[Outcome]:
    project = Project.at(root)

    def run(snap: Snapshot) -> list[Outcome]:
        return [search_snapshot(snap, parse_query(q), 15, want_keys=True) for q in QUERIES]

    return with_snapshot(project.index_dir, run)


def _shown(outcomes: list[Outcome]) -> list[tuple[int, list[str], tuple[str, ...], list[object]]]:
    """Everything an answer shows, each score as its 8 bytes."""
    return [
        (
            o.total,
            sorted(o.keys),
            o.notes,
            [(*r[:6], struct.pack("<d", r.score), *r[7:]) for r in o.results],
        )
        for o in outcomes
    ]


def _answers_with(
    root: Path, monkeypatch: pytest.MonkeyPatch, pure: bool
) -> list[tuple[int, list[str], tuple[str, ...], list[object]]]:
    if pure:
        monkeypatch.setenv("CTINDEX_PURE", "1")
    else:
        monkeypatch.delenv("CTINDEX_PURE", raising=False)
    native_modules.reset()
    try:
        return _shown(_answers(root))
    finally:
        monkeypatch.delenv("CTINDEX_PURE", raising=False)
        native_modules.reset()


def test_index_has_segments_and_tombstones(index_root: Path) -> None:
    def shape(snap: Snapshot) -> tuple[int, int]:
        return len(snap.views), sum(len(v.deleted) for v in snap.views)

    segments, tombstones = with_snapshot(Project.at(index_root).index_dir, shape)
    assert segments > 1 and tombstones > 0


def test_native_and_pure_answers_are_the_same(
    index_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _native()
    chose: list[bool] = []  # per query: the dense scores, or the dict loops in C
    of = matcher._Dense.of

    def recording(*args: object, **kwargs: object) -> object:
        got = of(*args, **kwargs)  # type: ignore[arg-type]
        chose.append(got is not None)
        return got

    monkeypatch.setattr(matcher._Dense, "of", recording)
    native = _answers_with(index_root, monkeypatch, pure=False)
    assert True in chose and False in chose  # both native paths ran
    assert native_modules.load("ctindex.search._rank") is not None
    pure = _answers_with(index_root, monkeypatch, pure=True)
    assert native == pure
    assert max(len(o[1]) for o in native) > 100  # frequent words: many matches scored


def test_index_answers_are_the_oracles(index_root: Path) -> None:
    project = Project.at(index_root)
    plan = load_plan(project)
    indexed = _answers(index_root)
    for q, got in zip(QUERIES, indexed, strict=True):
        want = search_direct(str(index_root), plan, parse_query(q), 15, want_keys=True)
        assert [(r.path, r.score, r.snippet) for r in got.results] == [
            (r.path, r.score, r.snippet) for r in want.results
        ], q
        assert (got.total, got.keys) == (want.total, want.keys), q
