"""`python -m ctindex` runs the CLI."""

from ctindex.cli import main

raise SystemExit(main())
