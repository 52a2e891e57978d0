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
from collections.abc import Iterable, Iterator
from typing import Any

from ctindex.providers.okf_markdown import SEP, Analysis, Document, analyze, parse
from ctindex.search.matcher import path_matches

_SEP_RANK = 0xFFFFFFFF


class MemoryPartition:
    """Documents held in memory (the oracle's single partition)."""

    def __init__(self, docs: list[Document]) -> None:
        self.docs = sorted(docs, key=lambda d: d.key)
        self.analyses: list[Analysis] = [analyze(d) for d in self.docs]
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

    def prefix_docs(self, prefix: str) -> set[int]:
        out: set[int] = set()
        for t, docs in self._post.items():
            if t.startswith(prefix):
                out.update(docs)
        return out

    def rank(self, term: str) -> int | None:
        return self._rank.get(term) if term in self._post else None

    def sequences(self, docs: Iterable[int]) -> Iterator[tuple[int, array[Any]]]:
        for d in docs:
            yield d, array("I", [self._rank[t] for t in self.analyses[d].tokens])

    def sep_rank(self) -> int:
        return _SEP_RANK

    def path_prefix(self, prefix: str) -> set[int]:
        return {i for i, d in enumerate(self.docs) if path_matches(d.key, prefix)}

    def lengths(self) -> list[int]:
        return [a.length for a in self.analyses]

    def length_sum(self) -> int:
        return sum(a.length for a in self.analyses)


def eligible_files(root: str, flt: Any) -> Iterator[tuple[str, str]]:
    """(key, filesystem path) of every file the path filter accepts."""
    for top in flt.roots():
        stack = [top]
        while stack:
            folder = stack.pop()
            path = os.path.join(root, folder) if folder else root
            try:
                entries = list(os.scandir(path))
            except OSError:
                continue
            for e in entries:
                key = f"{folder}/{e.name}" if folder else e.name
                try:
                    st = os.lstat(e.path)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if flt.descend(key):
                        stack.append(key)
                elif flt.accept(key, st):
                    yield key, e.path


def read_documents(root: str, plan: Any) -> tuple[list[Document], list[str]]:
    """Parse every eligible file: (documents, provider error messages)."""
    from ctindex.indexer import scope_root_of

    docs: list[Document] = []
    errors: list[str] = []
    for key, path in eligible_files(root, plan.path_filter()):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # vanished or unreadable since the walk: not part of the answer
        try:
            with os.fdopen(fd, "rb") as f:
                data = f.read()
        except OSError:
            continue
        got = parse(key, data, scope_root_of(plan, key))
        if isinstance(got, Document):
            docs.append(got)
        else:
            errors.append(got.message)
    return docs, errors
