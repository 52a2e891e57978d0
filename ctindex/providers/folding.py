"""Accent and compatibility folding of text before it is split into words
(docs/provider.md, "Words and terms"): NFKD, then every combining mark
(Unicode category M) removed, as SQLite FTS5's unicode61 tokenizer does with
``remove_diacritics 2``. So ``Café``, ``naïve``, ``résumé`` (composed or
decomposed), ``ﬁle`` and ``²`` become ``Cafe``, ``naive``, ``resume``,
``file`` and ``2``; case is folded later, with the stem (okf_markdown.py).

ASCII text folds to itself and is returned as is: most text never pays.

Folding a text is folding each of its characters and joining the results
(NFKD's reordering only moves combining marks, which are all removed;
tests/ctindex/providers/test_folding.py checks it over every code point),
which is what lets ``fold_offsets`` map a word of the folded text back to
the characters it came from, for snippets.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from functools import lru_cache

# Where combining marks are (Unicode 15.1 and earlier): the BMP, plane 1 and
# plane 14's variation selectors. Plane 2 and 3 hold ideographs only, the
# others nothing or private use; tests/ctindex/providers/test_folding.py
# checks the whole range on the running Python.
MARK_PLANES = (range(0x20000), range(0xE0000, 0xE1000))
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


def _char_class(code_points: list[int]) -> str:
    """A regex character class body of `code_points` (sorted), as ranges."""
    ranges: list[tuple[int, int]] = []
    for cp in code_points:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


@lru_cache(maxsize=1)
def _marks() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Character classes of every combining mark, in the BMP and beyond it,
    built on the first non-ASCII text (about 15 ms, once per process). Two,
    because sre tests a class holding only BMP characters with one bitmap
    lookup and one reaching past it range by range (8x slower on text)."""
    category = unicodedata.category
    found = [cp for plane in MARK_PLANES for cp in plane if category(chr(cp))[0] == "M"]
    bmp = [cp for cp in found if cp < 0x10000]
    astral = [cp for cp in found if cp >= 0x10000]
    return re.compile(f"[{_char_class(bmp)}]+"), re.compile(f"[{_char_class(astral)}]+")


@lru_cache(maxsize=1 << 16)
def fold_run(run: str) -> str:
    """The fold of a run of non-ASCII characters (of any text, really; the
    cache pays off on runs, which are short and repeat: `é`, `ñ`, a curly quote)."""
    bmp, astral = _marks()
    out = bmp.sub("", unicodedata.normalize("NFKD", run))
    return astral.sub("", out) if out and max(out) > "\uffff" else out


def _fold_match(m: re.Match[str]) -> str:
    return fold_run(m.group())


def fold(text: str) -> str:
    """`text` with compatibility forms decomposed and combining marks
    removed: each run of non-ASCII characters folded on its own, which is
    the same as folding the whole text (see the module's docstring), and
    leaves the ASCII between them, most of most texts, alone."""
    if text.isascii():
        return text
    return _NON_ASCII_RUN.sub(_fold_match, text)


class FoldedText:
    """A text's fold with a map back: `origin(start, end)` is the span of the
    original text that the folded span [start, end) came from."""

    __slots__ = ("_ascii", "_folded_at", "_origin_at", "_source", "text")

    def __init__(self, text: str) -> None:
        self._source = text
        # Segments: a run of ASCII (folded to itself, offsets shift by a
        # constant) or one non-ASCII character (all of its fold maps to it).
        pieces: list[str] = []
        self._folded_at: list[int] = []
        self._origin_at: list[int] = []
        self._ascii: list[bool] = []
        pos = done = 0
        for m in _NON_ASCII.finditer(text):
            at = m.start()
            if at > done:
                self._segment(done, pos, True)
                pieces.append(text[done:at])
                pos += at - done
            folded = fold_run(text[at])
            if folded:
                self._segment(at, pos, False)
                pieces.append(folded)
                pos += len(folded)
            done = at + 1
        if done < len(text):
            self._segment(done, pos, True)
            pieces.append(text[done:])
        self.text = "".join(pieces)

    def _segment(self, origin: int, folded: int, ascii_run: bool) -> None:
        self._origin_at.append(origin)
        self._folded_at.append(folded)
        self._ascii.append(ascii_run)

    def _origin(self, pos: int, end: bool) -> int:
        k = bisect_right(self._folded_at, pos) - 1
        if self._ascii[k]:
            return self._origin_at[k] + pos - self._folded_at[k] + (1 if end else 0)
        return self._origin_at[k] + (1 if end else 0)

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The original span of the non-empty folded span [start, end),
        with the marks that follow it (``e`` + U+0301 is marked whole)."""
        src = self._source
        stop = self._origin(end - 1, True)
        while stop < len(src) and not src[stop].isascii() and not fold_run(src[stop]):
            stop += 1
        return self._origin(start, False), stop

    def origins(self, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """`origin` of each of `spans`, from one map of every folded
        position to its origin (built once, a slice a segment): a snippet
        maps every word of a text, and a bisect per end was most of that."""
        at = self._position_origins()
        src = self._source
        n = len(src)
        out: list[tuple[int, int]] = []
        for start, end in spans:
            stop = at[end - 1] + 1
            while stop < n and not src[stop].isascii() and not fold_run(src[stop]):
                stop += 1
            out.append((at[start], stop))
        return out

    def _position_origins(self) -> list[int]:
        """For each position of the folded text, where it came from."""
        at: list[int] = []
        bounds = [*self._folded_at, len(self.text)]
        for k, ascii_run in enumerate(self._ascii):
            length = bounds[k + 1] - bounds[k]
            origin = self._origin_at[k]
            at.extend(range(origin, origin + length) if ascii_run else [origin] * length)
        return at
