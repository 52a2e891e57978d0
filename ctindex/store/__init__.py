"""The `.ct/okf/` segment store (layout in docs/format.md).

Writers: ``lock.update_lock`` + ``manifest.read_manifest`` + ``writer.StoreWriter``.
Readers: ``snapshot.with_snapshot`` (no lock, retries across a generation swap).
Nothing is imported here, so a reader pays only for the modules it uses.
"""
