"""`python -m ctindex` runs the CLI."""

from ctindex.cli import console

console()
