"""The ``--direct`` oracle: answer a query by reading the files, no index.

It walks the effective plan on its own (the plan's path filter, ``os.lstat``,
no reconciler, nothing under ``.ct/okf/``), parses every eligible file with
the same provider, and evaluates the query with the same matcher as the index
over an in-memory partition.
"""

from __future__ import annotations

import os
import stat
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ctindex.base.output import counted_keys
from ctindex.providers import INDEX_PROVIDER, load
from ctindex.providers.base import Analysis, Document
from ctindex.providers.fields import SEP
from ctindex.reconciler.oserr import GONE
from ctindex.search.matcher import path_matches
from ctindex.search.native_rank import min_span_py

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.reconciler.report import Bucket
    from ctindex.reconciler.walk import FsOps, PathFilter

_SEP_RANK = 0xFFFFFFFF


class MemoryPartition:
    """Documents held in memory (the oracle's single partition)."""

    def __init__(self, docs: list[Document], plan: Plan | None = None) -> None:
        """`plan` names each document's provider (its scope's); without
        one, every document is the index provider's."""
        self.docs = sorted(docs, key=lambda d: d.key)
        self.analyses: list[Analysis] = [
            load(provider_of(plan, d.key)).analyze(d) for d in self.docs
        ]
        self._post: dict[str, dict[int, int]] = {}
        for i, a in enumerate(self.analyses):
            for t, w in a.tfw.items():
                self._post.setdefault(t, {})[i] = w
        self._rank = {t: i for i, t in enumerate(sorted(self._post))}
        self._rank[SEP] = _SEP_RANK

    def universe(self) -> set[int]:
        return set(range(len(self.docs)))

    def size(self) -> int:
        return len(self.docs)

    def tf(self, term: str) -> dict[int, int]:
        return self._post.get(term, {})

    def df(self, term: str) -> int:
        return len(self._post.get(term, ()))

    def tf_in(self, term: str, docs: set[int]) -> dict[int, int]:
        full = self._post.get(term, {})
        return _restrict(full, docs)

    def term_docs(self, term: str) -> set[int]:
        return set(self._post.get(term, ()))

    def term_docs_in(self, term: str, docs: set[int]) -> set[int]:
        return set(self.tf_in(term, docs))

    def tf_over(self, term: str, docs: set[int]) -> tuple[dict[int, int], set[int] | None]:
        return self._post.get(term, {}), docs

    def prefix_docs(self, prefix: str) -> set[int]:
        out: set[int] = set()
        for t, docs in self._post.items():
            if t.startswith(prefix):
                out.update(docs)
        return out

    def rank(self, term: str) -> int | None:
        return self._rank.get(term) if term in self._post else None

    def sequences(self, docs: Iterable[int]) -> Iterator[tuple[int, array[int]]]:
        for d in docs:
            yield d, array("I", [self._rank[t] for t in self.analyses[d].tokens])

    def stream_lengths(self, docs: Sequence[int]) -> list[int]:
        return [len(self.analyses[d].tokens) for d in docs]

    def spans(self, docs: Sequence[int], ranks: Sequence[int], sep: int) -> list[int | None]:
        return [min_span_py(seq, ranks, sep) for _, seq in self.sequences(docs)]

    def sep_rank(self) -> int:
        return _SEP_RANK

    def path_prefix(self, prefix: str) -> set[int]:
        return {i for i, d in enumerate(self.docs) if path_matches(d.key, prefix)}

    def key(self, doc: int) -> str:
        return self.docs[doc].key

    def lengths(self) -> array[int]:
        return array("I", [a.length for a in self.analyses])

    def length_sum(self) -> int:
        return sum(a.length for a in self.analyses)

    def field_lengths(self) -> list[array[int]]:
        # arrays of u32, as a segment's: the C scoring loops read them
        return [array("I", [a.flens[f] for a in self.analyses]) for f in range(4)]

    def field_length_sums(self) -> list[int]:
        return [sum(a.flens[f] for a in self.analyses) for f in range(4)]

    def terms_with_prefix(self, prefix: str) -> list[str]:
        # Word terms only: ranking and facet terms start with a control character.
        return sorted(t for t in self._post if t.startswith(prefix) and t[:1].isalnum())


def _open_root(ops: FsOps, root: str, top: str) -> int | None:
    """The scope root's folder, each component opened without following a
    symlink (a symlinked or missing root is not walked: it is outside the
    canonical scope), like the reconciler."""
    from ctindex.reconciler.walk import DIR_FLAGS, ROOT_FLAGS

    try:
        fd = ops.open(root, ROOT_FLAGS)
    except OSError:
        return None
    for comp in top.split("/") if top else ():
        try:
            nfd = ops.open(comp, DIR_FLAGS, dir_fd=fd)
        except OSError:
            return None
        finally:
            ops.close(fd)
        fd = nfd
    return fd


def eligible_contents(
    root: str, flt: PathFilter, unread: Bucket | None = None, ops: FsOps | None = None
) -> Iterator[tuple[str, bytes]]:
    """(key, bytes) of every file the path filter accepts. Folders and files
    are opened relative to their parent folder's descriptor with O_NOFOLLOW:
    paths longer than PATH_MAX work, and a folder swapped for a symlink is
    never entered (the same guarantees as the index; the oracle must agree).
    Without dir_fd the reconciler's path primitives stand in
    (ctindex/reconciler/path_folders.py), as they do for the index.

    What exists but cannot be read (a folder or file refused, a folder too
    deep) is left out of the answer and counted in `unread`, never dropped
    in silence; what vanished meanwhile is simply not there."""
    from ctindex.reconciler.report import Bucket
    from ctindex.reconciler.walk import FsOps

    walk = _DirectWalk(ops or FsOps(), flt, unread if unread is not None else Bucket())
    for top in flt.roots():
        fd = _open_root(walk.ops, root, top)
        if fd is not None:
            yield from walk.folder(fd, top, 0)


class _DirectWalk:
    def __init__(self, ops: FsOps, flt: PathFilter, unread: Bucket) -> None:
        self.ops, self.flt, self.unread = ops, flt, unread

    def _failed(self, key: str, exc: OSError) -> None:
        if exc.errno not in GONE:
            self.unread.add(key)

    def folder(self, dfd: int, folder: str, depth: int) -> Iterator[tuple[str, bytes]]:
        """Depth first, one descriptor per level (closed here)."""
        from ctindex.reconciler.walk import DEFAULT_MAX_DEPTH, DIR_FLAGS

        ops, flt = self.ops, self.flt
        try:
            with ops.scandir(dfd) as it:
                entries = list(it)
        except OSError as exc:
            ops.close(dfd)
            self._failed(folder, exc)
            return
        try:
            subfolders = []
            for e in entries:
                key = f"{folder}/{e.name}" if folder else e.name
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError as exc:
                    self._failed(key, exc)
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if flt.descend(key):
                        if depth < DEFAULT_MAX_DEPTH:
                            subfolders.append((key, e.name))
                        else:
                            self.unread.add(key)
                elif flt.accept(key, st):
                    data = self._read(dfd, key, e.name)
                    if data is not None:
                        yield key, data
            for key, name in subfolders:
                try:
                    sub = ops.open(name, DIR_FLAGS, dir_fd=dfd)
                except OSError as exc:
                    self._failed(key, exc)
                    continue
                yield from self.folder(sub, key, depth + 1)
        finally:
            ops.close(dfd)

    def _read(self, dfd: int, key: str, name: str) -> bytes | None:
        from ctindex.reconciler.hashing import FILE_FLAGS

        try:
            fd = self.ops.open(name, FILE_FLAGS, dir_fd=dfd)
        except OSError as exc:
            self._failed(key, exc)
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read()
        except OSError as exc:
            self._failed(key, exc)
            return None
        finally:
            os.close(fd)


def unread_note(unread: Bucket) -> str | None:
    """The answer's note about what the walk could not read, or None."""
    if not unread.count:
        return None
    return f"could not read, so not searched: {counted_keys(unread.count, sorted(unread.sample))}"


def provider_of(plan: Plan | None, key: str) -> str:
    """The id of the provider that decides `key`: its scope's."""
    found = plan.find_scope(key) if plan is not None else None
    return found[0].provider if found else INDEX_PROVIDER


def read_documents(
    root: str, plan: Plan, unread: Bucket | None = None
) -> tuple[list[Document], list[str]]:
    """Parse every eligible file: (documents, provider error messages);
    what could not be read is counted in `unread`."""
    from ctindex.policy.plan import scope_root_of

    docs: list[Document] = []
    errors: list[str] = []
    for key, data in eligible_contents(root, plan.path_filter(), unread):
        got = load(provider_of(plan, key)).parse(key, data, scope_root_of(plan, key))
        if isinstance(got, Document):
            docs.append(got)
        else:
            errors.append(got.message)
    return docs, errors


def _restrict(full: dict[int, int], docs: set[int]) -> dict[int, int]:
    """`full` on `docs`, walking the smaller of the two."""
    if len(full) <= len(docs):
        return {d: t for d, t in full.items() if d in docs}
    return {d: full[d] for d in docs if d in full}
