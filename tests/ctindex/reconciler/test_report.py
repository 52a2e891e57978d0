"""What one pass reports (ctindex/reconciler/report.py): counts that never drop an
occurrence, bounded samples, and plain dictionaries for JSON."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctindex.reconciler.report import SAMPLE_SIZE, Bucket, PassMetrics, WalkReport


@given(st.lists(st.text(max_size=5), max_size=3 * SAMPLE_SIZE))
def test_a_bucket_counts_everything_and_keeps_the_first_few(keys: list[str]) -> None:
    bucket = Bucket()
    for key in keys:
        bucket.add(key)
    assert bucket.count == len(keys)
    assert bucket.sample == keys[:SAMPLE_SIZE]


def test_buckets_do_not_share_their_sample() -> None:
    one, two = Bucket(), Bucket()
    one.add("a")
    assert two.sample == [] and two.count == 0


def test_a_fresh_walk_report_is_clean_and_its_buckets_are_distinct() -> None:
    report = WalkReport()
    assert report.is_clean()
    buckets = [getattr(report, f.name) for f in fields(report)]
    assert len({id(b) for b in buckets}) == len(buckets) == 7


@pytest.mark.parametrize("name", [f.name for f in fields(WalkReport)])
def test_any_one_occurrence_makes_the_report_unclean(name: str) -> None:
    report = WalkReport()
    getattr(report, name).add("okf/x.md")
    assert not report.is_clean()
    as_dict = report.as_dict()
    assert as_dict[name] == {"count": 1, "sample": ["okf/x.md"]}
    assert all(v == {"count": 0, "sample": []} for k, v in as_dict.items() if k != name)


def test_walk_report_as_dict_is_json_with_undecodable_names() -> None:
    report = WalkReport()
    report.undecodable.add("bad\udcff.md")
    text = json.dumps(report.as_dict(), ensure_ascii=True)
    assert json.loads(text)["undecodable"]["sample"] == ["bad\udcff.md"]
    assert set(json.loads(text)) == {f.name for f in fields(WalkReport)}


def test_pass_metrics_bump_per_kind_and_as_dict() -> None:
    metrics = PassMetrics()
    metrics.bump("added")
    metrics.bump("added", 4)
    metrics.bump("removed", 0)
    metrics.files_hashed += 2
    metrics.bytes_hashed += 10
    assert metrics.counts == {"added": 5, "removed": 0}
    got = metrics.as_dict()
    assert got == {
        "entries_visited": 0,
        "dirs_visited": 0,
        "files_hashed": 2,
        "bytes_hashed": 10,
        "duration_ms": 0.0,
        "counts": {"added": 5, "removed": 0},
    }
    counts = got["counts"]
    assert isinstance(counts, dict)
    counts["added"] = 99  # a copy: the report is not changed through it
    assert metrics.counts["added"] == 5
    assert PassMetrics().counts == {}  # no shared default
