"""The `.ct/okf/` segment store (spec §9; layout in docs/format.md).

Writers: ``update_lock`` + ``read_manifest`` + ``StoreWriter``. Readers:
``with_snapshot`` (no lock, retries across a generation swap).
"""

from ctindex.store.files import IndexCorrupt
from ctindex.store.manifest import SegmentRef, StoreManifest, read_manifest
from ctindex.store.snapshot import SegmentView, Snapshot, open_snapshot, with_snapshot

__all__ = ["IndexCorrupt", "SegmentRef", "SegmentView", "Snapshot", "StoreManifest",
           "open_snapshot", "read_manifest", "with_snapshot"]
