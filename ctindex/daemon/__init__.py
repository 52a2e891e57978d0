"""The per-project watcher daemon (spec §6 to §10): `python -m ctindex.daemon --project DIR`."""
