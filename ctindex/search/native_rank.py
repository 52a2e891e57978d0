"""The ranking loops' optional C twin (ctindex/search/_rank.c), typed.

``module()`` is None when it is not built or ``CTINDEX_PURE=1``
(ctindex/base/native_modules.py); ctindex/search/matcher.py then runs its pure
functions, which the C ones match bit for bit.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from ctindex.base import native_modules

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


def module() -> RankModule | None:
    return cast("RankModule | None", native_modules.load("ctindex.search._rank"))
