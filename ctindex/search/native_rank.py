"""The ranking loops' optional C twin (ctindex/search/_rank.c), typed.

``module()`` is None when it is not built or ``CTINDEX_PURE=1``
(ctindex/base/native_modules.py); ctindex/search/matcher.py then runs its pure
functions, which the C ones match bit for bit.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, cast

from ctindex.base import native_modules
from ctindex.store.durable import crc
from ctindex.store.segment import ENTRY, LITTLE, from_le

# (got, posting, only, lens, a, bl, wf, k1): matcher._field_scores_py
FieldScores = Callable[
    [
        dict[int, float],
        dict[int, int],
        "set[int] | None",
        Sequence[int],
        float,
        float,
        float,
        float,
    ],
    None,
]
# (got, main, only, fields, lengths, flens, weights, a, bl, wf, k1):
# matcher._body_scores_py
BodyScores = Callable[
    [
        dict[int, float],
        dict[int, int],
        "set[int] | None",
        tuple[dict[int, int], dict[int, int], dict[int, int]],
        Sequence[int],
        tuple[Sequence[int], Sequence[int], Sequence[int]],
        tuple[int, int, int],
        float,
        float,
        float,
        float,
    ],
    None,
]


class RankModule(Protocol):
    def field_scores(
        self,
        got: dict[int, float],
        posting: dict[int, int],
        only: set[int] | None,
        lens: Sequence[int],
        a: float,
        bl: float,
        wf: float,
        k1: float,
        /,
    ) -> None: ...
    def body_scores(
        self,
        got: dict[int, float],
        main: dict[int, int],
        only: set[int] | None,
        fields: tuple[dict[int, int], dict[int, int], dict[int, int]],
        lengths: Sequence[int],
        flens: tuple[Sequence[int], Sequence[int], Sequence[int]],
        weights: tuple[int, int, int],
        a: float,
        bl: float,
        wf: float,
        k1: float,
        /,
    ) -> None: ...
    def add_into(self, scores: dict[int, float], got: dict[int, float], /) -> None: ...
    def max_into(self, best: dict[int, float], got: dict[int, float], /) -> None: ...
    def mask(self, ndocs: int, docs: set[int], /) -> bytearray: ...
    def gather(self, acc: array[float], docs: set[int], /) -> dict[int, float]: ...
    def score_term(
        self,
        acc: array[float],
        mask: bytearray,
        main: tuple[array[int], array[int]],
        fields: tuple[tuple[array[int], array[int]] | None, ...],
        lengths: Sequence[int],
        flens: tuple[Sequence[int], ...],
        fparams: tuple[tuple[float, float, float], ...],
        body: tuple[float, float, float],
        weights: tuple[int, int, int],
        k1: float,
        add: bool,
        /,
    ) -> None: ...
    def add_arrays(self, acc: array[float], other: array[float], /) -> None: ...
    def kth_largest(self, dicts: Sequence[dict[int, float]], k: int, /) -> float: ...
    def at_least(self, scores: dict[int, float], bar: float, /) -> list[int]: ...
    def min_span(self, seq: array[int], ranks: list[int], sep: int, /) -> int | None: ...
    def prefix_union(
        self, data: bytes, first: int, entries: bytes, wide: bool, ndocs: int, /
    ) -> tuple[set[int], int]: ...


def module() -> RankModule | None:
    return cast("RankModule | None", native_modules.load("ctindex.search._rank"))


PrefixUnion = Callable[[bytes, int, bytes, bool, int], tuple[set[int], int]]


def prefix_union() -> PrefixUnion:
    """`prefix_union_py` or its C twin when built."""
    native = module()
    return prefix_union_py if native is None else native.prefix_union


def prefix_union_py(
    data: bytes, first: int, entries: bytes, wide: bool, ndocs: int
) -> tuple[set[int], int]:
    """(ids, bad): the union of the doc ids of the dictionary `entries`
    (packed ENTRY records: postings offset, df, CRC) whose postings lie in
    `data`, read from postings offset `first` (a prefix's run:
    ctindex/store/segment_read.py `prefix_postings`). Each posting is
    checked against its CRC before it is used. Most frequent terms first:
    once ndocs ids are in, the rest could add nothing (a short prefix often
    matches every document), so they are not read. `bad` is the index in
    `entries` of the first posting, in that order, lying outside `data` or
    failing its CRC (ids then empty), else -1.

    The pure path, and the specification of ctindex/search/_rank.c
    `prefix_union`: the one Python step per term left here is a CRC and a
    C-speed ``set.update`` of a view of the read."""
    code: Literal["I", "H"] = "I" if wide else "H"
    width = 6 if wide else 4  # a doc id and a u16 tf per document
    if len(entries) % ENTRY.size:
        raise ValueError(f"prefix_union: entries of {ENTRY.size} bytes")
    rows = list(ENTRY.iter_unpack(entries))
    order = sorted(range(len(rows)), key=lambda i: -rows[i][1])
    view = memoryview(data)
    out: set[int] = set()
    for i in order:
        off, df, want = rows[i]
        start, end = off - first, off - first + df * width
        if start < 0 or end > len(data) or crc(view[start:end]) != want:
            return set(), i
        ids = view[start : start + df * (width - 2)]
        out.update(ids.cast(code) if LITTLE else from_le(code, ids))
        if len(out) >= ndocs:
            break
    return out, -1
