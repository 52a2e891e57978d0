"""Snippets: a short window of the body around the matched words.

A snippet is its plain text and the `[start, end)` spans of the matched
words in it (code points). The `snippet` string of the output wraps each
span in markers, `«` and `»` by default (docs/search.md "Snippets": one
character each, rare in English Markdown, which already uses `**`); a text
that holds guillemets itself is read exactly from the spans
(`snippet_text`, `snippet_matches`), and `--markers` picks others.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence
from itertools import compress
from operator import itemgetter

from ctindex.providers import INDEX_PROVIDER, load
from ctindex.providers.base import AsciiTerms
from ctindex.search import native_snippet

OPEN, CLOSE = "«", "»"
WINDOW_WORDS = 24  # words considered per candidate window
BACK_WORDS = 6  # words shown before the window's first hit
MAX_CHARS = 220  # of the plain text, before any markers
# Bounded work per shown result, whatever the document's size: the first
# HEAD_CHARS characters are tokenized whole (all of a usual page, so its
# snippet is the best window of the page); past them, only REGION_CHARS
# around the first place a matched word's stem stands in the casefolded
# text (found by ``str.find``, at C speed) are. A 280 KB page costs about
# what a 4 KB one does.
HEAD_CHARS = 4_096
REGION_CHARS = 2_048
_SPACE = re.compile(r"\s")
# The words of an ASCII text, as the provider's `ascii_terms` promises them.
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")

Span = tuple[int, int]
_TERM = itemgetter(2)  # of a (start, end, term) span


def make_snippet(
    body: str, description: str, terms: Collection[str], prefixes: tuple[str, ...] = ()
) -> str:
    """The snippet with its matched words wrapped in « and »."""
    return mark(*snippet_spans(body, description, terms, prefixes))


def mark(text: str, spans: Sequence[Span], open_: str = OPEN, close: str = CLOSE) -> str:
    """`text` with every span wrapped in `open_` ... `close`."""
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out += (text[pos:start], open_, text[start:end], close)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def snippets(
    texts: Sequence[tuple[str, str]], terms: Collection[str], prefixes: tuple[str, ...] = ()
) -> list[tuple[str, tuple[Span, ...]]]:
    """`snippet_spans` of each (body, description), the shown results of a
    query: what each would look up again (the provider, the C module, the
    stem memo) is looked up once, and a short ASCII body with a matched
    word, the usual page, goes straight to the C window."""
    native = native_snippet.module()
    ascii_terms = load(INDEX_PROVIDER).ascii_terms() if native is not None else None
    out: list[tuple[str, tuple[Span, ...]]] = []
    for body, description in texts:
        if ascii_terms is not None and len(body) <= HEAD_CHARS and body.isascii():
            assert native is not None
            got = _native_window(native, ascii_terms, body, terms, prefixes)
            if got is not None:  # as snippet_spans' one piece of such a body
                core, spans_in, more_before, more_after = got
                lead, trail = ("…" if more_before else ""), ("…" if more_after else "")
                if lead:
                    spans_in = [(s + 1, e + 1) for s, e in spans_in]
                out.append(_clip(lead + core + trail, spans_in))
                continue
        out.append(snippet_spans(body, description, terms, prefixes))
    return out


def snippet_spans(
    body: str, description: str, terms: Collection[str], prefixes: tuple[str, ...] = ()
) -> tuple[str, tuple[Span, ...]]:
    """(plain text, matched spans) of the best window of `body` (most distinct
    matched terms, earliest on a tie), falling back to the description, then
    to the start of the body. A word is matched when its term is one of
    `terms` or starts with one of `prefixes`. A long text is read in bounded
    pieces (`_pieces`)."""
    provider = load(INDEX_PROVIDER)
    native = native_snippet.module()
    ascii_terms = provider.ascii_terms() if native is not None else None
    for text in (body, description):
        for start, end in _pieces(text, terms, prefixes):
            piece = text[start:end]
            if native is not None and ascii_terms is not None and piece.isascii():
                got = _native_window(native, ascii_terms, piece, terms, prefixes)
                if got is None:
                    continue
                core, spans_in, more_before, more_after = got
                lead = "…" if more_before or start > 0 else ""
                trail = "…" if more_after or end < len(text) else ""
                if lead:
                    spans_in = [(s + 1, e + 1) for s, e in spans_in]
                return _clip(lead + core + trail, spans_in)
            found = provider.term_spans(piece)
            spans = [(s + start, e + start, t) for s, e, t in found] if start else list(found)
            # Distinct terms are tested once; the hits are then found by
            # C-level passes (map, compress), not a Python step per word.
            present = set(map(_TERM, spans))
            marked = {t for t in present if t in terms or (prefixes and t.startswith(prefixes))}
            hits = (
                list(compress(range(len(spans)), map(marked.__contains__, map(_TERM, spans))))
                if marked
                else []
            )
            if hits:
                return _window(text, spans, hits, marked, start > 0, end < len(text))
    return _clip(*_flat([((description or body)[:HEAD_CHARS], False)]))


def _native_window(
    native: native_snippet.SnippetModule,
    ascii_terms: AsciiTerms,
    piece: str,
    terms: Collection[str],
    prefixes: tuple[str, ...],
) -> native_snippet.Window | None:
    """`_window`'s result for an ASCII piece, made by the C twin: None when
    no word of it is matched. A word whose term is not known yet is stemmed
    (with the piece's other words) and the piece read again."""
    try:
        return native.window(piece, ascii_terms.stems, terms, prefixes, WINDOW_WORDS, BACK_WORDS)
    except KeyError:
        ascii_terms.fill(_ASCII_WORD.findall(piece))
        return native.window(piece, ascii_terms.stems, terms, prefixes, WINDOW_WORDS, BACK_WORDS)


def _pieces(
    text: str, terms: Collection[str], prefixes: tuple[str, ...]
) -> Iterator[tuple[int, int]]:
    """The character ranges of `text` to tokenize, the next one asked for
    only when the last held no matched word: all of it when short; else its
    head when a matched word's stem first occurs there (then the region
    around its first occurrence past the head) or nowhere (a stem,
    casefolded, begins the casefolded word in all but its last letter or
    two, ``specifi`` for "specified", which accents folded by the tokenizer
    may defeat); else only the region around that first occurrence.
    Ranges end on whitespace, so no word is cut."""
    if len(text) <= HEAD_CHARS:
        yield 0, len(text)
        return
    head = _cut(text, HEAD_CHARS)
    stems = [s for s in _stems(terms, prefixes) if s]
    if text.isascii() and _in_head(text, head, stems):
        # The usual case: the head holds a stem; the rest of a long text is
        # folded only if the head's words do not match after all.
        yield 0, head
        yield from _later(_folded(text), text, head, stems)
        return
    folded = _folded(text)
    if len(folded) != len(text):  # offsets would not line up: the head only
        yield 0, head
        return
    found = [at for at in (_FOLDS.find(text, folded, s, 0) for s in stems) if at >= 0]
    if not found:  # no stem anywhere: the head, for the fallback's sake
        yield 0, head
        return
    at = min(found)
    if at >= head:
        yield _region(text, at, head)
        return
    # A stem inside the head may be part of another word: the region past
    # the head is the next piece to try.
    yield 0, head
    yield from _later(folded, text, head, stems)


def _stems(terms: Collection[str], prefixes: tuple[str, ...]) -> list[str]:
    return [t[: max(len(t) - 1, 3)] for t in terms if t[:1].isalnum()] + list(prefixes)


def _in_head(text: str, head: int, stems: list[str]) -> bool:
    """Some stem begins before `head` in the folded ASCII `text` (folding
    ASCII is lowering it, character for character): only the head and the
    longest stem's reach past it are folded."""
    near = text[: head + max(map(len, stems), default=0)].lower()
    return any(0 <= near.find(s) < head for s in stems)


def _later(folded: str, text: str, head: int, stems: list[str]) -> Iterator[tuple[int, int]]:
    """The region around the first stem past the head, if any."""
    later = [x for x in (_FOLDS.find(text, folded, s, head) for s in stems) if x >= 0]
    if later:
        yield _region(text, min(later), head)


def _folded(text: str) -> str:
    """`text` as the stems are spelt (casefolded, and accent-folded as the
    tokenizer folds: ``résumé`` is found by ``resum``) where that keeps one
    character per character, so offsets in it are offsets in `text`; else
    casefolded only (then an accented word past the head is not found and
    the head is the snippet's). A long text's fold is kept (`_Folds`)."""
    kept = _FOLDS.get(text)
    if kept is not None:
        return kept
    folded = text.casefold()
    if not text.isascii():
        from ctindex.providers.folding import fold

        accentless = fold(text).casefold()
        folded = accentless if len(accentless) == len(text) else folded
    if len(text) > HEAD_CHARS:
        _FOLDS.put(text, folded)
    return folded


class _Folds:
    """The folds of the long texts met last, and where stems were found in
    them. A long-lived reader (ctindex/api.py) shows the same large pages
    query after query and keeps their records, so the very same str comes
    back; folding a 280 KB page took ~85 us, more than the rest of its
    snippet, and finding a stem that stands deep in it or nowhere ~50 us
    more, each time. Keyed by the text's identity, the text held so its id
    is not reused (hashing it would cost what folding does); bounded by the
    characters held, text and fold, and by FINDS places per text."""

    LIMIT = 2_000_000
    FINDS = 256  # (stem, from) -> place, per kept text; forgotten all at once past it

    def __init__(self) -> None:
        self._kept: OrderedDict[int, tuple[str, str, dict[tuple[str, int], int]]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()  # Index objects of several threads share it

    def get(self, text: str) -> str | None:
        got = self._entry(text)
        return None if got is None else got[1]

    def _entry(self, text: str) -> tuple[str, str, dict[tuple[str, int], int]] | None:
        with self._lock:
            got = self._kept.get(id(text))
            if got is None or got[0] is not text:
                return None
            self._kept.move_to_end(id(text))
            return got

    def find(self, text: str, folded: str, stem: str, start: int) -> int:
        """``folded.find(stem, start)``, remembered while `text`'s fold is
        kept (a pure function of the two strings: the same answer either way)."""
        got = self._entry(text)
        if got is None or got[1] is not folded:
            return folded.find(stem, start)
        places = got[2]
        at = places.get((stem, start))
        if at is None:
            at = folded.find(stem, start)
            if len(places) >= self.FINDS:
                places.clear()
            places[stem, start] = at
        return at

    def put(self, text: str, folded: str) -> None:
        size = len(text) + len(folded)
        if size > self.LIMIT:
            return
        with self._lock:
            old = self._kept.pop(id(text), None)
            if old is not None:
                self._chars -= len(old[0]) + len(old[1])
            self._kept[id(text)] = (text, folded, {})
            self._chars += size
            while self._chars > self.LIMIT:
                _, (t, f, _places) = self._kept.popitem(last=False)
                self._chars -= len(t) + len(f)


_FOLDS = _Folds()


def _region(text: str, at: int, head: int) -> tuple[int, int]:
    start = max(_cut(text, at - REGION_CHARS // 4), head)
    return start, _cut(text, start + REGION_CHARS)


def _cut(text: str, at: int) -> int:
    """The first whitespace at or after `at` (or the end of `text`)."""
    if at <= 0:
        return 0
    if at >= len(text):
        return len(text)
    m = _SPACE.search(text, at)
    return m.start() if m else len(text)


def _window(
    text: str,
    spans: list[tuple[int, int, str]],
    hits: list[int],
    terms: Collection[str],
    before: bool = False,
    after: bool = False,
) -> tuple[str, tuple[Span, ...]]:
    """`before`/`after`: `spans` cover a piece of `text` that has more
    words before / after it."""
    best = _best_start(spans, hits)
    first = max(best - BACK_WORDS, 0)
    last = min(best + WINDOW_WORDS, len(spans)) - 1
    start, end = spans[first][0], spans[last][1]
    pieces: list[tuple[str, bool]] = [("…" if first > 0 or before else "", False)]
    pos = start
    for i in range(first, last + 1):
        s, e, t = spans[i]
        if t in terms:
            pieces += ((text[pos:s], False), (text[s:e], True))
            pos = e
    pieces += ((text[pos:end], False), ("…" if last < len(spans) - 1 or after else "", False))
    return _clip(*_flat(pieces))


def _flat(pieces: Sequence[tuple[str, bool]]) -> tuple[str, list[Span]]:
    """The pieces joined with every run of whitespace made one space and none
    at either end (`" ".join(text.split())`), and the spans the matched
    pieces' words take in the result."""
    parts: list[str] = []
    spans: list[Span] = []
    length = 0
    space = False  # whitespace seen since the last word
    for piece, matched in pieces:
        if not piece:
            continue
        space = space or piece[0].isspace()
        for n, word in enumerate(piece.split()):
            if (space or n) and length:
                parts.append(" ")
                length += 1
            space = False
            parts.append(word)
            if matched:
                spans.append((length, length + len(word)))
            length += len(word)
        space = space or piece[-1].isspace()
    return "".join(parts), spans


def _best_start(spans: list[tuple[int, int, str]], hits: list[int]) -> int:
    """The hit whose window of WINDOW_WORDS words holds the most distinct
    matched terms, the earliest on a tie. One sliding window over the
    (increasing) hits with a count per term: each hit enters and leaves it
    once, so a document with hundreds of thousands of hits costs linear time
    (re-collecting the window for every hit was quadratic)."""
    counts: dict[str, int] = {}
    best, best_score = hits[0], -1
    ahead = 0  # hits[:ahead] have entered the window
    for behind, h in enumerate(hits):
        while ahead < len(hits) and hits[ahead] < h + WINDOW_WORDS:
            term = spans[hits[ahead]][2]
            counts[term] = counts.get(term, 0) + 1
            ahead += 1
        if len(counts) > best_score:
            best, best_score = h, len(counts)
        term = spans[hits[behind]][2]  # h leaves before the next window
        if counts[term] == 1:
            del counts[term]
        else:
            counts[term] -= 1
    return best


def _clip(text: str, spans: list[Span]) -> tuple[str, tuple[Span, ...]]:
    if len(text) <= MAX_CHARS:
        return text, tuple(spans)
    cut = text.rfind(" ", 0, MAX_CHARS)
    cut = cut if cut > 0 else MAX_CHARS
    kept = tuple((s, min(e, cut)) for s, e in spans if s < cut)
    return text[:cut] + "…", kept
