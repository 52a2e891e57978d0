"""Segment files, the store manifest, tombstones, merges, GC and reader retries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctindex.indexing.analyse import build_input
from ctindex.providers import okf_markdown as okf
from ctindex.search import native_rank
from ctindex.store import snapshot as snapshot_mod
from ctindex.store import writer as writer_mod
from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import (
    StoreManifest,
    read_dels,
    read_manifest,
    write_dels,
)
from ctindex.store.segment import (
    S_BLOCKS,
    S_KEYS,
    S_LENGTHS,
    S_POSTINGS,
    S_RECORDS,
    S_SEQS,
    S_TOP,
)
from ctindex.store.segment_build import build_segment
from ctindex.store.segment_read import Segment
from ctindex.store.snapshot import with_snapshot
from ctindex.store.writer import StoreWriter


def bundle_docs(corpus: Path) -> list[okf.Document]:
    docs = []
    for path in sorted(corpus.rglob("*.md")):
        if path.name in ("index.md", "log.md", "NOTICE.md"):
            continue
        key = str(path.relative_to(corpus))
        got = okf.parse(key, path.read_bytes(), key.split("/")[0])
        assert isinstance(got, okf.Document)
        docs.append(got)
    return docs


def make_doc(key: str, text: str) -> okf.Document:
    got = okf.parse(key, text.encode())
    assert isinstance(got, okf.Document)
    return got


@pytest.fixture(scope="module")
def docs(corpus: Path) -> list[okf.Document]:
    return bundle_docs(corpus)


def test_segment_round_trip(tmp_path: Path, docs: list[okf.Document]) -> None:
    items = [build_input(d) for d in reversed(docs)]
    info = build_segment(tmp_path / "s.seg", items, okf.SEP)
    seg = Segment(tmp_path / "s.seg")
    by_key = sorted(docs, key=lambda d: d.key)
    assert info.ndocs == seg.ndocs == len(docs)
    assert seg.keys() == [d.key for d in by_key]
    analyses = [okf.analyze(d) for d in by_key]
    expected: dict[str, dict[int, int]] = {}
    for i, a in enumerate(analyses):
        for t, w in a.tfw.items():
            expected.setdefault(t, {})[i] = w
    assert seg.nterms == len(expected)
    for term, want in expected.items():
        post = seg.postings(term)
        assert post is not None
        assert dict(zip(post[0], post[1], strict=True)) == want
    assert seg.postings("zzzz-not-a-term") is None
    for prefix in ("marg", "b", "gross", "zzz", ""):
        want_terms = sorted(t for t in expected if t.startswith(prefix))
        assert seg.terms_with_prefix(prefix) == want_terms
    vocab = sorted(expected)
    for i, a in enumerate(analyses):
        seq = seg.sequence(i)
        assert [okf.SEP if r == seg.sep_rank else vocab[seg.word_base + r] for r in seq] == a.tokens
        assert seg.lengths()[i] == a.length
        stored = seg.stored(i)
        assert (stored.key, stored.title, stored.tags, stored.body) == (
            by_key[i].key,
            by_key[i].title,
            by_key[i].tags,
            by_key[i].body,
        )
    assert info.length_sum == sum(a.length for a in analyses)


def test_wide_segments_switch_to_32_bit_arrays(tmp_path: Path) -> None:
    words = " ".join(f"w{i}x" for i in range(70_000))
    build_segment(tmp_path / "w.seg", [build_input(make_doc("a.md", words))], okf.SEP)
    seg = Segment(tmp_path / "w.seg")
    assert seg.seq_code == "I" and seg.nterms == 70_001 + 6  # + the title "a"; its ranking terms
    assert seg.postings("w69999x") is not None
    assert seg.sequence(0)[-1] == seg.rank("w69999x")


@pytest.mark.parametrize("section", [S_POSTINGS, S_LENGTHS, S_RECORDS, S_KEYS, S_SEQS])
def test_every_part_read_is_checksummed(
    tmp_path: Path, docs: list[okf.Document], section: int
) -> None:
    path = tmp_path / "s.seg"
    build_segment(path, [build_input(d) for d in docs], okf.SEP)
    off, length, _ = Segment(path).sections[section]
    data = bytearray(path.read_bytes())
    data[off + length // 2] ^= 0x40
    path.write_bytes(bytes(data))
    seg = Segment(path)
    with pytest.raises(IndexCorrupt, match="checksum mismatch"):
        if section == S_POSTINGS:
            for t in seg.terms_with_prefix(""):
                seg.postings(t)
        elif section == S_LENGTHS:
            seg.lengths()
        elif section == S_RECORDS:
            for i in range(seg.ndocs):
                seg.stored(i)
        elif section == S_SEQS:
            list(seg.sequences(range(seg.ndocs)))
        else:
            seg.keys()


def test_damaged_header_or_dictionary_is_refused(tmp_path: Path, docs: list[okf.Document]) -> None:
    path = tmp_path / "s.seg"
    build_segment(path, [build_input(d) for d in docs], okf.SEP)
    good = path.read_bytes()
    sections = Segment(path).sections
    top, blocks = sections[S_TOP], sections[S_BLOCKS]
    for pos in (12, top[0] + top[1] - 1, blocks[0] + blocks[1] // 2):  # header, top, a block
        data = bytearray(good)
        data[pos] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(IndexCorrupt):
            seg = Segment(path)
            for t in seg.terms_with_prefix(""):
                seg.lookup(t)
    path.write_bytes(good[:100])
    with pytest.raises(IndexCorrupt, match="truncated"):
        Segment(path)


def test_manifest_and_tombstones_are_checksummed(tmp_path: Path) -> None:
    m = StoreManifest(generation=7, provider={"id": "okf-markdown"})
    (tmp_path / "MANIFEST").write_bytes(m.to_bytes())
    got = read_manifest(tmp_path)
    assert got is not None and got.generation == 7
    (tmp_path / "MANIFEST").write_bytes(m.to_bytes().replace(b'"generation":7', b'"generation":8'))
    with pytest.raises(IndexCorrupt, match="checksum"):
        read_manifest(tmp_path)
    assert read_manifest(tmp_path / "nowhere") is None
    write_dels(tmp_path / "d.del", {5, 1, 3})
    assert read_dels(tmp_path / "d.del") == {1, 3, 5}
    raw = bytearray((tmp_path / "d.del").read_bytes())
    raw[13] ^= 1
    (tmp_path / "d2.del").write_bytes(bytes(raw))
    with pytest.raises(IndexCorrupt):
        read_dels(tmp_path / "d2.del")


def _commit(w: StoreWriter, gen_files: bytes = b"") -> StoreManifest:
    meta = {"provider": {}, "scopes": {}, "plan_digest": "", "source_bytes": 0, "reconcile": {}}
    return w.commit(files_table=None, meta=meta, diag=None)


def _writer(index: Path, base: StoreManifest | None, fresh: bool = False) -> StoreWriter:
    from ctindex.indexing.analyse import reanalyze

    return StoreWriter(index, base, fresh=fresh, reanalyze=reanalyze, sep=okf.SEP)


def _live_keys(index: Path) -> set[str]:
    def work(snap: snapshot_mod.Snapshot) -> set[str]:
        return {k for v in snap.views for i, k in enumerate(v.segment.keys()) if v.live(i)}

    return with_snapshot(index, work)


def test_merge_policy_bounds_segments_and_drops_tombstones(tmp_path: Path) -> None:
    index = tmp_path / "okf"
    index.mkdir()
    base = None
    for i in range(40):
        w = _writer(index, base)
        w.add(build_input(make_doc(f"d{i}.md", f"document number {i}")))
        if i % 3 == 0 and i:
            w.remove(f"d{i - 1}.md")
        base = _commit(w)
        assert len(base.segments) <= writer_mod.MAX_SEGMENTS
        for s in base.segments:
            assert s.deleted <= s.ndocs * writer_mod.MAX_DELETED_RATIO or s.ndocs == 0 or i % 3
    assert base is not None and base.generation == 40
    expected = {f"d{i}.md" for i in range(40)} - {f"d{i - 1}.md" for i in range(3, 40, 3)}
    assert _live_keys(index) == expected
    assert base.documents == len(expected)


def test_retired_files_survive_the_grace_period_then_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "okf"
    index.mkdir()
    w = _writer(index, None)
    w.add(build_input(make_doc("a.md", "alpha")))
    first = _commit(w)
    w = _writer(index, first, fresh=True)
    w.add(build_input(make_doc("b.md", "beta")))
    second = _commit(w)
    old = first.segments[0].name
    assert (index / old).exists()  # retired, within the grace period
    assert [r[0] for r in second.retired] == [old]
    (index / "seg-00000009-deadbeef.seg").write_bytes(b"leftover of a crashed writer")
    monkeypatch.setattr(writer_mod, "GRACE_NS", 0)
    w = _writer(index, read_manifest(index))
    w.add(build_input(make_doc("c.md", "gamma")))
    third = _commit(w)
    assert not (index / old).exists()
    assert not (index / "seg-00000009-deadbeef.seg").exists()
    assert set(os.listdir(index)) == third.referenced() | {"MANIFEST"} | {
        r[0] for r in third.retired
    }


def test_manifest_lists_only_retirements_inside_the_grace_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon publishes generation after generation: MANIFEST, rewritten
    each time and read by every query, stays one grace period's worth of
    retired names long, and names only files still on disk."""
    index = tmp_path / "okf"
    index.mkdir()
    now = [10**18]
    monkeypatch.setattr(writer_mod, "clock_ns", lambda: now[0])
    step = writer_mod.GRACE_NS // 6
    m = None
    for i in range(40):
        w = _writer(index, m, fresh=True)
        w.add(build_input(make_doc(f"d{i}.md", "alpha")))
        _commit(w)
        m = read_manifest(index)  # the next writer's base, as a new process reads it
        assert m is not None
        now[0] += step
    assert 0 < len(m.retired) <= 7  # retired in the last grace period only
    assert all((index / name).exists() for name, _ in m.retired)
    assert all(now[0] - step - at < writer_mod.GRACE_NS for _, at in m.retired)


def test_reader_that_loses_the_race_retries_on_the_newer_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "okf"
    index.mkdir()
    w = _writer(index, None)
    w.add(build_input(make_doc("a.md", "alpha")))
    stale = _commit(w)
    monkeypatch.setattr(writer_mod, "GRACE_NS", 0)
    w = _writer(index, stale, fresh=True)
    w.add(build_input(make_doc("b.md", "beta")))
    _commit(w)  # gen 2; gen 1's segment is deleted at once (no grace)
    real = snapshot_mod.read_manifest
    calls = []

    def racing(folder: Path) -> StoreManifest | None:
        calls.append(1)
        return stale if len(calls) == 1 else real(folder)

    monkeypatch.setattr(snapshot_mod, "read_manifest", racing)
    assert _live_keys(index) == {"b.md"}
    assert len(calls) == 2


def test_persistently_missing_files_are_reported_corrupt(tmp_path: Path) -> None:
    index = tmp_path / "okf"
    index.mkdir()
    w = _writer(index, None)
    w.add(build_input(make_doc("a.md", "alpha")))
    m = _commit(w)
    (index / m.segments[0].name).unlink()
    with pytest.raises(IndexCorrupt, match="rebuild"):
        _live_keys(index)


@pytest.mark.slow
def test_ranking_terms_do_not_widen_the_token_streams(tmp_path: Path) -> None:
    """Over 65,535 ranking terms (each title and ID is an exact-match key)
    beside a few dozen words: the streams rank the words alone, so they stay
    16-bit, and phrases and sequences still resolve."""
    vocab = [f"w{chr(97 + i // 6)}{chr(97 + i % 6)}" for i in range(35)]
    combos = [(a, b, c) for a in vocab for b in vocab for c in vocab]  # 42,875
    docs = [
        make_doc(f"{a}/{b}/{c}.md", f"# {a} {b} {c}\n\nalpha beta{i % 7}x gamma\n")
        for i, (a, b, c) in enumerate(combos)
    ]
    build_segment(tmp_path / "r.seg", [build_input(d) for d in docs], okf.SEP)
    seg = Segment(tmp_path / "r.seg")
    try:
        assert seg.nterms > 0xFFFF and seg.seq_code == "H"
        assert seg.word_base > 0xFFFF and seg.nterms - seg.word_base < 100
        words = [t for b in range(seg.nblocks) for t in seg._block(b)[0]][seg.word_base :]
        assert all(t >= "\x03" for t in words)
        stream = [okf.SEP if r == seg.sep_rank else words[r] for r in seg.sequence(5)]
        assert seg.keys()[5] == docs[5].key and stream == okf.analyze(docs[5]).tokens
        assert seg.rank("\x01twaa") is None  # a ranking term is in no stream
        ranks = [seg.rank(t) for t in okf.analyze(docs[5]).tokens[-3:]]
        want = [r for r in ranks if r is not None]
        assert 5 in seg.phrase_docs(range(seg.ndocs), want, native_rank.phrase_scan())
    finally:
        seg.close()


def test_locating_many_keys_reads_the_keys_section_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer locates each changed key by bisecting the sorted keys; the
    section is read and checked once per segment, not once per key (an
    update changing every file was quadratic)."""
    from ctindex.store.segment import S_KEYS

    docs = [make_doc(f"k{i:03d}.md", f"doc {i}") for i in range(200)]
    path = tmp_path / "k.seg"
    build_segment(path, [build_input(d) for d in docs], okf.SEP)
    seg = Segment(path)
    reads: list[int] = []
    real = Segment._section

    def counted(self: Segment, idx: int) -> bytes:
        reads.append(idx)
        return real(self, idx)

    monkeypatch.setattr(Segment, "_section", counted)
    assert [seg.find(f"k{i:03d}.md") for i in range(200)] == list(range(200))
    assert seg.find("k.md") is None and seg.find("zzz") is None
    assert reads.count(S_KEYS) == 1
    seg.close()
