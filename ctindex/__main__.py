"""`python -m ctindex` runs the CLI (the daemon's answer first, ctindex/fast_entry.py)."""

from ctindex.fast_entry import console

console()
