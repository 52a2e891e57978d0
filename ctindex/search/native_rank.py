"""The ranking loops' optional C twin (ctindex/search/_rank.c), typed.

``module()`` is None when it is not built or ``CTINDEX_PURE=1``
(ctindex/base/native_modules.py); ctindex/search/matcher.py then runs its pure
functions, which the C ones match bit for bit. The pure twins of the scans
over token streams live here, ``phrase_scan_py`` and ``span_scan_py`` (with
``min_span_py``): their caller is the segment reader
(ctindex/store/segment_read.py `phrase_docs`, `spans`), which the search
side hands the scan it should use (``phrase_scan``, ``span_scan``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, cast

from ctindex.base import native_modules
from ctindex.store.durable import crc
from ctindex.store.segment import ENTRY, LITTLE, from_le
from ctindex.store.segment_read import PhraseScan, SpanScan

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
    def score_docs(
        self,
        scores: dict[int, float],
        docs: set[int],
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
    def kth_largest(
        self, parts: Sequence[dict[int, float] | tuple[array[float], bytearray]], k: int, /
    ) -> float: ...
    def at_least(
        self, scores: dict[int, float] | tuple[array[float], bytearray], bar: float, /
    ) -> list[int]: ...
    def min_span(self, seq: array[int], ranks: list[int], sep: int, /) -> int | None: ...
    def span_scan(
        self,
        runs: Sequence[bytes],
        starts: Sequence[int],
        offs: array[int],
        docs: list[int],
        ranks: list[int],
        sep: int,
        size: int,
        /,
    ) -> list[int | None]: ...
    def anchor_positions(self, seq: array[int], anchor: int, limit: int, /) -> list[int]: ...
    def restrict(self, ids: array[int], tfs: array[int], docs: set[int], /) -> dict[int, int]: ...
    def phrase_scan(
        self,
        run: bytes,
        offs: array[int],
        start: int,
        wanted: list[int],
        pattern: bytes,
        size: int,
        /,
    ) -> list[int]: ...
    def prefix_union(
        self, data: bytes, first: int, entries: bytes, wide: bool, ndocs: int, /
    ) -> tuple[set[int], int]: ...


def module() -> RankModule | None:
    return cast("RankModule | None", native_modules.load("ctindex.search._rank"))


def restrict() -> Callable[[array[int], array[int], set[int]], dict[int, int]]:
    """`restrict_py`'s C twin when built (a build older than it serves the pure one)."""
    native: Callable[[array[int], array[int], set[int]], dict[int, int]] | None = getattr(
        module(), "restrict", None
    )
    return restrict_py if native is None else native


def restrict_py(ids: array[int], tfs: array[int], docs: set[int]) -> dict[int, int]:
    """{d: tfs[i]} for each of `docs` at ids[i] in a posting's sorted ids,
    each found by binary search (skipping the posting's bulk), in the
    iteration order of `docs`."""
    out: dict[int, int] = {}
    n = len(ids)
    for d in docs:
        at = bisect_left(ids, d)
        if at < n and ids[at] == d:
            out[d] = tfs[at]
    return out


def phrase_scan() -> PhraseScan:
    """The scan Segment.phrase_docs runs on each run of streams: C
    when built, else ``phrase_scan_py``."""
    # A build older than the scan (not rebuilt since) serves the pure path.
    native: PhraseScan | None = getattr(module(), "phrase_scan", None)
    return phrase_scan_py if native is None else native


def phrase_scan_py(
    run: bytes, offs: array[int], start: int, wanted: list[int], pattern: bytes, size: int
) -> list[int]:
    """The ids of `wanted` (increasing) whose token stream holds `pattern`
    (the phrase's ranks, `size` bytes each, little-endian) at an item
    boundary. `run` holds the streams section from byte `start` on; document
    d's stream is its bytes `offs[d]` to `offs[d + 1]` (offsets are whole
    items, so an item boundary of the run is one of every stream in it).

    One ``bytes.find`` pass from the first wanted stream to the end of the
    last: a byte match off an item boundary resumes at the next boundary,
    and a decided document (a hit, a hit spilling into the next stream, or
    not wanted) is skipped whole, so a stream full of occurrences costs
    one find, not one per occurrence."""
    if not pattern or not wanted:
        raise ValueError("phrase_scan: an empty pattern or no wanted document")
    if size <= 0:
        raise ValueError("phrase_scan: the item size must be positive")
    n = len(wanted)
    top = wanted[-1] + 1
    stop = offs[top] - start  # a hit past the last wanted stream is of no use
    if offs[wanted[0]] < start or stop > len(run):
        raise ValueError("phrase_scan: a wanted stream outside the run")
    out: list[int] = []
    i = 0  # wanted[i]: the first wanted document not yet decided
    at = run.find(pattern, offs[wanted[0]] - start, stop)
    while at >= 0:
        if at % size:
            at = run.find(pattern, at - at % size + size, stop)
            continue
        pos = start + at
        d = bisect_right(offs, pos, wanted[i], top) - 1  # the stream the hit starts in
        i = bisect_left(wanted, d, i)
        if i < n and wanted[i] == d:
            if pos + len(pattern) <= offs[d + 1]:
                out.append(d)
            i += 1
        if i == n:
            break
        at = run.find(pattern, offs[wanted[i]] - start, stop)
    return out


def min_span_py(seq: array[int], ranks: Sequence[int], sep: int) -> int | None:
    """The fewest consecutive tokens of `seq` holding every one of `ranks`
    with no `sep` (a field boundary) among them; None when no run does.
    The specification of ctindex/search/_rank.c `min_span` and `span_scan`;
    ctindex/search/matcher.py `min_span` narrows a long stream first."""
    k = len(ranks)
    want = {r: i for i, r in enumerate(ranks)}
    want[sep] = -1
    events = [(pos, want[x]) for pos, x in enumerate(seq) if x in want]
    if len({i for _, i in events} - {-1}) < k:
        return None
    last = [-1] * k
    seen = 0
    best: int | None = None
    for pos, i in events:
        if i < 0:  # a field boundary: a run never spans it
            last = [-1] * k
            seen = 0
            continue
        if last[i] < 0:
            seen += 1
        last[i] = pos
        if seen == k:
            span = pos - min(last) + 1
            if best is None or span < best:
                best = span
    return best


def span_scan() -> SpanScan:
    """The scan Segment.spans runs on each run of streams: C when built,
    else ``span_scan_py``."""
    native: SpanScan | None = getattr(module(), "span_scan", None)
    return span_scan_py if native is None else native


def span_scan_py(
    runs: Sequence[bytes],
    starts: Sequence[int],
    offs: array[int],
    docs: list[int],
    ranks: list[int],
    sep: int,
    size: int,
) -> list[int | None]:
    """`min_span_py` of each of `docs`' whole streams (increasing ids):
    document d's is the bytes `offs[d]` to `offs[d + 1]` of the streams
    section, which lie in one of `runs` (in increasing order; `runs[k]`
    holds the section from byte `starts[k]` on), items of `size` bytes,
    little-endian."""
    if size not in (2, 4):
        raise ValueError("span_scan: items of 2 or 4 bytes")
    if len(runs) != len(starts):
        raise ValueError("span_scan: a start for each run")
    code: Literal["H", "I"] = "H" if size == 2 else "I"
    views = [memoryview(run) for run in runs]
    out: list[int | None] = []
    k = 0  # the run the last stream lay in: later ones lie in it or after
    for d in docs:
        if d < 0 or d + 1 >= len(offs) or offs[d + 1] < offs[d] or (offs[d + 1] - offs[d]) % size:
            raise ValueError("span_scan: a stream outside the runs")
        while k < len(runs) and not (
            offs[d] >= starts[k] and offs[d + 1] - starts[k] <= len(runs[k])
        ):
            k += 1
        if k == len(runs):
            raise ValueError("span_scan: a stream outside the runs")
        lo, hi = offs[d] - starts[k], offs[d + 1] - starts[k]
        out.append(min_span_py(from_le(code, views[k][lo:hi]), ranks, sep))
    return out


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
