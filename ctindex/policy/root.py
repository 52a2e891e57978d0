"""Where a project's root is: the nearest folder holding `.ct/` or `.git`.

Standard library only: ctindex/fast_entry.py finds the root with this rule before
anything else of ctindex is imported (docs/decisions/perf.md, "Query path"),
and ctindex/policy/project.py builds `Project.discover` on it, so the fast
console path and the full CLI can never disagree about which project a
folder belongs to.
"""

from __future__ import annotations

import os

CT_DIR = ".ct"
GIT_MARKER = ".git"  # a folder, or a file (worktrees, submodules)


def find_root(here: str) -> str | None:
    """The nearest folder at or above `here` holding `.ct/` or `.git` (a
    `.git` file counts: worktrees, submodules); None when there is none.
    One lstat pair per level, so bounded by the path's depth."""
    probe = here
    while True:
        if os.path.isdir(os.path.join(probe, CT_DIR)) or os.path.lexists(
            os.path.join(probe, GIT_MARKER)
        ):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
