"""Snippets: a short window of the body around the matched words.

A snippet is its plain text and the `[start, end)` spans of the matched
words in it (code points). The `snippet` string of the output wraps each
span in markers, `«` and `»` by default (docs/search.md "Snippets": one
character each, rare in English Markdown, which already uses `**`); a text
that holds guillemets itself is read exactly from the spans
(`snippet_text`, `snippet_matches`), and `--markers` picks others.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ctindex.providers import INDEX_PROVIDER, load

OPEN, CLOSE = "«", "»"
WINDOW_WORDS = 24  # words considered per candidate window
MAX_CHARS = 220  # of the plain text, before any markers

Span = tuple[int, int]


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


def snippet_spans(
    body: str, description: str, terms: Collection[str], prefixes: tuple[str, ...] = ()
) -> tuple[str, tuple[Span, ...]]:
    """(plain text, matched spans) of the best window of `body` (most distinct
    matched terms, earliest on a tie), falling back to the description, then
    to the start of the body. A word is matched when its term is one of
    `terms` or starts with one of `prefixes`."""
    for text in (body, description):
        spans = list(load(INDEX_PROVIDER).term_spans(text))
        marked = {t for _, _, t in spans if t in terms or (prefixes and t.startswith(prefixes))}
        hits = [i for i, (_, _, t) in enumerate(spans) if t in marked]
        if hits:
            return _window(text, spans, hits, marked)
    return _clip(*_flat([(description or body, False)]))


def _window(
    text: str, spans: list[tuple[int, int, str]], hits: list[int], terms: Collection[str]
) -> tuple[str, tuple[Span, ...]]:
    best = _best_start(spans, hits)
    first = max(best - 6, 0)
    last = min(best + WINDOW_WORDS, len(spans)) - 1
    start, end = spans[first][0], spans[last][1]
    pieces: list[tuple[str, bool]] = [("…" if first > 0 else "", False)]
    pos = start
    for i in range(first, last + 1):
        s, e, t = spans[i]
        if t in terms:
            pieces += ((text[pos:s], False), (text[s:e], True))
            pos = e
    pieces += ((text[pos:end], False), ("…" if last < len(spans) - 1 else "", False))
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
