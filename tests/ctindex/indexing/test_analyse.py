"""ctindex/indexing/analyse.py: documents from captured bytes, in process or forked."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex import providers
from ctindex.indexing import analyse, transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.providers import okf_markdown as okf
from ctindex.store.generation import read_manifest
from tests.e2e.test_differential import dump


def _quiet(root: Path) -> None:
    (root / ".ct").mkdir(exist_ok=True)
    (root / ".ct" / "index.jsonc").write_text(json.dumps({"version": 1, "watch": False}))


def test_parallel_build_equals_serial_build(
    bundles_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _quiet(bundles_project)
    proj = Project.at(bundles_project)
    plan = load_plan(proj)
    (bundles_project / "okf" / "bundles" / "ga4" / "broken.md").write_bytes(b"\xff")
    serial = transaction.rebuild(proj, plan)
    want = dump(proj.index_dir)
    monkeypatch.setattr(analyse, "PARALLEL_MIN_DOCS", 10)
    monkeypatch.setattr(analyse, "_workers", lambda docs: 3)
    monkeypatch.setattr(analyse, "BATCH_DOCS", 7)  # each worker streams several batches
    parallel = transaction.rebuild(proj, plan)
    assert dump(proj.index_dir) == want
    assert parallel.errors == serial.errors == 1
    m = read_manifest(proj.index_dir)
    assert m is not None and len(m.segments) == 3


@pytest.mark.parametrize("workers", [1, 3])
def test_a_rebuild_over_its_memory_budget_spills_segments_with_the_same_answers(
    bundles_project: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """With the build budget made small (each document costed at 1/20th of
    the smallest `max_build_memory_bytes`), a rebuild writes one segment per
    part, in this process or in workers, and the index holds the same
    documents and ranks every query with the same scores as one segment."""
    from ctindex.search.execute import search_index
    from ctindex.search.query import parse_query
    from ctindex.store import budget

    _quiet(bundles_project)
    proj = Project.at(bundles_project)
    plan = load_plan(proj)
    queries = ["bigquery", "events OR sessions", '"user id"', "table*", "type:Table -ga4"]

    def answers() -> list[object]:
        return [search_index(proj.index_dir, parse_query(q), 50) for q in queries]

    whole = transaction.rebuild(proj, plan)
    m = read_manifest(proj.index_dir)
    assert m is not None and len(m.segments) == 1
    want, want_answers = dump(proj.index_dir), answers()
    assert all(a.results for a in want_answers)

    smallest = 16 << 20
    (proj.root / ".ct" / "index.jsonc").write_text(
        json.dumps({"version": 1, "watch": False, "max_build_memory_bytes": smallest})
    )
    monkeypatch.setattr(budget, "PER_DOC", smallest // 20)
    monkeypatch.setattr(budget, "MIN_PART_DOCS", 4)
    monkeypatch.setattr(analyse, "PARALLEL_MIN_DOCS", 10)
    monkeypatch.setattr(analyse, "_workers", lambda docs: workers)
    spilled = transaction.rebuild(proj, load_plan(proj))
    m = read_manifest(proj.index_dir)
    assert m is not None and len(m.segments) >= whole.documents // 20
    assert spilled.documents == whole.documents
    assert dump(proj.index_dir) == want
    assert [a._replace(generation=None) for a in answers()] == [
        a._replace(generation=None) for a in want_answers
    ]


@pytest.mark.parametrize("batch_bytes", [1 << 20, 2000])
def test_a_streamed_worker_segment_is_the_segment_of_its_documents(
    bundles_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_bytes: int
) -> None:
    """A worker adds its documents batch by batch (`_build_part`), batches
    bounded by documents or by bytes; the file is byte for byte
    `build_segment` of the same documents, given at once."""
    from ctindex.providers.fields import SEP
    from ctindex.store.segment_build import build_segment

    plan = load_plan(Project.at(bundles_project))
    root = bundles_project
    keys = sorted(str(p.relative_to(root)) for p in root.rglob("*.md") if ".ct" not in p.parts)
    contents = {k: (root / k).read_bytes() for k in keys}
    contents[keys[3]] = b"\xff"  # a file the provider refuses, inside a batch
    targets = analyse.targets_of(plan, keys)
    monkeypatch.setattr(analyse, "BATCH_DOCS", 5)
    monkeypatch.setattr(analyse, "BATCH_BYTES", batch_bytes)
    monkeypatch.setattr(analyse, "_JOB", analyse._Job(contents, plan, tmp_path, os.getpid()))
    got = analyse._build_part(analyse._Part("streamed.seg", keys, 0))
    diagnostics = analyse.Diagnostics({}, {})
    docs = [
        (targets[k].provider, d)
        for k in keys
        if (d := analyse._parsed(k, contents[k], targets[k], diagnostics)) is not None
    ]
    whole = [analyse.build_input(d, providers.load(p).analyze(d)) for p, d in docs]
    info = build_segment(tmp_path / "whole.seg", whole, SEP)
    assert len(keys) > 3 * 5 and got.diagnostics == diagnostics and info == got.info
    assert (tmp_path / "streamed.seg").read_bytes() == (tmp_path / "whole.seg").read_bytes()


def test_targets_name_each_keys_scope_root_and_provider(bundles_project: Path) -> None:
    _quiet(bundles_project)
    plan = load_plan(Project.at(bundles_project))
    key = "okf/bundles/ga4/tables/events.md"
    got = analyse.targets_of(plan, [key, "elsewhere/x.md"])
    assert got[key] == analyse.Target("okf/bundles/ga4", "okf-markdown")
    # Outside every scope (never asked for by the indexer): the index provider.
    assert got["elsewhere/x.md"] == analyse.Target("", "okf-markdown")


_PARTS = st.sampled_from(["a", "b", "ab", "c.md"])


@settings(max_examples=200, deadline=None)
@given(
    roots=st.lists(st.lists(_PARTS, max_size=3).map("/".join), max_size=5),
    keys=st.lists(st.lists(_PARTS, min_size=1, max_size=4).map("/".join), max_size=40),
)
def test_targets_of_equals_each_keys_own_lookup(
    bundles_project_once: Path, roots: list[str], keys: list[str]
) -> None:
    """Looked up once per folder, every key still gets the first scope (in
    order) whose root holds it: nested roots, a root named like a file of
    the folder, keys of any depth."""
    from ctindex.policy.plan import Scope

    plan = dataclasses.replace(
        load_plan(Project.at(bundles_project_once)),
        scopes=tuple(Scope(r, f"p{i}", (), (), "project") for i, r in enumerate(roots)),
    )
    keys = sorted(set(keys))
    assert analyse.targets_of(plan, keys) == {k: analyse._target(plan, k) for k in keys}


@pytest.fixture(scope="module")
def bundles_project_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plan")
    _quiet(root)
    return root


def test_reanalyze_gives_back_what_build_input_stored() -> None:
    doc = okf.parse("s/a.md", b"---\ntitle: T\ntags: [x, y]\n---\nbody words here\n", "s")
    assert isinstance(doc, okf.Document)
    first = analyse.build_input(doc)
    again = analyse.reanalyze(first.doc)
    assert again == first


class _Recorder:
    """A term sink that keeps what it is given."""

    def __init__(self) -> None:
        self.added: list[tuple[dict[str, int], list[str]]] = []

    def add(self, tfw: dict[str, int], tokens: list[str]) -> None:
        self.added.append((tfw, tokens))


def test_runs_of_one_provider_are_fed_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each document's feed adds its own analysis, in document order, across
    a change of provider and a batch boundary."""
    docs = []
    for i in range(5):
        got = okf.parse(f"d{i}.md", f"# t{i}\n\nword{i} shared\n".encode())
        assert isinstance(got, okf.Document)
        docs.append(("okf-markdown" if i != 2 else "okf-alias", got))
    # A second provider id served by the same code: three runs.
    monkeypatch.setitem(providers._LOADED, "okf-alias", okf.PROVIDER)
    monkeypatch.setattr(okf, "ANALYZE_BATCH", 2)
    fed = list(analyse._fed(docs))
    assert [d.key for d, _ in fed] == [f"d{i}.md" for i in range(5)]
    sink = _Recorder()
    lengths = [feed(sink) for _, feed in fed]
    want = [okf.analyze(d) for _, d in docs]
    assert sink.added == [(a.tfw, a.tokens) for a in want]
    assert lengths == [(a.length, a.flens) for a in want]


def test_clip_bounds_a_diagnostic() -> None:
    assert analyse.clip("short") == "short"
    long = analyse.clip("x" * 1000)
    assert len(long) == analyse.MAX_MESSAGE and long.endswith("…")


@pytest.mark.parametrize("workers", [1, 3])
def test_rebuild_reading_in_its_workers_equals_reading_in_the_pass(
    bundles_project: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """A rebuild's reads deferred to where documents are parsed
    (ctindex/reconciler/capture.py) give the index and the file table the pass's own
    reads give: the same documents, and entry for entry the same
    fingerprints and digests (only the moment of each read differs)."""
    from ctindex.store.filetable import load_file_table

    _quiet(bundles_project)
    proj = Project.at(bundles_project)
    plan = load_plan(proj)
    (bundles_project / "okf" / "bundles" / "ga4" / "broken.md").write_bytes(b"\xff")
    if workers > 1:
        monkeypatch.setattr(analyse, "PARALLEL_MIN_DOCS", 10)
        monkeypatch.setattr(analyse, "_workers", lambda docs: workers)

    def table() -> dict[str, tuple[object, ...]]:
        m = read_manifest(proj.index_dir)
        assert m is not None
        return {k: e[:6] for k, e in load_file_table(proj.index_dir, m).raw().items()}

    monkeypatch.setattr(transaction, "DEFER_REBUILD_READS", False)
    captured = transaction.rebuild(proj, plan)
    want, want_table = dump(proj.index_dir), table()
    monkeypatch.setattr(transaction, "DEFER_REBUILD_READS", True)
    deferred = transaction.rebuild(proj, plan)
    assert dump(proj.index_dir) == want
    assert table() == want_table and len(want_table) > 10
    assert (deferred.added, deferred.errors, deferred.documents) == (
        captured.added,
        captured.errors,
        captured.documents,
    )


def test_a_workers_shipped_keys_become_the_parents_own_strings() -> None:
    """What a worker read comes back with new strings for its keys; the
    parent swaps in its own (the same keys, in order), or keeps what was
    sent when they are not its keys."""
    from ctindex.reconciler.capture import Shipment

    mine = [f"kb/{n}.md" for n in range(6)]
    sent = [f"kb/{n}.md" for n in (1, 2, 5)]
    built = analyse._Built("s.seg", None, analyse.Diagnostics({}, {}), Shipment(sent, b"", 0, []))  # type: ignore[arg-type]
    got = analyse._own_keys(built, mine).shipment.keys
    assert got == sent and all(a is mine[n] for a, n in zip(got, (1, 2, 5), strict=True))
    stranger = built._replace(shipment=Shipment(["kb/9.md"], b"", 0, []))
    assert analyse._own_keys(stranger, mine) is stranger


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 5000), max_size=60),
    start=st.integers(0, 20),
    most_docs=st.integers(1, 9),
    most_bytes=st.integers(1, 8000),
)
def test_batches_cover_the_part_within_both_bounds(
    sizes: list[int], start: int, most_docs: int, most_bytes: int
) -> None:
    from ctindex.reconciler.pending import PendingReads
    from tests.ctindex.reconciler.fakes import with_fields

    st_ = os.lstat(".")
    reads = PendingReads()
    for n in range(start):
        reads.add(f"before{n:02d}", with_fields(st_, st_size=0))
    keys = [f"k{n:03d}" for n in range(len(sizes))]
    for key, size in zip(keys, sizes, strict=True):
        reads.add(key, with_fields(st_, st_size=size))
    old = analyse.BATCH_DOCS, analyse.BATCH_BYTES
    analyse.BATCH_DOCS, analyse.BATCH_BYTES = most_docs, most_bytes
    try:
        part = analyse._Part("p.seg", keys, start)
        from_reads = list(analyse._batches(part, analyse.Reads("/", reads)))
        contents = {k: b"x" * n for k, n in zip(keys, sizes, strict=True)}
        assert list(analyse._batches(part, contents)) == from_reads
    finally:
        analyse.BATCH_DOCS, analyse.BATCH_BYTES = old
    assert [i for a, b in from_reads for i in range(a, b)] == list(range(len(keys)))
    for a, b in from_reads:
        assert 0 < b - a <= most_docs
        assert b - a == 1 or sum(sizes[a:b]) <= most_bytes
