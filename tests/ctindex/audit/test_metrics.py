"""`--metrics-file`: the node_exporter textfile format, parsed with the
Prometheus client library's own text-format parser (ctindex/audit/metrics.py)."""

from __future__ import annotations

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
