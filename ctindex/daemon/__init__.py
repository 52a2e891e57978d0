"""The per-project watcher daemon (docs/daemon.md): `python -m ctindex.daemon --project DIR`."""
