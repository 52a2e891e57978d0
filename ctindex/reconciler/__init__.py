"""Generic stat/hash manifest differ: walks, fingerprints, diffs. Knows nothing of OKF.

The names below load on first use (PEP 562), so that importing the light
``reconciler.fingerprint`` (the search fast path does, on every query) does
not pay for the differ, the walker and their imports.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing `typing`: a daemon-answered search
# loads this package for ctindex/reconciler/platform_features.py alone
# (ctindex/ipc/peer.py) and must stay light (tests/ctindex/test_fast_entry.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ctindex.reconciler.diff import ReconcileResult, reconcile
    from ctindex.reconciler.fingerprint import DEFAULT_GRANULARITY_NS, Fingerprint
    from ctindex.reconciler.manifest import Entry, Manifest
    from ctindex.reconciler.report import Bucket, PassMetrics, WalkReport
    from ctindex.reconciler.walk import FsOps, PathFilter

_HOME = {
    "DEFAULT_GRANULARITY_NS": "fingerprint",
    "Fingerprint": "fingerprint",
    "ReconcileResult": "diff",
    "reconcile": "diff",
    "Entry": "manifest",
    "Manifest": "manifest",
    "Bucket": "report",
    "PassMetrics": "report",
    "WalkReport": "report",
    "FsOps": "walk",
    "PathFilter": "walk",
}

__all__ = [
    "DEFAULT_GRANULARITY_NS",
    "Bucket",
    "Entry",
    "Fingerprint",
    "FsOps",
    "Manifest",
    "PassMetrics",
    "PathFilter",
    "ReconcileResult",
    "WalkReport",
    "reconcile",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value
