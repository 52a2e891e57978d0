"""Concepts by ID, read from their files when asked (`ctindex show`,
`Index.get`, the MCP `get_concept` tool): which file an ID names, the file
read safely and handed to its scope's provider (ctindex/providers/base.py
`read_concept`: what the format is, only the provider knows), and the
closest IDs when none matches."""

from __future__ import annotations

import os
import stat as stat_mod
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ctindex.errors import AmbiguousConcept, ConceptNotFound, ConceptUnreadable
from ctindex.policy.project import is_normal_key, unrepresentable
from ctindex.reconciler.hashing import FILE_FLAGS
from ctindex.search.refs import split
from ctindex.service.types import Concept, Link, freshness_of

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.providers.base import ConceptLink, Provider
    from ctindex.query.statement import Opener
    from ctindex.store.snapshot import Snapshot

# (concept ID, key) of every concept of the index
KnownIds = list[tuple[str, str]]

SUGGESTIONS = 5  # close matches named when no concept has the ID


def get_concept(
    plan: Plan,
    wanted: str,
    scope: str | None = None,
    open_generation: Opener[KnownIds] | None = None,
) -> Concept:
    """The concept `wanted` names (`Index.get`, `ctindex show`), read from
    its file. ConceptNotFound names the closest IDs of a fresh index (read
    through `open_generation` when given); AmbiguousConcept the candidates."""
    found = resolve(plan, wanted, scope)
    if not found:
        known = fresh_ids(plan, open_generation)
        raise ConceptNotFound(wanted, suggestions(plan, known, wanted, scope))
    if len(found) > 1:
        raise AmbiguousConcept(wanted, tuple(key for _root, key in found))
    root, key = found[0]
    return read_concept(plan, root, key)


def fresh_ids(plan: Plan, open_generation: Opener[KnownIds] | None = None) -> KnownIds:
    """(concept ID, key) of every concept of a fresh index, in index order;
    none when the index is busy or read-only (only suggestions depend on
    it: none rather than a wait or a failure)."""
    from ctindex.query import freshness
    from ctindex.store.lock import IndexBusy, IndexReadOnly

    try:
        return freshness.fresh_answer(
            plan.project,
            lambda: plan,
            lambda snap: ids_in(plan, snap),
            open_generation=open_generation,
        ).value
    except (IndexBusy, IndexReadOnly):
        return []


def ids_in(plan: Plan, snap: Snapshot) -> KnownIds:
    """(concept ID, key) of every live document of a generation."""
    from ctindex.providers import load

    out = []
    for view in snap.views:
        for d, key in enumerate(view.segment.keys()):
            if d in view.deleted:
                continue
            found = plan.find_scope(key)
            if found is not None:
                scope = found[0]
                out.append((load(scope.provider).concept_id(key, scope.root), key))
    return out


def _index_provider() -> Provider:
    from ctindex.providers import INDEX_PROVIDER, load

    return load(INDEX_PROVIDER)


def _bare(text: str, provider: Provider) -> str:
    """`text` without the provider's file-name suffix (an ID given as a path)."""
    for suffix in provider.info.extensions:
        if text.endswith(suffix):
            return text[: -len(suffix)]
    return text


def resolve(plan: Plan, wanted: str, scope: str | None = None) -> list[tuple[str, str]]:
    """(scope root, key) of each included concept `wanted` names: as a
    concept ID in each scope (the first scope containing a path decides it,
    as for indexing), or as a project-relative path. Costs one decision per
    scope; never lists a folder.

    The name exactly as given is tried first: on POSIX a backslash, a tab
    or an edge space is part of a file name, and `search --ids` lists such
    IDs. Only when it names nothing is the forgiving reading tried: spaces
    pasted around it dropped, and a Windows separator read as a slash."""
    given = wanted if isinstance(wanted, str) else ""
    found = _resolve_reading(plan, given, scope)
    if found:
        return found
    # A ref `SCOPE:ID` as search lists it where two scopes hold the ID
    # (ctindex/search/refs.py); its scope must agree with `scope` if given.
    qualified = split(
        (s.root for s in plan.scopes if scope is None or s.root == scope.strip("/")), given
    )
    if qualified is not None:
        found = _resolve_reading(plan, qualified[1], qualified[0])
        if found:
            return found
    forgiving = given.strip().replace("\\", "/")
    if forgiving == given:
        return found
    return _resolve_reading(plan, forgiving, scope)


def _resolve_reading(plan: Plan, raw: str, scope: str | None) -> list[tuple[str, str]]:
    """`resolve` for one reading of the name."""
    from ctindex.providers import load

    want_root = scope.strip("/") if scope is not None else None
    named = [(load(s.provider), s.root) for s in plan.scopes]
    named.append((_index_provider(), ""))  # a project-relative path
    keys = []
    for provider, root in named:
        text = _bare(raw, provider).strip("/")
        if text and is_normal_key(text) and unrepresentable(text) is None:
            keys.append(provider.concept_key(text, root))
    path = raw.strip("/")
    if (
        path not in keys
        and is_normal_key(path)
        and unrepresentable(path) is None
        and any(p.info.claims_extension(path) for p, _r in named)
    ):
        keys.append(path)  # a project-relative path with another provider's suffix
    out: list[tuple[str, str]] = []
    for key in keys:
        if any(key == k for _r, k in out):
            continue
        found = plan.find_scope(key)
        if found is None or (want_root is not None and found[0].root != want_root):
            continue
        try:  # a decision describes absent paths too: only an existing file is a concept
            st = os.lstat(plan.project.path(key))
        except OSError:
            continue
        if plan.project.symlinked_parent(key) is None and plan.decide_key(key, st).included:
            out.append((found[0].root, key))
    return out


def read_concept(plan: Plan, root: str, key: str) -> Concept:
    """Read and parse one included concept file, opening nothing a symlink
    points to and never blocking on a special file."""
    from ctindex.providers import INDEX_PROVIDER, load
    from ctindex.providers.base import ProviderError
    from ctindex.query.statement import read_when_asked

    found = plan.find_scope(key)
    provider = load(found[0].provider if found else INDEX_PROVIDER)
    t0 = time.perf_counter()
    data = _read_bounded(plan, key, provider, root)
    read = provider.read_concept(key, data, root)
    if isinstance(read, ProviderError):
        raise ConceptUnreadable(read.message)
    doc = read.document
    fresh = freshness_of(read_when_asked(_ms(time.perf_counter() - t0)))
    return Concept(
        doc.concept_id,
        doc.scope,
        key,
        doc.title,
        doc.type,
        doc.description,
        tuple(doc.tags),
        read.frontmatter,
        doc.body,
        read.text,
        tuple(_links(plan, root, read.links)),
        read.warning,
        fresh,
    )


def _read_bounded(plan: Plan, key: str, provider: Provider, root: str) -> bytes:
    """The file's bytes, at most max_file_bytes of them: ConceptNotFound when
    it is gone, ConceptUnreadable when it cannot be opened, is not a regular
    file, was replaced while opened, or is larger."""
    path = plan.project.path(key)
    limit = plan.settings.max_file_bytes
    try:
        before = os.lstat(path)
        # As the reconciler opens a file to hash it: no symlink, no blocking
        # on a special file, not inherited, bytes as they are.
        fd = os.open(path, FILE_FLAGS)
    except FileNotFoundError:
        raise ConceptNotFound(provider.concept_id(key, root)) from None
    except OSError as exc:
        raise ConceptUnreadable(f"{key}: cannot open ({exc.strerror or exc})") from exc
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise ConceptUnreadable(f"{key}: changed while it was opened; ask again")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConceptUnreadable(f"{key}: larger than max_file_bytes ({limit}); not a concept")
    return data


def _links(plan: Plan, root: str, links: Iterable[ConceptLink]) -> Iterable[Link]:
    """The provider's links; one naming a file inside the same scope gets
    that file's concept ID (whether or not the file exists)."""
    from ctindex.providers import load

    for link in links:
        cid = None
        if link.key is not None and is_normal_key(link.key):
            found = plan.find_scope(link.key)
            if found is not None and found[0].root == root:
                cid = load(found[0].provider).concept_id(link.key, root)
        yield Link(link.text, link.target, cid)


def suggestions(
    plan: Plan, known: Iterable[tuple[str, str]], wanted: str, scope: str | None
) -> tuple[str, ...]:
    """Close matches among the `known` (concept ID, key) pairs: the IDs
    ending in the asked one's last segment first (`orders` ->
    `tables/orders`), then difflib's closest (ctindex/base/suggest.py).
    Linear in the number of concepts."""
    from ctindex.base.suggest import close_matches

    want_root = None if scope is None else scope.strip("/")
    ids = sorted(
        {cid for cid, key in known if want_root is None or _root_of(plan, key) == want_root}
    )
    wanted = _bare(wanted.strip(), _index_provider())
    last = wanted.rsplit("/", 1)[-1].casefold()
    same_end = [i for i in ids if i.rsplit("/", 1)[-1].casefold() == last]
    close = close_matches(wanted, ids, n=SUGGESTIONS)
    out: list[str] = []
    for cid in (*same_end, *close):
        if cid not in out:
            out.append(cid)
    return tuple(out[:SUGGESTIONS])


def _root_of(plan: Plan, key: str) -> str | None:
    found = plan.find_scope(key)
    return None if found is None else found[0].root


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
