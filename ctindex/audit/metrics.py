"""`--metrics-file PATH`: the node_exporter textfile-collector format.

A cron job runs `ctindex verify --metrics-file /var/lib/node_exporter/ctindex.prom`
(or `update`/`rebuild`/`status`) and Prometheus scrapes the result. The file
is replaced atomically (temp sibling, fsync, rename), so the collector never
reads half of one. Units follow Prometheus conventions (seconds, bytes), not
the milliseconds of `--json`. Every sample carries the labels `project` and
`command`. `ctindex_last_success_timestamp_seconds` survives a failed run: it
is carried over from the file being replaced (same project and command), so
an alert on its age fires when the audits keep failing.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ctindex.base.durable import WriteFailed, atomic_write, hidden_tmp_name
from ctindex.errors import CtindexError

if TYPE_CHECKING:
    from ctindex.audit.verify import Audit
    from ctindex.indexing.transaction import UpdateReport
    from ctindex.policy.project import Project

PREFIX = "ctindex_"
LAST_SUCCESS = "last_success_timestamp_seconds"

# name -> (type, help); every metric a file may hold, in this order.
METRICS: dict[str, tuple[str, str]] = {
    "success": ("gauge", "1 when the command found nothing wrong, else 0"),
    LAST_SUCCESS: ("gauge", "Unix time of the last run of this command that succeeded"),
    "run_timestamp_seconds": ("gauge", "Unix time of this run"),
    "duration_seconds": ("gauge", "wall time of the command"),
    "reconcile_duration_seconds": ("gauge", "wall time of the reconciliation pass"),
    "entries_visited": ("gauge", "folder entries listed by the reconciliation"),
    "generation": ("gauge", "published index generation"),
    "documents": ("gauge", "indexed documents"),
    "segments": ("gauge", "segment files of the published generation"),
    "tombstones": ("gauge", "tombstoned documents"),
    "source_bytes": ("gauge", "logical bytes of the indexed documents"),
    "index_bytes": ("gauge", "bytes of the index folder, by kind (live, retired)"),
    "provider_errors": ("gauge", "files the provider could not index"),
    "frontmatter_warnings": ("gauge", "files indexed despite malformed frontmatter"),
    "missing_roots": ("gauge", "configured scope roots that are missing"),
    "drift_paths": ("gauge", "paths whose index entry does not match the file"),
    "damaged_files": ("gauge", "index files failing an integrity check"),
    "changes": ("gauge", "paths added, changed or removed by this run, by kind"),
}

Sample = tuple[str, dict[str, str], float]


class MetricsWriteError(CtindexError):
    """The metrics file cannot be written (exit 2)."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def render(samples: Iterable[Sample], base: dict[str, str]) -> str:
    grouped: dict[str, list[tuple[dict[str, str], float]]] = {}
    for name, labels, value in samples:
        grouped.setdefault(name, []).append(({**base, **labels}, value))
    lines: list[str] = []
    for name, (kind, text) in METRICS.items():
        if name not in grouped:
            continue
        full = PREFIX + name
        lines.append(f"# HELP {full} {text}")
        lines.append(f"# TYPE {full} {kind}")
        for labels, value in grouped[name]:
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{full}{{{inner}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def _previous_success(path: str, base: dict[str, str]) -> float | None:
    """The last-success sample of the same project and command in the file
    being replaced (a small file of our own format; anything else is ignored)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return None
    want = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(base.items()))
    pattern = re.compile(rf"^{PREFIX}{LAST_SUCCESS}\{{(.*)\}} (\S+)$", re.MULTILINE)
    for match in pattern.finditer(text):
        if match.group(1) == want:
            try:
                return float(match.group(2))
            except ValueError:
                return None
    return None


def write_textfile(path: str, built: tuple[list[Sample], dict[str, str], bool]) -> None:
    """Write the samples atomically; the last-success time is now on success,
    else the one carried over from the file being replaced (if any)."""
    samples, base, ok = built
    now = time.time()
    last = now if ok else _previous_success(path, base)
    samples = [
        ("success", {}, 1 if ok else 0),
        ("run_timestamp_seconds", {}, round(now, 3)),
        *samples,
    ]
    if last is not None:
        samples.insert(1, (LAST_SUCCESS, {}, round(last, 3)))
    data = render(samples, base).encode()
    target = Path(os.path.abspath(path))
    try:
        # Hidden while written: a textfile collector skips dot files.
        atomic_write(target, data, mode=0o644, tmp_name=hidden_tmp_name(target))
    except WriteFailed as exc:
        raise MetricsWriteError(
            f"{path}: cannot write the metrics file ({exc.strerror or exc})"
        ) from exc


def _base(project: Project, command: str) -> dict[str, str]:
    return {"project": os.fspath(project.root), "command": command}


def _index_samples(index: Mapping[str, object]) -> list[Sample]:
    """Samples from a `status` document's index part."""
    out: list[Sample] = []
    generation = index.get("generation")
    if isinstance(generation, (int, float)):  # None: no index yet
        out.append(("generation", {}, generation))
    for name in (
        "documents",
        "segments",
        "tombstones",
        "source_bytes",
        "provider_errors",
        "frontmatter_warnings",
    ):
        value = index.get(name)
        if isinstance(value, int):
            out.append((name, {}, value))
    for kind in ("live", "retired"):
        value = index.get(f"index_{kind}_bytes")
        if isinstance(value, int):
            out.append(("index_bytes", {"kind": kind}, value))
    return out


def status_metrics(
    project: Project, doc: Mapping[str, object], ok: bool
) -> tuple[list[Sample], dict[str, str], bool]:
    return _index_samples(doc), _base(project, "status"), ok


def update_metrics(
    project: Project, command: str, report: UpdateReport, missing_roots: int, ok: bool
) -> tuple[list[Sample], dict[str, str], bool]:
    samples: list[Sample] = [
        ("duration_seconds", {}, report.duration_ms / 1000),
        ("reconcile_duration_seconds", {}, report.reconcile_ms / 1000),
        ("entries_visited", {}, report.entries_visited),
        ("generation", {}, report.generation),
        ("documents", {}, report.documents),
        ("provider_errors", {}, report.errors),
        ("frontmatter_warnings", {}, report.warnings),
        ("missing_roots", {}, missing_roots),
    ]
    for kind in ("added", "changed", "removed", "renamed", "metadata_only"):
        samples.append(("changes", {"kind": kind}, getattr(report, kind)))
    samples.extend(_sizes(project))
    return samples, _base(project, command), ok


def _sizes(project: Project) -> list[Sample]:
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.gc import index_bytes
    from ctindex.store.generation import read_manifest

    try:
        m = read_manifest(project.index_dir)
    except IndexCorrupt:
        m = None
    out: list[Sample] = []
    if m is not None:
        out += [
            ("segments", {}, len(m.segments)),
            ("tombstones", {}, m.tombstones),
            ("source_bytes", {}, m.source_bytes),
        ]
    live, retired = index_bytes(project.index_dir, m)
    out += [("index_bytes", {"kind": "live"}, live), ("index_bytes", {"kind": "retired"}, retired)]
    return out


def verify_metrics(
    project: Project, found: Audit, after: Audit, repaired: Mapping[str, object] | None
) -> tuple[list[Sample], dict[str, str], bool]:
    final = after if repaired is not None else found
    samples: list[Sample] = [
        (
            "duration_seconds",
            {},
            (found.duration_ms + (after.duration_ms if repaired else 0)) / 1000,
        ),
        ("reconcile_duration_seconds", {}, final.reconcile_ms / 1000),
        ("entries_visited", {}, final.entries_visited),
        ("documents", {}, final.documents),
        ("segments", {}, final.segments),
        ("drift_paths", {}, len(final.drift)),
        ("damaged_files", {}, len(final.damage)),
    ]
    if final.generation is not None:
        samples.append(("generation", {}, final.generation))
    return samples, _base(project, "verify"), final.clean
