"""`ctindex verify`: deep integrity and drift, exit 0/1/2, --repair, -q
(ctindex/audit/verify.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import oracle
from tests.conftest import CliResult, write_config

MARK = "zqxv7marker"


@pytest.fixture
def indexed(make_project: Callable[..., Path], run_cli: Callable[..., CliResult]) -> Path:
    project = make_project("ga4", "acme_retail")
    write_config(project, "okf/bundles/ga4", "okf/bundles/acme_retail", watch=False)
    assert run_cli("-C", str(project), "-q", "update").code == 0
    return project


def _manifest(project: Path) -> dict:
    data = (project / ".ct" / "okf" / "MANIFEST").read_bytes()
    return json.loads(data.rstrip(b"\n").rpartition(b"\n")[0])


def _segment(project: Path) -> Path:
    m = _manifest(project)
    biggest = max(m["segments"], key=lambda s: s["size"])
    return project / ".ct" / "okf" / biggest["name"]


def test_verify_clean_index_exits_0_and_is_silent_with_q(
    indexed: Path, run_cli: Callable[..., CliResult]
) -> None:
    r = run_cli("-C", str(indexed), "verify")
    assert r.code == 0, r.err
    assert "result: clean" in r.out
    quiet = run_cli("-C", str(indexed), "-q", "verify")
    assert (quiet.code, quiet.out, quiet.err) == (0, "", "")


def test_verify_finds_a_flipped_byte_in_the_middle_of_a_segment(
    indexed: Path, run_cli: Callable[..., CliResult]
) -> None:
    seg = _segment(indexed)
    size = seg.stat().st_size
    with open(seg, "r+b") as fh:  # the middle: postings/records, which no cheap check reads
        fh.seek(size // 2)
        byte = fh.read(1)
        fh.seek(size // 2)
        fh.write(bytes([byte[0] ^ 0x40]))
    # The cheap check (what status/update make) does not see it ...
    status = json.loads(run_cli("-C", str(indexed), "--json", "status").out)
    assert status["problem"] is None
    # ... verify does, names the file and exits 1.
    r = run_cli("-C", str(indexed), "verify")
    assert r.code == 1, r.out + r.err
    assert f"damaged  {seg.name}: " in r.out and "checksum mismatch" in r.out
    assert "1 damaged file" in r.out
    doc = json.loads(run_cli("-C", str(indexed), "--json", "verify").out)
    assert doc["clean"] is False and doc["damage"][0]["file"] == seg.name


def test_verify_finds_a_truncated_file_table(
    indexed: Path, run_cli: Callable[..., CliResult]
) -> None:
    table = indexed / ".ct" / "okf" / _manifest(indexed)["files"]
    subprocess.run(["truncate", "-s", str(table.stat().st_size - 7), str(table)], check=True)
    r = run_cli("-C", str(indexed), "verify")
    assert r.code == 1
    assert f"damaged  {table.name}: file table checksum mismatch" in r.out


def test_verify_finds_a_missing_segment(indexed: Path, run_cli: Callable[..., CliResult]) -> None:
    seg = _segment(indexed)
    seg.unlink()
    r = run_cli("-C", str(indexed), "verify")
    assert r.code == 1
    assert f"damaged  {seg.name}: missing" in r.out
    repaired = run_cli("-C", str(indexed), "verify", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err
    assert "repaired: rebuild" in repaired.out
    assert run_cli("-C", str(indexed), "verify").code == 0


def test_verify_reports_drift_by_path_with_the_daemon_off_and_repairs_it(
    indexed: Path, run_cli: Callable[..., CliResult]
) -> None:
    bundle = indexed / "okf" / "bundles" / "ga4"
    target = sorted(p for p in bundle.rglob("*.md") if p.name != "index.md")[0]
    key = target.relative_to(indexed).as_posix()
    text = target.read_text()
    # Same size and mtime as before (touch -r puts the mtime back): only the
    # full fingerprint (ctime) tells the file changed.
    reference = indexed / "reference.stamp"
    subprocess.run(["touch", "-r", str(target), str(reference)], check=True)
    edited = MARK + text[len(MARK) :]
    target.write_text(edited)
    subprocess.run(["touch", "-r", str(reference), str(target)], check=True)
    reference.unlink()
    removed = sorted(p for p in bundle.rglob("*.md") if p.name != "index.md")[1]
    removed.unlink()
    before = json.loads(
        (indexed / ".ct" / "okf" / "MANIFEST").read_bytes().rstrip(b"\n").rpartition(b"\n")[0]
    )["generation"]

    r = run_cli("-C", str(indexed), "verify")
    assert r.code == 1, r.out + r.err
    assert f"drift    changed    {key}" in r.out
    assert f"drift    removed    {removed.relative_to(indexed).as_posix()}" in r.out
    assert _manifest(indexed)["generation"] == before  # verify writes nothing
    # A search reconciles first (watch off), so it agrees with the oracle.
    hits = json.loads(run_cli("-C", str(indexed), "--json", "search", "--limit", "50", MARK).out)
    assert hits["freshness"]["mode"] == "reconcile-on-query"
    assert {h["path"] for h in hits["results"]} == oracle.containing(indexed, MARK)

    target.write_text(MARK + " again " + text)  # drift again, then repair it
    r = run_cli("-C", str(indexed), "verify", "--repair")
    assert r.code == 0, r.out + r.err
    assert "repaired: update" in r.out and f"drift    changed    {key}" in r.out
    assert run_cli("-C", str(indexed), "verify").code == 0


def test_verify_cannot_run_without_an_index_exit_2(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult]
) -> None:
    project = make_project("ga4")
    write_config(project, "okf/bundles/ga4", watch=False)
    r = run_cli("-C", str(project), "verify")
    assert r.code == 2
    assert r.err.startswith("ctindex: cannot verify: no index at ") and r.err.count("\n") == 1
    assert "Traceback" not in r.err
    repaired = run_cli("-C", str(project), "verify", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err


def test_verify_with_a_malformed_config_is_exit_2_one_line(
    indexed: Path, run_cli: Callable[..., CliResult]
) -> None:
    (indexed / ".ct" / "index.jsonc").write_text("{version: 1, watch: 3}")
    r = run_cli("-C", str(indexed), "verify")
    assert r.code == 2 and r.err.count("\n") == 1 and "watch" in r.err


@pytest.mark.slow
def test_verify_reads_the_whole_segment(indexed: Path) -> None:
    """Every byte is read: a flip anywhere past the header is found (one
    flip per 97-byte step across the file)."""
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.segment_read import Segment

    seg_path = _segment(indexed)
    original = seg_path.read_bytes()
    missed = []
    for pos in range(0, len(original), 97):
        damaged = bytearray(original)
        damaged[pos] ^= 0x01
        seg_path.write_bytes(bytes(damaged))
        try:
            seg = Segment(seg_path)
            try:
                seg.verify_all()
            finally:
                seg.close()
        except IndexCorrupt:
            continue
        missed.append(pos)
    seg_path.write_bytes(original)
    assert missed == []
