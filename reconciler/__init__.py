"""Generic stat/hash manifest differ: walks, fingerprints, diffs. Knows nothing of OKF."""

from reconciler.diff import DEFAULT_GRANULARITY_NS, ReconcileResult, reconcile
from reconciler.manifest import Entry, Fingerprint, Manifest, ManifestCorrupt
from reconciler.report import Bucket, PassMetrics, WalkReport
from reconciler.walk import FsOps, PathFilter

__all__ = [
    "DEFAULT_GRANULARITY_NS",
    "Bucket",
    "Entry",
    "Fingerprint",
    "FsOps",
    "Manifest",
    "ManifestCorrupt",
    "PassMetrics",
    "PathFilter",
    "ReconcileResult",
    "WalkReport",
    "reconcile",
]
