"""`--metrics-file`: the node_exporter textfile format, parsed with the
Prometheus client library's own text-format parser (ctindex/audit/metrics.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import CliResult, write_config


def _samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            labels = tuple(
                sorted((k, v) for k, v in s.labels.items() if k not in ("project", "command"))
            )
            out[(s.name, labels)] = s.value
    return out


def test_cron_style_verify_writes_a_valid_textfile(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    project = make_project("ga4")
    write_config(project, "okf/bundles/ga4", watch=False)
    prom = tmp_path / "textfile" / "ctindex.prom"
    prom.parent.mkdir()
    # As cron would run it: a real process, quiet, nothing on stdout when clean.
    run = [sys.executable, "-m", "ctindex", "-C", str(project), "-q"]
    done = subprocess.run(
        [*run, "update", "--metrics-file", str(prom)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    up = _samples(prom)
    assert up[("ctindex_success", ())] == 1
    assert up[("ctindex_documents", ())] > 0 and up[("ctindex_segments", ())] == 1
    assert up[("ctindex_index_bytes", (("kind", "live"),))] > 0
    assert ("ctindex_changes", (("kind", "added"),)) in up

    done = subprocess.run(
        [*run, "verify", "--metrics-file", str(prom)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "")
    ok = _samples(prom)
    assert ok[("ctindex_success", ())] == 1 and ok[("ctindex_drift_paths", ())] == 0
    assert ok[("ctindex_damaged_files", ())] == 0 and ok[("ctindex_duration_seconds", ())] > 0
    last_ok = ok[("ctindex_last_success_timestamp_seconds", ())]
    assert last_ok == ok[("ctindex_run_timestamp_seconds", ())]
    assert list(prom.parent.iterdir()) == [prom]  # no temp file left behind

    target = next(
        p for p in (project / "okf" / "bundles" / "ga4").rglob("*.md") if p.name != "index.md"
    )
    target.write_text("changed\n")
    done = subprocess.run(
        [*run, "verify", "--metrics-file", str(prom)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    bad = _samples(prom)
    assert bad[("ctindex_success", ())] == 0 and bad[("ctindex_drift_paths", ())] == 1
    # The last success survives the failed run, so an alert on its age fires.
    assert bad[("ctindex_last_success_timestamp_seconds", ())] == last_ok
    assert bad[("ctindex_run_timestamp_seconds", ())] >= last_ok


def test_metrics_file_in_a_missing_folder_is_one_line_exit_2(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    project = make_project("ga4")
    write_config(project, "okf/bundles/ga4", watch=False)
    r = run_cli("-C", str(project), "status", "--metrics-file", str(tmp_path / "no" / "x.prom"))
    assert r.code == 2 and r.err.count("\n") == 1
    assert r.err.startswith(f"ctindex: {tmp_path / 'no' / 'x.prom'}: cannot write the metrics file")


def test_status_samples_the_index_it_reports(
    make_project: Callable[..., Path], run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """`status --metrics-file` samples the status document: no generation
    before the first update, then the published one and its sizes."""
    project = make_project("ga4")
    write_config(project, "okf/bundles/ga4", watch=False)
    prom = tmp_path / "status.prom"
    r = run_cli("-C", str(project), "status", "--metrics-file", str(prom))
    assert r.code == 0, r.err
    before = _samples(prom)
    assert ("ctindex_generation", ()) not in before and before[("ctindex_documents", ())] == 0
    assert before[("ctindex_success", ())] == 1
    assert run_cli("-C", str(project), "-q", "update").code == 0
    r = run_cli("-C", str(project), "--json", "status", "--metrics-file", str(prom))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    after = _samples(prom)
    assert after[("ctindex_generation", ())] == doc["generation"] > 0
    assert after[("ctindex_documents", ())] == doc["documents"] > 0
    assert after[("ctindex_index_bytes", (("kind", "live"),))] == doc["index_live_bytes"]
