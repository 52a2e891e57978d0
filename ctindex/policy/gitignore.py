"""`.ct/.gitignore`: the index is derived, so it is kept out of version control.

A committed index restored by a checkout, a stash or a backup under a
running daemon is a stale index the daemon did not write (docs/format.md,
"Keeping the index out of git"). `init --write`, `scopes add` and the first
index build write the file unless the project sets `"gitignore_index":
false`; a `.ct/.gitignore` that exists already is the user's and is never
changed.
"""

from __future__ import annotations

import os

from ctindex.policy.root import CT_DIR

GITIGNORE_NAME = ".gitignore"
GITIGNORE_TEXT = (
    "# The derived index ctindex rebuilds from the documents (docs/format.md):\n"
    "# never commit or restore it, a stale copy under a running daemon is a stale index.\n"
    "okf/\n"
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def write_gitignore(root: str | os.PathLike[str]) -> bool:
    """Create `.ct/.gitignore` ignoring the index, unless one exists (never
    replaced, never appended to). True when written. `.ct` has been checked
    by the caller (ctindex/policy/store_path.py); O_NOFOLLOW refuses a link put in
    the file's place."""
    path = os.path.join(os.fspath(root), CT_DIR, GITIGNORE_NAME)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
    except OSError:
        return False  # exists (the user's), or `.ct` cannot be written: nothing to add
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(GITIGNORE_TEXT)
    return True
