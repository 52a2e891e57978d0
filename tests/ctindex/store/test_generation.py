"""The store manifest (ctindex/store/generation.py): its identity is its
bytes, lineage tells a descendant from a restored or foreign copy, and a
damaged MANIFEST is IndexCorrupt (another format: IndexFormatChanged), never
a traceback or a misread."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctindex.errors import IndexCorrupt, IndexFormatChanged
from ctindex.store import durable
from ctindex.store.durable import crc
from ctindex.store.generation import (
    FORMAT,
    LINEAGE,
    MANIFEST_NAME,
    OUTSIDE,
    SegmentRef,
    StoreManifest,
    manifest_identity,
    read_manifest,
)
from ctindex.store.writer import publish


def _manifest(generation: int = 3) -> StoreManifest:
    return StoreManifest(
        generation=generation,
        created_ns=1_700_000_000_000_000_000,
        provider={"id": "okf-markdown", "version": 2},
        scopes={"okf": "abc"},
        plan_digest="d1",
        segments=[SegmentRef("seg-3-aa.seg", 10, 2, "del-3-bb.del", 400, 4096, 77)],
        files="files-3-cc.bin",
        files_delta={"okf/a.md": [1, 2, 3, 4, 5]},
        diag="diag-3-dd.json",
        errors=1,
        warnings=2,
        source_bytes=12345,
        store_id="0" * 32,
        lineage=["e" * 32],
        home=[1, 2],
    )


def _publish_raw(index_dir: Path, document: dict[str, object]) -> bytes:
    """A MANIFEST with a valid checksum around any JSON body."""
    body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    data = body + b"\ncrc32:%08x\n" % crc(body)
    (index_dir / MANIFEST_NAME).write_bytes(data)
    return data


# -- identity -------------------------------------------------------------------------


def test_identity_is_a_digest_of_the_exact_bytes() -> None:
    data = _manifest().to_bytes()
    assert manifest_identity(data) == manifest_identity(bytes(data))
    assert len(manifest_identity(data)) == 32
    int(manifest_identity(data), 16)  # hex


@given(st.binary(min_size=1, max_size=512), st.data())
def test_any_byte_changed_is_another_identity(data: bytes, draw: st.DataObject) -> None:
    at = draw.draw(st.integers(0, len(data) - 1))
    flip = draw.draw(st.integers(1, 255))
    changed = data[:at] + bytes([data[at] ^ flip]) + data[at + 1 :]
    assert manifest_identity(changed) != manifest_identity(data)
    assert manifest_identity(data + b"\n") != manifest_identity(data)  # even a trailing newline


def test_a_manifest_read_back_has_the_identity_of_its_bytes(tmp_path: Path) -> None:
    m = _manifest()
    data = m.to_bytes()
    (tmp_path / MANIFEST_NAME).write_bytes(data)
    got = read_manifest(tmp_path)
    assert got is not None
    assert got.identity == manifest_identity(data)
    got.identity = ""
    assert got == m  # every field round-trips
    assert got.to_bytes() == data  # and so do the bytes: the identity is stable


def test_the_same_generation_number_from_another_store_is_another_identity() -> None:
    ours, theirs = _manifest(7), _manifest(7)
    theirs.segments = [SegmentRef("seg-7-zz.seg", 10)]
    assert manifest_identity(ours.to_bytes()) != manifest_identity(theirs.to_bytes())


# -- lineage --------------------------------------------------------------------------


def test_descends_from_itself_and_its_ancestors_only() -> None:
    m = _manifest()
    m.identity = "self"
    m.lineage = ["parent", "grandparent"]
    assert m.descends_from("self")
    assert m.descends_from("parent") and m.descends_from("grandparent")
    assert not m.descends_from("stranger")
    assert not m.descends_from("")  # nothing vouched: nothing descends from it
    unread = StoreManifest()  # identity "" until read or written
    assert not unread.descends_from("")


def test_published_generations_name_their_last_eight_ancestors(tmp_path: Path) -> None:
    base = StoreManifest()
    seen: list[StoreManifest] = []
    for generation in range(1, LINEAGE + 4):
        m = StoreManifest(generation=generation)
        publish(tmp_path, m, base)
        read = read_manifest(tmp_path)
        assert read is not None and read.identity == m.identity
        seen.append(read)
        base = read
    newest = seen[-1]
    assert len(newest.lineage) == LINEAGE
    assert newest.lineage == [m.identity for m in reversed(seen[-LINEAGE - 1 : -1])]
    for m in seen[-LINEAGE - 1 :]:
        assert newest.descends_from(m.identity)
    for m in seen[: -LINEAGE - 1]:
        assert not newest.descends_from(m.identity)  # past LINEAGE publishes
    assert {m.store_id for m in seen} == {seen[0].store_id} and len(seen[0].store_id) == 32


def test_a_restored_older_manifest_does_not_descend_from_the_live_one(tmp_path: Path) -> None:
    """A backup put back (or a `git checkout` of .ct/): its number may even be
    higher, but it is not the live generation nor published on top of it."""
    base = StoreManifest()
    publish(tmp_path, StoreManifest(generation=1), base)
    backup = (tmp_path / MANIFEST_NAME).read_bytes()
    first = read_manifest(tmp_path)
    assert first is not None
    live = StoreManifest(generation=2)
    publish(tmp_path, live, first)
    (tmp_path / MANIFEST_NAME).write_bytes(backup)
    restored = read_manifest(tmp_path)
    assert restored is not None
    assert not restored.descends_from(live.identity)
    assert live.descends_from(restored.identity)  # the other way round it does


def test_a_store_copied_in_from_elsewhere_does_not_descend(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    mine = StoreManifest(generation=5)
    publish(ours, mine, StoreManifest())
    publish(theirs, StoreManifest(generation=5), StoreManifest())
    os.replace(theirs / MANIFEST_NAME, ours / MANIFEST_NAME)
    copied = read_manifest(ours)
    assert copied is not None
    assert not copied.descends_from(mine.identity)
    assert copied.store_id != mine.store_id


def test_outside_is_the_reason_the_docs_name() -> None:
    assert OUTSIDE == "index changed outside ctindex"
    docs = Path(__file__).resolve().parents[3] / "docs" / "daemon.md"
    assert f"### {OUTSIDE[0].upper()}{OUTSIDE[1:]}" in docs.read_text()


# -- reading what is there ------------------------------------------------------------


def test_no_manifest_is_none(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
    assert read_manifest(tmp_path / "not-there") is None


@given(st.data())
def test_any_damaged_byte_is_index_corrupt(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("damaged")
    good = _manifest().to_bytes()
    at = data.draw(st.integers(0, len(good) - 1))
    flip = data.draw(st.integers(1, 255))
    damaged = good[:at] + bytes([good[at] ^ flip]) + good[at + 1 :]
    (folder / MANIFEST_NAME).write_bytes(damaged)
    try:
        got = read_manifest(folder)
    except IndexCorrupt as exc:
        assert str(exc).startswith(f"{folder / MANIFEST_NAME}: ")
        assert "\n" not in str(exc)
    else:
        # only a flip the checksum line tolerates may read: a hex digit's case
        assert got is not None and got.identity != manifest_identity(good)
        assert damaged.rstrip(b"\n").lower() == good.rstrip(b"\n").lower()


@pytest.mark.parametrize("drop", [2, 12, 20, 100])
def test_a_truncated_manifest_is_index_corrupt(tmp_path: Path, drop: int) -> None:
    data = _manifest().to_bytes()
    (tmp_path / MANIFEST_NAME).write_bytes(data[: len(data) - drop])
    with pytest.raises(IndexCorrupt, match="manifest checksum mismatch"):
        read_manifest(tmp_path)


def test_an_empty_manifest_is_index_corrupt(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).write_bytes(b"")
    with pytest.raises(IndexCorrupt, match="manifest checksum mismatch"):
        read_manifest(tmp_path)


def test_a_manifest_without_its_final_newline_is_still_whole(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).write_bytes(_manifest().to_bytes()[:-1])
    assert read_manifest(tmp_path) is not None


def test_another_format_is_index_format_changed(tmp_path: Path) -> None:
    document = {"format": FORMAT - 1, **_manifest().as_dict()}
    _publish_raw(tmp_path, document)
    with pytest.raises(IndexFormatChanged, match=f"index format {FORMAT - 1}, this version"):
        read_manifest(tmp_path)


def test_unknown_keys_from_a_newer_build_are_dropped_not_corrupt(tmp_path: Path) -> None:
    document = {"format": FORMAT, **_manifest().as_dict(), "later_key": {"x": 1}}
    segments = document["segments"]
    assert isinstance(segments, list)
    segments[0]["later_ref_key"] = 5
    data = _publish_raw(tmp_path, document)
    got = read_manifest(tmp_path)
    assert got is not None
    assert not hasattr(got, "later_key") and not hasattr(got.segments[0], "later_ref_key")
    assert got.identity == manifest_identity(data)  # the bytes as read, not as re-written
    got.identity = ""
    assert got == _manifest()


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: d.pop("format"), id="no-format"),
        pytest.param(lambda d: d.pop("segments"), id="no-segments"),
        pytest.param(lambda d: d.update(segments=5), id="segments-not-a-list"),
        pytest.param(lambda d: d.update(segments=[{"ndocs": 1}]), id="segment-without-name"),
    ],
)
def test_a_checksummed_but_malformed_manifest_is_index_corrupt(
    tmp_path: Path, change: object
) -> None:
    document: dict[str, object] = {"format": FORMAT, **_manifest().as_dict()}
    assert callable(change)
    change(document)
    _publish_raw(tmp_path, document)
    with pytest.raises(IndexCorrupt, match="manifest unreadable"):
        read_manifest(tmp_path)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(json.dumps({"format": FORMAT, "segments": ["seg"]}), id="segment-a-string"),
        pytest.param('"a string"', id="top-level-string"),
        pytest.param("4", id="top-level-number"),
    ],
)
def test_a_checksummed_body_of_the_wrong_shape_is_index_corrupt(tmp_path: Path, body: str) -> None:
    raw = body.encode()
    (tmp_path / MANIFEST_NAME).write_bytes(raw + b"\ncrc32:%08x\n" % crc(raw))
    with pytest.raises(IndexCorrupt, match="manifest unreadable"):
        read_manifest(tmp_path)


def test_a_body_that_is_not_json_is_index_corrupt(tmp_path: Path) -> None:
    body = b"{not json"
    (tmp_path / MANIFEST_NAME).write_bytes(body + b"\ncrc32:%08x\n" % crc(body))
    with pytest.raises(IndexCorrupt, match="manifest unreadable"):
        read_manifest(tmp_path)


def test_a_manifest_larger_than_the_bound_is_index_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _manifest().to_bytes()
    (tmp_path / MANIFEST_NAME).write_bytes(data)
    monkeypatch.setattr(durable, "INDEX_FILE_LIMIT", len(data) - 1)
    with pytest.raises(IndexCorrupt, match="cannot read"):
        read_manifest(tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "folder", "symlink"])
def test_a_manifest_that_is_not_a_regular_file_is_index_corrupt(tmp_path: Path, kind: str) -> None:
    """Refused without reading (a FIFO would hang a reader)."""
    path = tmp_path / MANIFEST_NAME
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        (tmp_path / "real").write_bytes(_manifest().to_bytes())
        path.symlink_to("real")
    with pytest.raises(IndexCorrupt, match="cannot read"):
        read_manifest(tmp_path)


# -- retired files --------------------------------------------------------------------


def test_retired_files_read_back_as_pairs_and_write_the_same_bytes(tmp_path: Path) -> None:
    m = StoreManifest(generation=3, retired=[("seg-2-ab.seg", 11), ("del-2-cd.del", 12)])
    (tmp_path / "MANIFEST").write_bytes(m.to_bytes())
    assert b'"retired":[["seg-2-ab.seg",11],["del-2-cd.del",12]]' in m.to_bytes()
    got = read_manifest(tmp_path)
    assert got is not None
    assert got.retired == [("seg-2-ab.seg", 11), ("del-2-cd.del", 12)]
    assert got.to_bytes() == m.to_bytes()
    m.identity = got.identity  # m itself was never read nor written
    assert got == m  # the pairs a writer makes equal the pairs a reader makes


def test_a_retired_entry_of_the_wrong_shape_is_damage(tmp_path: Path) -> None:
    """A checksummed manifest whose retired list holds no [name, time] pair
    (written by hand) is read as damaged, like any field it cannot use,
    instead of failing the garbage collector after the next publish."""
    body = json.loads(StoreManifest(generation=3).to_bytes().rpartition(b"\ncrc32")[0])
    body["retired"] = [["seg-1-ab.seg"]]
    _publish_raw(tmp_path, body)
    with pytest.raises(IndexCorrupt, match="manifest unreadable"):
        read_manifest(tmp_path)


def test_a_manifest_without_a_retired_list_reads(tmp_path: Path) -> None:
    body = json.loads(StoreManifest(generation=3).to_bytes().rpartition(b"\ncrc32")[0])
    del body["retired"]
    _publish_raw(tmp_path, body)
    got = read_manifest(tmp_path)
    assert got is not None and got.retired == [] and got.generation == 3


# -- ManifestReader: a stat fingerprint vouches for the bytes read -----------------


def _published(root: Path, text: str) -> Path:
    from ctindex.indexing import transaction
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    if not (root / ".git").exists():
        (root / ".git").mkdir(parents=True)
        (root / "kb").mkdir()
        (root / "kb" / "index.md").write_text("# kb\n")
    (root / "kb" / "a.md").write_text(f"# A\n\n{text}\n")
    project = Project.at(root)
    transaction.update(project, load_plan(project))
    return Path(project.index_dir)


def test_manifest_reader_reads_a_settled_manifest_once(tmp_path: Path) -> None:
    import time

    from ctindex.store.generation import ManifestReader, read_manifest

    index_dir = _published(tmp_path, "alpha")
    reader = ManifestReader(index_dir, clock_ns=lambda: time.time_ns() + 60 * 10**9)
    first = reader.read()
    assert all(reader.read() is first for _ in range(5)) and reader.reads == 1
    _published(tmp_path, "beta")  # a new file under the name
    assert reader.read() == read_manifest(index_dir) != first and reader.reads == 2


def test_manifest_reader_reads_a_racily_clean_manifest_every_time(tmp_path: Path) -> None:
    from ctindex.store.generation import ManifestReader

    index_dir = _published(tmp_path, "alpha")
    reader = ManifestReader(index_dir)  # the real clock: published a moment ago
    for _ in range(3):
        reader.read()
    assert reader.reads == 3


def test_manifest_reader_sees_bytes_written_back_in_place_with_the_old_mtime(
    tmp_path: Path,
) -> None:
    import os
    import time

    from ctindex.store.generation import ManifestReader, read_manifest

    index_dir = _published(tmp_path, "alpha")
    old = (index_dir / "MANIFEST").read_bytes()
    index_dir = _published(tmp_path, "beta")
    manifest = index_dir / "MANIFEST"
    reader = ManifestReader(index_dir, clock_ns=lambda: time.time_ns() + 60 * 10**9)
    newer = reader.read()
    st = manifest.stat()
    with manifest.open("r+b") as f:  # the same inode, as `cp` onto it writes
        f.write(old)
        f.truncate()
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
    got = reader.read()
    assert got == read_manifest(index_dir) and got != newer and reader.reads == 2


def test_manifest_reader_reads_every_time_off_a_local_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a network share a stat may come from the client's attribute cache:
    no fingerprint vouches there."""
    import time

    from ctindex.backends import mounts
    from ctindex.store.generation import ManifestReader

    index_dir = _published(tmp_path, "alpha")
    monkeypatch.setattr(mounts, "check_paths", lambda paths: "nfs4: remote filesystem")
    reader = ManifestReader(index_dir, clock_ns=lambda: time.time_ns() + 60 * 10**9)
    for _ in range(3):
        reader.read()
    assert reader.reads == 3
