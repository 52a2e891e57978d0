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
import itertools
import random
import shutil
import struct
import tempfile
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
from ctindex.search import matcher, native_rank
from ctindex.search.execute import Outcome, search_direct, search_snapshot
from ctindex.search.query import parse_query
from ctindex.store.segment import to_le
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
@pytest.mark.slow
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


def _arrays(posting: dict[int, int]) -> tuple[array[int], array[int]]:
    """A posting as a segment hands it: ids in order, and their counts."""
    ids = sorted(posting)
    return array("H", ids), array("H", [posting[d] for d in ids])


@settings(max_examples=400, deadline=None)
@given(
    start=_start,
    docs=st.sets(_docs, max_size=NDOCS),
    main=_posting,
    fields=st.tuples(_posting, _posting, _posting, _posting),
    absent=st.sets(st.integers(0, 3)),
    lengths=_lengths,
    flens=st.tuples(_lengths, _lengths, _lengths, _lengths),
    params=st.lists(st.tuples(_param, _param, _param), min_size=5, max_size=5),
    add=st.booleans(),
)
@pytest.mark.slow
def test_sparse_scores_are_the_dict_loops_floats(
    start: dict[int, float],
    docs: set[int],
    main: dict[int, int],
    fields: tuple[dict[int, int], ...],
    absent: set[int],
    lengths: list[int],
    flens: tuple[list[int], ...],
    params: list[tuple[float, float, float]],
    add: bool,
) -> None:
    """score_docs for some documents (a frequent word's long posting met by
    a few of them is looked up by binary search, a short one merged) against
    the dict loops: the four fields, then the body, into a term's dict, then
    summed into the scores (`_add_into_py`) or kept where higher (a prefix's
    best expansion, `_max_into_py`)."""
    fields = tuple({} if f in absent else p for f, p in enumerate(fields))
    flen_arrays = tuple(array("I", x) for x in flens)
    weights = (3, 2, 2)
    got: dict[int, float] = {}
    for f in range(4):
        matcher._field_scores_py(got, fields[f], docs, flen_arrays[f], *params[f], matcher.K1)
    matcher._body_scores_py(
        got, main, docs, fields[:3], array("I", lengths), flen_arrays[:3], weights,
        *params[4], matcher.K1,
    )  # fmt: skip
    pure = {**dict.fromkeys(docs, 0.0), **start} if add else dict(start)
    (matcher._add_into_py if add else matcher._max_into_py)(pure, got)
    native = {**dict.fromkeys(docs, 0.0), **start} if add else dict(start)
    _native().score_docs(
        native,
        docs,
        _arrays(main),
        tuple(None if f in absent else _arrays(p) for f, p in enumerate(fields)),
        array("I", lengths),
        flen_arrays,
        tuple(params[:4]),
        params[4],
        weights,
        matcher.K1,
        add,
    )
    assert _bits(native) == _bits(pure)


def test_sparse_scores_refuse_bad_input() -> None:
    native = _native()
    lens = array("I", [1, 1])
    flens = (lens, lens, lens, lens)
    fparams = ((1.0, 1.0, 1.0),) * 4
    posting = (array("I", [0]), array("H", [2]))
    args = (posting, (None,) * 4, lens, flens, fparams, (1.0, 1.0, 1.0), (3, 2, 2), 1.2, True)
    with pytest.raises(TypeError, match="set"):
        native.score_docs({}, [0], *args)
    with pytest.raises(IndexError):
        native.score_docs({}, {5}, *args)
    with pytest.raises(TypeError):
        native.score_docs({}, {"d"}, *args)
    with pytest.raises(ValueError, match="differ"):
        native.score_docs({}, {0}, (array("I", [0, 1]), array("H", [2])), *args[1:])
    scores = {0: 0.5}
    native.score_docs(scores, {0}, *args)
    assert scores[0] > 0.5


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


def _dense(scores: dict[int, float]) -> matcher.DenseScores:
    """`scores` as the dense path keeps them: one float per document, a mask."""
    acc = array("d", [0.5] * NDOCS)  # not a match's: must never be read as one
    mask = bytearray(NDOCS)
    for d, v in scores.items():
        acc[d], mask[d] = v, 1
    return matcher.DenseScores(acc, mask if scores else None, set(scores))


_scores = st.dictionaries(
    _docs,
    st.sampled_from([0.0, 1.0, 1.5, 2.5]) | st.floats(0.0, 100.0, allow_nan=False),
    max_size=NDOCS,
)


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(st.tuples(_scores, st.booleans()), min_size=1, max_size=3),
    tiers=st.lists(st.dictionaries(_docs, st.integers(1, 2), max_size=4), min_size=3, max_size=3),
    count=st.integers(1, 3 * NDOCS),
    margin=st.sampled_from([0.0, 1e-4]),
)
def test_dense_scores_lead_as_dicts(
    parts: list[tuple[dict[int, float], bool]],
    tiers: list[dict[int, int]],
    count: int,
    margin: float,
) -> None:
    """The leaders of partitions kept as arrays (some of them, any of them)
    are those of the same scores as dicts, with the C cut and the pure one."""
    _native()
    # A tier per partition, of its matches only (extra tiers drawn are dropped).
    tiers = [
        {d: t for d, t in tier.items() if d in sc}
        for tier, (sc, _) in zip(tiers[: len(parts)], parts, strict=True)
    ]
    as_dicts = [dict(sc) for sc, _ in parts]
    mixed = [_dense(sc) if dense else dict(sc) for sc, dense in parts]
    want = [sorted(x) for x in matcher.leaders(as_dicts, tiers, count, margin)]
    assert [sorted(x) for x in matcher.leaders(mixed, tiers, count, margin)] == want
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native_rank, "module", lambda: None)
        assert [sorted(x) for x in matcher.leaders(mixed, tiers, count, margin)] == want
        assert [sorted(x) for x in matcher.leaders(as_dicts, tiers, count, margin)] == want


def test_dense_scores_are_a_mapping_of_the_matches_only() -> None:
    sc = _dense({3: 2.0, 7: 1.0})
    assert len(sc) == 2 and sorted(sc) == [3, 7] and 3 in sc and 4 not in sc
    assert sc[3] == 2.0 and sc.get(4) is None
    sc[7] += 0.25
    assert dict(sc.items()) == {3: 2.0, 7: 1.25}
    with pytest.raises(KeyError):
        sc[4]
    with pytest.raises(KeyError):
        sc[4] = 1.0
    with pytest.raises(TypeError):
        del sc[3]
    assert sc.kernel_scores({}) == (sc.acc, sc.mask)
    acc, _mask = sc.kernel_scores({3: 1})
    assert acc[3] == 2.0 + 1e9 and sc.acc[3] == 2.0  # tiers go to a copy
    assert _dense({}).kernel_scores({}) == {}


def test_kernels_refuse_scores_of_another_shape() -> None:
    native = _native()
    for bad in ([{0: 1.0}, (array("d", [1.0]),)], [(array("d", [1.0]), bytearray(2))], [[1.0]]):
        with pytest.raises(TypeError):
            native.kth_largest(bad, 1)
    with pytest.raises(TypeError):
        native.at_least((array("I", [1]), bytearray(1)), 0.0)
    with pytest.raises(ValueError, match="NaN"):
        native.kth_largest([(array("d", [float("nan")]), bytearray(b"\x01"))], 1)


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
    assert _native().min_span(stream, ranks, sep) == native_rank.min_span_py(stream, ranks, sep)


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
    chose: list[bool] = []  # per query: the dense scores, or the sparse ones
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


# -- every ranking path against the others, on small random indexes ----------------------------
#
# The dense scores (`_Dense`, `score_term` in C) run when a query matches a
# large enough share of the documents (DENSE_SHARE); the sparse ones
# (`_Sparse`, `score_docs` in C) otherwise; the dict loops with CTINDEX_PURE=1,
# and in C for --direct, which reads the files. All must give the same
# results and the same floats. Concept-ID terms
# (`\x01i...`) are outside a term's main posting, so a document matched by
# one clause of an OR and holding the other word only in its ID is where
# they once parted.

# DENSE_SHARE 0: the dense scores never apply; 10**9: whenever anything matches.
_MODES = (("native", None), ("native-sparse", 0), ("native-dense", 10**9), ("pure", None))


def _project(root: Path) -> Project:
    (root / ".git").mkdir(parents=True, exist_ok=True)
    (root / ".ct").mkdir(exist_ok=True)
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    return Project.at(root)


def _every_path(root: Path, queries: list[str]) -> dict[str, list[list[tuple[str, bytes]]]]:
    """Per ranking path, per query: the results as (path, score bytes)."""
    project = Project.at(root)

    def shown(outcome: Outcome) -> list[tuple[str, bytes]]:
        return [(r.path, struct.pack("<d", r.score)) for r in outcome.results]

    out: dict[str, list[list[tuple[str, bytes]]]] = {}
    for name, share in _MODES:
        with pytest.MonkeyPatch.context() as mp:
            if name == "pure":
                mp.setenv("CTINDEX_PURE", "1")
            else:
                mp.delenv("CTINDEX_PURE", raising=False)
            if share is not None:
                mp.setattr(matcher, "DENSE_SHARE", share)
            native_modules.reset()
            try:
                out[name] = with_snapshot(
                    project.index_dir,
                    lambda snap: [
                        shown(search_snapshot(snap, parse_query(q), 50)) for q in queries
                    ],
                )
            finally:
                native_modules.reset()
        native_modules.reset()
    plan = load_plan(project)
    out["direct"] = [shown(search_direct(str(root), plan, parse_query(q), 50)) for q in queries]
    return out


def _assert_all_paths_agree(
    root: Path, queries: list[str]
) -> dict[str, list[list[tuple[str, bytes]]]]:
    got = _every_path(root, queries)
    for name, answers in got.items():
        for q, answer, want in zip(queries, answers, got["pure"], strict=True):
            assert answer == want, (name, q)
    return got


def test_an_id_share_survives_a_segment_without_the_main_posting(tmp_path: Path) -> None:
    """The reviewer's case: `zzqx` only in a concept ID, the document matched
    through `margin`; every path gives it its ID share."""
    _native()
    root = tmp_path / "sample"
    shutil.copytree(
        Path(__file__).parents[3] / "fixtures" / "sample",
        root,
        # not its own index, which a run of the README's example may have left
        # there (with a daemon's socket, which cannot be copied)
        ignore=lambda folder, _names: ["okf"] if Path(folder).name == ".ct" else [],
    )
    metrics = root / "okf" / "bundles" / "acme_retail" / "metrics"
    (metrics / "zzqx.md").write_text(
        "---\ntitle: Quarterly figure\n---\n\n# Quarterly figure\n\nThe margin of the quarter.\n"
    )
    project = _project(root)
    update(project, load_plan(project))
    got = _assert_all_paths_agree(root, ["zzqx OR margin", "margin", "zzqx"])
    zzqx = [s for p, s in got["native"][0] if p.endswith("metrics/zzqx.md")]
    alone = [s for p, s in got["native"][1] if p.endswith("metrics/zzqx.md")]
    assert len(zzqx) == 1 and len(alone) == 1
    # The ID share counts: the OR scores it above `margin` alone.
    assert struct.unpack("<d", zzqx[0])[0] > struct.unpack("<d", alone[0])[0]


_VOCAB = ["ab", "abc", "abd", "bx", "by", "cz", "kq"]
_words = st.lists(st.sampled_from(_VOCAB), min_size=0, max_size=6)
_doc = st.tuples(
    st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=2, unique=True),  # file name (the ID)
    _words,  # title
    _words,  # tags
    _words,  # body
)
_query = st.one_of(
    st.sampled_from(_VOCAB),
    st.tuples(st.sampled_from(_VOCAB), st.sampled_from(_VOCAB)).map(" OR ".join),
    st.tuples(st.sampled_from(_VOCAB), st.sampled_from(_VOCAB)).map(" ".join),
    st.sampled_from(["a*", "ab*", "b*"]),
    st.tuples(st.sampled_from(["a*", "b*"]), st.sampled_from(_VOCAB)).map(" OR ".join),
)


def _write_doc(kb: Path, i: int, doc: tuple[list[str], list[str], list[str], list[str]]) -> None:
    name, title, tags, body = doc
    front = f"---\ntitle: {' '.join(title) or 'x'}\ntags: [{', '.join(tags)}]\n---\n\n"
    (kb / f"{'-'.join(name)}-{i}.md").write_text(front + " ".join(body) + "\n")


@settings(max_examples=25, deadline=None)
@given(
    first=st.lists(_doc, min_size=1, max_size=8),
    second=st.lists(_doc, min_size=0, max_size=4),
    deleted=st.sets(st.integers(0, 7), max_size=3),
    queries=st.lists(_query, min_size=1, max_size=4),
)
def test_every_ranking_path_gives_the_same_floats(
    first: list[tuple[list[str], list[str], list[str], list[str]]],
    second: list[tuple[list[str], list[str], list[str], list[str]]],
    deleted: set[int],
    queries: list[str],
) -> None:
    _native()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        kb = root / "kb"
        kb.mkdir(parents=True)
        (kb / "index.md").write_text("# kb\n")
        project = _project(root)
        for i, doc in enumerate(first):
            _write_doc(kb, i, doc)
        update(project, load_plan(project))
        # A second generation: new and rewritten pages, deletions (tombstones).
        for i, doc in enumerate(second):
            _write_doc(kb, 100 + i, doc)
        for i, doc in enumerate(first):
            if i in deleted:
                (kb / f"{'-'.join(doc[0])}-{i}.md").unlink()
        update(project, load_plan(project))
        _assert_all_paths_agree(root, queries)


# -- the C loops' error paths: one clear exception, no call with an error set --------------------


class _Grower:
    """A score whose conversion to float adds an entry to another dict."""

    def __init__(self, grows: dict[int, float]) -> None:
        self.grows = grows

    def __float__(self) -> float:
        self.grows[len(self.grows) + 100] = 1.0
        return 1.0


def test_the_leaders_cut_refuses_dicts_that_grow_under_it() -> None:
    later: dict[int, float] = {}
    with pytest.raises(RuntimeError, match="changed size"):
        _native().kth_largest([{0: _Grower(later)}, later], 1)


def test_bad_postings_raise_one_type_error() -> None:
    native = _native()
    lens = array("I", [1, 1])
    with pytest.raises(TypeError):
        native.field_scores({}, {"d": "t"}, None, lens, 1.0, 1.0, 1.0, matcher.K1)
    with pytest.raises(TypeError):
        native.field_scores({}, {0: "t"}, None, lens, 1.0, 1.0, 1.0, matcher.K1)
    flens = (lens, lens, lens)
    for main, fields in (
        ({"d": "t"}, ({}, {}, {})),
        ({0: 5}, ({0: "a"}, {0: "b"}, {0: "c"})),
    ):
        with pytest.raises(TypeError):
            native.body_scores({}, main, None, fields, lens, flens, (3, 2, 2), 1.0, 1.0, 1.0, 1.2)
    with pytest.raises(TypeError):
        native.add_into({0: "s"}, {0: "v"})
    with pytest.raises(TypeError):
        native.max_into({0: "b"}, {0: "v"})


# Phrase scans (native_rank.phrase_scan_py and _rank.phrase_scan) over one
# stretch of token streams. Items are drawn so that their bytes collide:
# 0x0102 and 0x0201 (u16), or their u32 kin, make byte matches that straddle
# an item boundary, which must not count.
_NARROW_ITEMS = [0, 1, 2, 0x0100, 0x0201, 0x0102, 0x0002]
_WIDE_ITEMS = [0, 1, 2, 0x01000000, 0x00020100, 0x00000201, 0x02000000]


@st.composite
def _stretches(draw: st.DrawFn) -> tuple[list[list[int]], int, int, list[int], list[int], str]:
    """Streams, a stretch [first, last) of them, wanted ids inside it and a
    phrase. Streams before and after the stretch make its start nonzero and
    give a hit a place to spill into."""
    code = draw(st.sampled_from(["H", "I"]))
    items = st.sampled_from(_NARROW_ITEMS if code == "H" else _WIDE_ITEMS)
    streams = draw(st.lists(st.lists(items, max_size=12), min_size=1, max_size=12))
    first = draw(st.integers(0, len(streams) - 1))
    last = draw(st.integers(first + 1, len(streams)))
    wanted = sorted(draw(st.sets(st.integers(first, last - 1), min_size=1)))
    phrase = draw(st.lists(items, min_size=1, max_size=3))
    return streams, first, last, wanted, phrase, code


def _holds(stream: list[int], phrase: list[int]) -> bool:
    k = len(phrase)
    return any(stream[i : i + k] == phrase for i in range(len(stream) - k + 1))


@settings(max_examples=600, deadline=None)
@given(case=_stretches())
@pytest.mark.slow
def test_phrase_scan_is_the_pure_scan_and_the_oracle(
    case: tuple[list[list[int]], int, int, list[int], list[int], str],
) -> None:
    streams, first, last, wanted, phrase, code = case
    section = b"".join(array(code, s).tobytes() for s in streams)
    size = array(code).itemsize
    offs = array("Q", [0])
    for s in streams:
        offs.append(offs[-1] + size * len(s))
    start = offs[first]
    run = section[start : offs[last]]
    pattern = array(code, phrase).tobytes()
    oracle = [d for d in wanted if _holds(streams[d], phrase)]
    assert native_rank.phrase_scan_py(run, offs, start, wanted, pattern, size) == oracle
    # The whole section as the run: a hit may now spill into a stream after it.
    assert native_rank.phrase_scan_py(section, offs, 0, wanted, pattern, size) == oracle
    native = _native()
    assert native.phrase_scan(run, offs, start, wanted, pattern, size) == oracle
    assert native.phrase_scan(section, offs, 0, wanted, pattern, size) == oracle


def test_phrase_scans_refuse_bad_input_alike() -> None:
    offs = array("Q", [0, 4, 8])
    run = array("H", [1, 2, 1, 2]).tobytes()
    pattern = array("H", [1, 2]).tobytes()
    for scan in (native_rank.phrase_scan_py, _native().phrase_scan):
        assert scan(run, offs, 0, [0, 1], pattern, 2) == [0, 1]
        for args in (
            (run, offs, 0, [], pattern, 2),  # no wanted document
            (run, offs, 0, [0], b"", 2),  # an empty pattern
            (run, offs, 0, [0], pattern, 0),  # no item size
            (run[:6], offs, 0, [1], pattern, 2),  # a stream past the run's end
            (run[4:], offs, 4, [0], pattern, 2),  # a stream before the run
        ):
            with pytest.raises(ValueError, match="phrase_scan"):
                scan(*args)
    with pytest.raises(TypeError):
        _native().phrase_scan(run, array("I", [0, 4, 8]), 0, [0], pattern, 2)


# Span scans (native_rank.span_scan_py and _rank.span_scan): each wanted
# stream's shortest run holding every rank inside one field, read in place
# from a stretch of little-endian streams, against a brute-force oracle.
@st.composite
def _span_cases(
    draw: st.DrawFn,
) -> tuple[list[list[int]], int, int, list[int], list[int], int, str]:
    code = draw(st.sampled_from(["H", "I"]))
    sep = 0xFFFF if code == "H" else 0xFFFFFFFF
    big = 0x0102 if code == "H" else 0x01000002  # bytes that collide with 1 and 2
    items = st.sampled_from([1, 2, 3, 4, big, sep])
    streams = draw(st.lists(st.lists(items, max_size=14), min_size=1, max_size=10))
    first = draw(st.integers(0, len(streams) - 1))
    last = draw(st.integers(first + 1, len(streams)))
    docs = sorted(draw(st.sets(st.integers(first, last - 1), min_size=1)))
    ranks = draw(st.lists(st.sampled_from([1, 2, 3, 5, big]), unique=True, max_size=3))
    return streams, first, last, docs, ranks, sep, code


def _shortest_run(stream: list[int], ranks: list[int], sep: int) -> int | None:
    """The oracle: every window tried, shortest first."""
    n = len(stream)
    for width in range(len(ranks), n + 1):
        for i in range(n - width + 1):
            window = stream[i : i + width]
            if sep not in window and all(r in window for r in ranks):
                return width
    return None


@settings(max_examples=600, deadline=None)
@given(case=_span_cases(), cuts=st.sets(st.integers(1, 9), max_size=4))
@pytest.mark.slow
def test_span_scan_is_the_pure_scan_and_the_oracle(
    case: tuple[list[list[int]], int, int, list[int], list[int], int, str],
    cuts: set[int],
) -> None:
    streams, first, last, docs, ranks, sep, code = case
    section = b"".join(to_le(array(code, s)) for s in streams)
    size = array(code).itemsize
    offs = array("Q", [0])
    for s in streams:
        offs.append(offs[-1] + size * len(s))
    start = offs[first]
    # The wanted streams as one run, as the whole section, and as several
    # runs cut between streams (as a segment's runs of SEQ_BLOCK_DOCS are).
    bounds = [first, *sorted(c for c in cuts if first < c < last), last]
    pieces = [section[offs[a] : offs[b]] for a, b in itertools.pairwise(bounds)]
    froms = [offs[a] for a in bounds[:-1]]
    # No rank to hold: no span (nothing is a run of every one of none).
    oracle = [_shortest_run(streams[d], ranks, sep) if ranks else None for d in docs]
    native = _native()
    for scan in (native_rank.span_scan_py, native.span_scan):
        assert scan([section[start : offs[last]]], [start], offs, docs, ranks, sep, size) == oracle
        assert scan([section], [0], offs, docs, ranks, sep, size) == oracle
        assert scan(pieces, froms, offs, docs, ranks, sep, size) == oracle


def test_span_scans_refuse_bad_input_alike() -> None:
    offs = array("Q", [0, 4, 8])
    run = to_le(array("H", [1, 2, 2, 1]))
    for scan in (native_rank.span_scan_py, _native().span_scan):
        assert scan([run], [0], offs, [0, 1], [1, 2], SEP, 2) == [2, 2]
        assert scan([run[:4], run[4:]], [0, 4], offs, [0, 1], [1, 2], SEP, 2) == [2, 2]
        for args in (
            ([run], [0], offs, [0], [1], SEP, 3),  # no such item size
            ([run[:6]], [0], offs, [1], [1], SEP, 2),  # a stream past the run's end
            ([run[4:]], [4], offs, [0], [1], SEP, 2),  # a stream before the run
            ([run[:4], run[4:]], [0, 4], offs, [1, 0], [1], SEP, 2),  # ids out of order
            ([run], [0, 4], offs, [0], [1], SEP, 2),  # a start too many
            ([run], [0], offs, [2], [1], SEP, 2),  # no such document
        ):
            with pytest.raises(ValueError, match="span_scan"):
                scan(*args)
    with pytest.raises(TypeError):
        _native().span_scan([run], [0], array("I", [0, 4, 8]), [0], [1], SEP, 2)


@settings(max_examples=300, deadline=None)
@given(
    seq=st.lists(st.sampled_from([1, 2, 3, 258, 65536 + 2]), max_size=300),
    anchor=st.sampled_from([2, 3, 258, 65536 + 2]),
    limit=st.integers(0, 70),
    wide=st.booleans(),
)
def test_anchor_positions_are_the_pure_ones(
    seq: list[int], anchor: int, limit: int, wide: bool
) -> None:
    """The same positions, found in place; in a u16 stream a rank of two
    bytes whose halves straddle two items (258 = 0x0102) is no match."""
    code = "I" if wide else "H"
    stream = array(code, [x if wide else x & 0xFFFF for x in seq])
    want = anchor if wide else anchor & 0xFFFF
    got = _native().anchor_positions(stream, want, limit)
    assert got == matcher._anchor_positions_py(stream, want, limit)


@settings(max_examples=300, deadline=None)
@given(
    ids=st.sets(st.integers(0, 70_000), max_size=200),
    docs=st.sets(st.integers(-3, 70_003) | st.just(2**70), max_size=40),
    wide=st.booleans(),
)
def test_restrict_is_the_pure_lookup(ids: set[int], docs: set[int], wide: bool) -> None:
    """The same counts in the same order (the set's), found by binary
    search in u16 or u32 ids; an id no posting can hold is simply absent."""
    code = "I" if wide else "H"
    posting = array(code, sorted(i if wide else i & 0xFFFF for i in ids))
    posting = array(code, sorted(set(posting)))
    tfs = array("H", [(i * 7 + 1) & 0xFFFF for i in range(len(posting))])
    got = _native().restrict(posting, tfs, docs)
    want = native_rank.restrict_py(posting, tfs, docs)
    assert got == want and list(got) == list(want)
