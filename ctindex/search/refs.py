"""IDs that name one concept whatever the scopes: a result's `ref`.

A concept ID is unique within its scope only: two bundles may each hold
`tables/events_`. Where another scope holds the same ID, the result's ref
is `SCOPE:ID` (its scope root, a colon, the ID), which `show`, `Index.get`
and the MCP `get_concept` take (ctindex/service/concepts.py `resolve`);
elsewhere the ref is the ID itself, so single-scope projects see no change.

Deciding takes no plan, so the search fast path stays fast: the scope roots
are the generation's own (its manifest names them), and a concept file sits
at `ROOT/ID + suffix` in every scope, the suffix being what its own key
adds to its ID (`.md`). One lstat per result and other scope, on the
results shown only. A file there that the policy excludes still counts as
shared: the ref is then longer than needed, never ambiguous.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence

SEPARATOR = ":"


def ref(
    project_root: str | os.PathLike[str], scopes: Sequence[str], cid: str, scope: str, key: str
) -> str:
    """The ref of the concept `cid` of scope root `scope` at `key`."""
    if len(scopes) < 2:
        return cid
    head = f"{scope}/{cid}" if scope else cid
    if not key.startswith(head):
        return cid  # a provider whose keys are not ROOT/ID+suffix: nothing to compare
    suffix = key[len(head) :]
    for other in scopes:
        if other == scope:
            continue
        twin = f"{other}/{cid}{suffix}" if other else f"{cid}{suffix}"
        try:
            st = os.lstat(os.path.join(project_root, twin))
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            return f"{scope}{SEPARATOR}{cid}"
    return cid


def refs(
    project_root: str | os.PathLike[str],
    scopes: Sequence[str],
    found: Iterable[tuple[str, str, str]],
) -> list[str]:
    """`ref` of each (ID, scope root, key)."""
    return [ref(project_root, scopes, cid, scope, key) for cid, scope, key in found]


def split(plan_roots: Iterable[str], wanted: str) -> tuple[str, str] | None:
    """(scope root, ID) when `wanted` is a ref `SCOPE:ID` of one of
    `plan_roots` (the longest root that fits), else None."""
    best: str | None = None
    for root in plan_roots:
        if wanted.startswith(root + SEPARATOR) and (best is None or len(root) > len(best)):
            best = root
    if best is None:
        return None
    return best, wanted[len(best) + len(SEPARATOR) :]
