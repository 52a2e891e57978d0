"""The record of the last reconciliation passes, for `status`.

A pass that publishes a generation records itself in MANIFEST too; these
files also cover passes that published nothing. Best effort: a read-only
share skips them, and nothing else depends on them.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ctindex.errors import IndexWriteError
from ctindex.store.durable import atomic_write, read_all

if TYPE_CHECKING:
    from ctindex.base.jsontypes import JSONObject
    from ctindex.store.generation import StoreManifest

STATUS_NAME = "last-reconcile.json"  # best-effort record of passes that published nothing
# The same for full passes only (update, rebuild, daemon audits): a narrowed
# pass after one must not hide when the tree was last compared in full.
FULL_STATUS_NAME = "last-full-reconcile.json"


def record_pass(index_dir: Path, info: JSONObject) -> None:
    """Remember the last pass (and the last full one)."""
    names = [STATUS_NAME] if info.get("kind") == "narrowed" else [STATUS_NAME, FULL_STATUS_NAME]
    data = json.dumps(info).encode()
    for name in names:
        with contextlib.suppress(IndexWriteError):
            atomic_write(index_dir / name, data, sync=False)


def last_pass(index_dir: Path, m: StoreManifest | None, *, full: bool = False) -> JSONObject:
    """The most recent reconciliation recorded (manifest or status file);
    with `full`, the most recent full one (narrowed passes skipped)."""
    best: JSONObject = dict(m.reconcile) if m is not None else {}
    if full and best.get("kind") == "narrowed":
        best = {}
    try:
        got = json.loads(read_all(index_dir / (FULL_STATUS_NAME if full else STATUS_NAME)))
        if isinstance(got, dict) and _at_ns(got) > _at_ns(best):
            best = got
    except (OSError, ValueError):
        pass
    return best


def _at_ns(info: JSONObject) -> int | float:
    """When a recorded pass ran; 0 when it does not say (a record damaged
    by hand loses to any other instead of failing `status`)."""
    at = info.get("at_ns", 0)
    return at if isinstance(at, (int, float)) else 0
