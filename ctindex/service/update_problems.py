"""What a published generation could not take in, by kind: provider errors,
frontmatter warnings and missing scope roots, each file named. `ctindex
update`/`rebuild` print them (and fail on them with `--strict`), and the
Python API's `UpdateReport.problems` carries them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ctindex.base.output import path_messages
from ctindex.policy.project import Project

# The kinds, in the order they are reported (`--strict=KINDS` names them).
PROBLEM_KINDS = ("errors", "warnings", "missing-roots")

# kind -> [{path, message}], each list sorted by path
Problems = dict[str, list[dict[str, str]]]


def problems(project: Project, missing_roots: Iterable[str]) -> Problems:
    """The published generation's diagnostics (its `diag` file) and the
    configured scope roots the update did not find."""
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.generation import read_diag, read_manifest

    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}
    index_dir = Path(project.index_dir)
    try:
        m = read_manifest(index_dir)
        if m is not None and m.diag and (m.errors or m.warnings):
            errors, warnings = read_diag(index_dir / m.diag)
    except (IndexCorrupt, OSError, ValueError, KeyError):
        pass  # counted in the report all the same; `verify` names the damage
    return {
        "errors": path_messages(errors),
        "warnings": path_messages(warnings),
        "missing-roots": [
            {"path": r, "message": "scope root missing, a symlink or not a folder"}
            for r in sorted(missing_roots)
        ],
    }


def json_problems(found: Problems) -> Problems:
    """The kinds as JSON fields name them (`missing_roots`)."""
    return {kind.replace("-", "_"): items for kind, items in found.items()}
