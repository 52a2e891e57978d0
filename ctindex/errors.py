"""Errors the user can cause: each carries one line the CLI prints as is.

Every class maps to an exit code (docs/cli.md); the CLI catches
``CtindexError`` and never shows a traceback for these.
"""

from __future__ import annotations


class CtindexError(Exception):
    """An expected failure with a one-line message naming the file/key/path at fault."""

    exit_code = 2


class PolicyError(CtindexError):
    """The indexing policy cannot be honoured: malformed `.ct/index.jsonc`,
    an unknown provider, a bad pattern (spec §11: exit 2)."""


class UsageError(CtindexError):
    """The command line names something unusable (e.g. ``-C`` is not a folder)."""


class IndexWriteError(CtindexError):
    """Writing the index failed (spec §11: exit 2)."""
