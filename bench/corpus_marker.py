"""A generated corpus is reused only while it is what its generator made.

Each benchmark generates its tree once into the temp folder, which takes
minutes, and later runs reuse it. The marker beside the tree (outside it,
so never part of a walk) records the generator's parameters and what was
written: the number of files and their bytes. A later run reuses the tree
only when the parameters are the same and a walk finds the same count and
bytes. So a harness that rewrote the folder, an interrupted generation, or
a changed generator makes the bench generate again instead of quietly
measuring something else.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any


def marker_of(root: Path) -> Path:
    return root.with_name(root.name + ".complete")


def reuse(root: Path, tree: Path, params: dict[str, Any]) -> dict[str, Any] | None:
    """The marker's record when `tree` (under `root`) is as sealed with
    `params`; else None, with `root` and its marker removed, to generate again."""
    marker = marker_of(root)
    try:
        record = json.loads(marker.read_text())
    except (OSError, ValueError):
        record = None
    if (
        isinstance(record, dict)
        and record.get("params") == params
        and tree.is_dir()
        and tally(tree) == (record.get("files"), record.get("bytes"))
    ):
        return record
    marker.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    return None


def seal(root: Path, tree: Path, params: dict[str, Any], **extra: Any) -> None:
    """Record that `tree` is complete: `params`, its file count and bytes, `extra`."""
    files, size = tally(tree)
    record = {"params": params, "files": files, "bytes": size, **extra}
    marker_of(root).write_text(json.dumps(record))


def tally(tree: Path) -> tuple[int, int]:
    """(regular files, their bytes) under `tree`, symlinks not followed."""
    files = size = 0
    stack = [str(tree)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    files += 1
                    size += entry.stat(follow_symlinks=False).st_size
    return files, size
