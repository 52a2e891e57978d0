"""`python -m ctindex` runs the CLI (the daemon's answer first, ctindex/quick.py)."""

from ctindex.quick import console

console()
