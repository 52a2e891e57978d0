"""How much memory building segments may hold at once: the build budget.

A segment is built in memory and written whole (segment_build.py), so what
one build holds grows with the documents put into it. A pass therefore cuts
its documents into parts whose estimated build cost fits the budget, and
builds one segment per part: a rebuild of a million documents writes more
segments, never a bigger process (docs/architecture.md, "Memory").

The estimate is linear in a part's documents and their bytes. Its two
factors are measured (docs/decisions/build-memory.md): a segment builder fed
the tldr pages (~470 bytes each) peaked at about 2.2 KB a document, and fed
pages of 19 KB and 58 KB, at 3.7 and 4.0 bytes per byte of text (postings,
token streams, compressed text, and the batch being analysed). The
estimate is at or above each.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ctindex.policy.config import INT_SETTINGS

PER_DOC = 1536  # bytes a builder holds per document, besides its text
PER_BYTE = 4  # bytes a builder holds per byte of document text


def _default_bytes() -> int:
    default = INT_SETTINGS["max_build_memory_bytes"][0]
    assert default is not None
    return default


DEFAULT_BYTES = _default_bytes()  # the `max_build_memory_bytes` setting's default
# A part holds at least this many documents (or what is left): a budget so
# small that every document became its own segment would help nobody.
MIN_PART_DOCS = 64


def estimate(docs: int, text_bytes: int) -> int:
    """The bytes a segment builder holds for `docs` documents of `text_bytes`."""
    return PER_DOC * docs + PER_BYTE * text_bytes


@dataclass(frozen=True)
class BuildBudget:
    """`total` bytes, shared by `builders` segment builds running at once."""

    total: int = DEFAULT_BYTES
    builders: int = 1

    @property
    def per_build(self) -> int:
        """What one segment build may hold."""
        return max(1, self.total // max(1, self.builders))

    def with_builders(self, builders: int) -> BuildBudget:
        return BuildBudget(self.total, builders)

    def full(self, docs: int, text_bytes: int) -> bool:
        """A segment this big is left as it is by merges made to lower the
        segment count: merging it would only copy it (writer.py)."""
        return 2 * estimate(docs, text_bytes) >= self.per_build

    def parts(self, sized: Iterable[tuple[str, int]], max_docs: int = 0) -> Iterator[list[str]]:
        """The keys of `sized` (key, bytes; in order) cut into consecutive
        runs whose estimate fits `per_build`, of at most `max_docs` keys
        each when that is given."""
        cap = self.per_build
        part: list[str] = []
        cost = 0
        for key, size in sized:
            add = estimate(1, size)
            if part and (
                len(part) == max_docs or (cost + add > cap and len(part) >= MIN_PART_DOCS)
            ):
                yield part
                part, cost = [], 0
            part.append(key)
            cost += add
        if part:
            yield part
