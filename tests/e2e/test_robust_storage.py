"""Robustness, storage integrity (docs/reliability.md, "Storage integrity"):
A damaged index file (truncated, garbage, bit flip, old
format, missing, mismatched) is detected, reported and repaired by a rebuild
from the files; a search never answers from it. Rule: a corrupt cache makes a
query slower, never wrong. Watching is off: these probe the index, not the daemon."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.store.generation import StoreManifest, read_manifest
from ctindex.store.segment import HEADER_SIZE, S_BLOCKS, S_RECORDS
from ctindex.store.segment_read import Segment

Run = Callable[..., Any]
QUERIES = ("event", "customer", "order OR sales", "type:metric")


@pytest.fixture
def project(make_project: Callable[..., Path], run_cli: Run) -> Path:
    root = make_project("ga4", "acme_retail")
    (root / ".ct").mkdir(exist_ok=True)
    (root / ".ct" / "index.jsonc").write_text(json.dumps({"version": 1, "watch": False}))
    assert run_cli("-C", str(root), "update").code == 0
    # A second generation with a tombstone file, so .del files exist too.
    (root / "okf" / "bundles" / "acme_retail" / "metrics" / "revenue.md").unlink()
    assert run_cli("-C", str(root), "update").code == 0
    return root


def index_dir(root: Path) -> Path:
    return root / ".ct" / "okf"


def manifest(root: Path) -> StoreManifest:
    m = read_manifest(index_dir(root))
    assert m is not None
    return m


def search(run_cli: Run, root: Path, query: str, *extra: str) -> dict[str, Any]:
    res = run_cli("-C", str(root), "--json", "search", "--limit", "1000", *extra, "--", query)
    assert res.code in (0, 1), res.err
    doc: dict[str, Any] = json.loads(res.out)
    return doc


def ids(doc: dict[str, Any]) -> set[str]:
    return {r["path"] for r in doc["results"]}


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0xFF
    path.write_bytes(bytes(data))


def first_segment(root: Path) -> Path:
    return index_dir(root) / manifest(root).segments[0].name


def section_span(path: Path, idx: int) -> tuple[int, int]:
    seg = Segment(path)
    try:
        return int(seg.sections[idx][0]), int(seg.sections[idx][1])
    finally:
        seg.close()


def damage_segment_header(root: Path) -> str:
    flip(first_segment(root), 20)
    return "header checksum mismatch"


def damage_segment_truncated(root: Path) -> str:
    path = first_segment(root)
    os.truncate(path, HEADER_SIZE // 2)
    return "truncated"


def damage_segment_garbage(root: Path) -> str:
    path = first_segment(root)
    path.write_bytes(os.urandom(path.stat().st_size))
    return "header checksum mismatch"


def damage_segment_old_format(root: Path) -> str:
    """A valid header CRC over another format number: an old-format file."""
    from ctindex.store.durable import crc

    path = first_segment(root)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 8, 0)  # format field after the 8-byte magic
    struct.pack_into("<I", data, HEADER_SIZE - 4, crc(bytes(data[: HEADER_SIZE - 4])))
    path.write_bytes(bytes(data))
    return "not a ctindex segment of format"


def damage_segment_missing(root: Path) -> str:
    first_segment(root).unlink()
    return "missing"


def damage_segment_mismatched(root: Path) -> str:
    """Another generation's valid segment under the name the manifest expects."""
    from ctindex.indexing.analyse import build_input
    from ctindex.providers import okf_markdown as okf
    from ctindex.store.segment_build import build_segment

    path = first_segment(root)
    doc = okf.parse("x.md", b"# lone\n\nlonely words")
    assert isinstance(doc, okf.Document)
    path.unlink()
    build_segment(path, [build_input(doc)], okf.SEP)
    return "manifest says"


def damage_segment_swapped_same_count(root: Path) -> str:
    """Another valid segment with as many documents, under the expected name."""
    from ctindex.indexing.analyse import build_input
    from ctindex.providers import okf_markdown as okf
    from ctindex.store.segment_build import build_segment

    path = first_segment(root)
    ndocs = Segment(path).ndocs
    docs = []
    for i in range(ndocs):
        doc = okf.parse(f"x{i}.md", b"# other\n\nintruder words")
        assert isinstance(doc, okf.Document)
        docs.append(build_input(doc))
    path.unlink()
    build_segment(path, docs, okf.SEP)
    return "bytes, manifest says"


def damage_dels(root: Path) -> str:
    name = next(s.dels for s in manifest(root).segments if s.dels)
    assert name is not None
    flip(index_dir(root) / name, 9)
    return "tombstone file checksum mismatch"


def damage_diag(root: Path) -> str:
    name = manifest(root).diag
    assert name is not None
    flip(index_dir(root) / name, 3)
    return "diagnostics checksum mismatch"


def damage_file_table(root: Path) -> str:
    name = manifest(root).files
    assert name is not None
    path = index_dir(root) / name
    os.truncate(path, path.stat().st_size // 2)
    return ""


def damage_manifest_garbage(root: Path) -> str:
    (index_dir(root) / "MANIFEST").write_bytes(b"\x00garbage\x00" * 10)
    return "manifest checksum mismatch"


def damage_manifest_truncated(root: Path) -> str:
    path = index_dir(root) / "MANIFEST"
    os.truncate(path, path.stat().st_size // 2)
    return "manifest checksum mismatch"


def damage_manifest_old_format(root: Path) -> str:
    """An index an earlier format wrote (format 3: zlib record blocks):
    valid, checksummed, and never read as the current format."""
    from ctindex.store.durable import crc
    from ctindex.store.generation import FORMAT

    path = index_dir(root) / "MANIFEST"
    body = json.loads(path.read_bytes().rpartition(b"\ncrc32:")[0])
    assert body["format"] == FORMAT == 4
    body["format"] = 3
    data = json.dumps(body, sort_keys=True).encode()
    path.write_bytes(data + b"\ncrc32:%08x\n" % crc(data))
    return "index format 3, this version reads format 4"


HEADER_LEVEL = {  # found by the cheap check every full update and `status` make
    "segment-header-flip": damage_segment_header,
    "segment-truncated": damage_segment_truncated,
    "segment-garbage": damage_segment_garbage,
    "segment-old-format": damage_segment_old_format,
    "segment-missing": damage_segment_missing,
    "segment-mismatched": damage_segment_mismatched,
    "segment-swapped-same-count": damage_segment_swapped_same_count,
    "tombstones-flip": damage_dels,
    "diagnostics-flip": damage_diag,
    "file-table-truncated": damage_file_table,
    "manifest-garbage": damage_manifest_garbage,
    "manifest-truncated": damage_manifest_truncated,
    "manifest-old-format": damage_manifest_old_format,
}


def _verb(damage: str) -> str:
    """An index of an older format is upgraded; every other case is damage, repaired."""
    return "upgraded" if damage == "manifest-old-format" else "repaired"


@pytest.mark.parametrize("damage", sorted(HEADER_LEVEL))
@pytest.mark.slow
def test_robust_storage_damage_is_repaired_by_search(
    project: Path, run_cli: Run, damage: str
) -> None:
    expected = {q: ids(search(run_cli, project, q, "--direct")) for q in QUERIES}
    what = HEADER_LEVEL[damage](project)
    first = search(run_cli, project, QUERIES[0])
    assert ids(first) == expected[QUERIES[0]]
    fresh = first["freshness"]
    if damage == "diagnostics-flip":
        # Diagnostics are not read by a query: the answer is unaffected; the
        # next update (or status) finds and repairs it (test below).
        return
    assert fresh["rebuilt"], fresh
    assert what in fresh["rebuilt"]
    assert fresh["rebuilt"].startswith(f"index {_verb(damage)}: ") or damage.startswith("manifest")
    for q in QUERIES[1:]:
        assert ids(search(run_cli, project, q)) == expected[q], q
    assert run_cli("-C", str(project), "status").code == 0


@pytest.mark.parametrize("damage", sorted(HEADER_LEVEL))
@pytest.mark.slow
def test_robust_storage_damage_is_repaired_by_update(
    project: Path, run_cli: Run, damage: str
) -> None:
    what = HEADER_LEVEL[damage](project)
    if not damage.startswith("manifest"):  # status names the damage before anyone repairs it
        st = json.loads(run_cli("-C", str(project), "--json", "status").out)
        assert st["problem"] and what in st["problem"], st["problem"]
    res = run_cli("-C", str(project), "update")
    assert res.code == 0, res.err
    assert res.out.startswith(f"rebuilt (index {_verb(damage)}: "), res.out
    assert what in res.out
    text = run_cli("-C", str(project), "status").out
    assert f"last reconciliation: rebuild (index {_verb(damage)}: " in text
    st = json.loads(run_cli("-C", str(project), "--json", "status").out)
    assert st["problem"] is None
    for q in QUERIES:
        assert ids(search(run_cli, project, q)) == ids(search(run_cli, project, q, "--direct"))


@pytest.mark.parametrize("section", [S_BLOCKS, S_RECORDS])
def test_robust_storage_deep_damage_found_by_the_query_that_reads_it(
    project: Path, run_cli: Run, section: int
) -> None:
    """A flip inside a term block or record block passes the cheap check
    (header, term index); the query that reads the block verifies its CRC,
    and the search rebuilds instead of answering from it."""
    for seg in manifest(project).segments:
        path = index_dir(project) / seg.name
        start, length = section_span(path, section)
        for off in range(start + 5, start + length, 61):  # every block of the section
            flip(path, off)
    doc = search(run_cli, project, "customer OR event OR order")
    assert ids(doc) == ids(search(run_cli, project, "customer OR event OR order", "--direct"))
    assert doc["freshness"]["mode"] == "fallback"
    assert "checksum mismatch" in (doc["freshness"]["rebuilt"] or "")


def test_robust_storage_damage_found_by_daemon_update_paths(project: Path) -> None:
    """The daemon's narrowed update building on a damaged segment rebuilds
    instead of failing every 5 s forever."""
    from ctindex.indexing import transaction
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    p = Project.at(project)
    plan = load_plan(p)
    damage_segment_header(project)
    (project / "okf" / "bundles" / "ga4" / "new.md").write_text("# New\n\nfresh words zebra\n")
    report = transaction.update_paths(p, plan, ["okf/bundles/ga4/new.md"])
    assert report.rebuilt and (report.reason or "").startswith("index repaired: ")
    assert "header checksum mismatch" in (report.reason or "")


FULL_OR_READ_ONLY = r"""
import json, os, subprocess, sys
root, size = sys.argv[1], int(sys.argv[2])
idx = os.path.join(root, ".ct", "okf")
os.makedirs(idx, exist_ok=True)
out = {}
def ct(*args):
    done = subprocess.run([sys.executable, "-m", "ctindex", "-C", root, *args],
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr.strip()
def manifest():
    with open(os.path.join(idx, "MANIFEST"), "rb") as f:
        return f.read()
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", idx], check=True)
out["first"] = ct("update")
before = manifest()
bulk = os.path.join(root, "okf", "bundles", "ga4", "bulk")
os.makedirs(bulk)
for i in range(400):
    with open(os.path.join(bulk, f"b{i}.md"), "w") as f:
        f.write(f"# Bulk {i}\n\n" + " ".join(f"w{i}x{j}" for j in range(400)) + "\n")
out["full"] = ct("update")
out["full_manifest_intact"] = manifest() == before
out["full_search"] = ct("search", "event")
subprocess.run(["rm", "-rf", bulk], check=True)
out["after_full"] = ct("search", "event")
subprocess.run(["mount", "-o", "remount,ro", idx], check=True)
out["ro_search_unchanged"] = ct("search", "event")
with open(os.path.join(root, "okf", "bundles", "ga4", "new.md"), "w") as f:
    f.write("# New\n\nnewword\n")
ro_before = manifest()
out["ro_update"] = ct("update")
out["ro_manifest_intact"] = manifest() == ro_before
print(json.dumps(out))
"""


@pytest.mark.slow
def test_robust_storage_full_or_read_only_index_folder(project: Path) -> None:
    """A small tmpfs mounted over .ct/okf in a private mount namespace: a full
    index folder and a read-only one make writers exit 2 with one line, the
    published generation stays intact and readable."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    shutil.rmtree(index_dir(project))
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("cannot make a mount namespace here")
    done = subprocess.run(
        ["unshare", "-m", sys.executable, "-c", FULL_OR_READ_ONLY, str(project), str(1 << 20)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["first"][0] == 0, out
    code, err = out["full"]
    assert code == 2 and "No space left on device" in err and len(err.splitlines()) == 1, out
    assert out["full_manifest_intact"]
    assert out["full_search"][0] == 2  # the query cannot bring the index up to date either
    assert out["after_full"][0] == 0, out  # space again: the next command catches up
    assert out["ro_search_unchanged"][0] == 0, out  # readers never write
    code, err = out["ro_update"]
    assert code == 2 and "Read-only file system" in err and len(err.splitlines()) == 1, out
    assert out["ro_manifest_intact"]


def test_robust_storage_update_lock_held_by_a_stopped_writer(
    project: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the soak: a SIGSTOPped daemon holding the update lock made
    every search wait 60 s and exit 2. A query now waits a bounded time and
    answers from the files (fallback, `index busy`); `update` still exits 2
    naming the lock."""
    from ctindex.query import reconcile_here
    from ctindex.store import lock
    from ctindex.store.lock import update_lock

    monkeypatch.setattr(reconcile_here, "QUERY_LOCK_WAIT_S", 0.2)
    monkeypatch.setattr(lock, "DEFAULT_TIMEOUT_S", 0.3)  # `update`'s wait (60 s)
    (project / "okf" / "bundles" / "ga4" / "busy.md").write_text("# Busy\n\nbusyword event\n")
    with update_lock(index_dir(project)):  # another writer, stopped mid-update
        doc = search(run_cli, project, "busyword")
        assert ids(doc) == {"okf/bundles/ga4/busy.md"}
        assert doc["freshness"]["mode"] == "fallback"
        assert doc["freshness"]["reason"] == "index busy: answered from the files"
        assert ids(search(run_cli, project, "event")) == ids(
            search(run_cli, project, "event", "--direct")
        )
        res = run_cli("-C", str(project), "update")
        assert res.code == 2 and "update.lock" in res.err
    doc = search(run_cli, project, "busyword")  # the lock is free again: indexed
    assert doc["freshness"]["mode"] == "reconcile-on-query"
    assert ids(doc) == {"okf/bundles/ga4/busy.md"}
